-- 003_judge: the LLM judge (README "LLM judge").
--
-- judge_verdicts caches every verdict the judge paid for, keyed by the SHA-256
-- of what determines it (the submission's judged content, the rubric and
-- instructions, provider, model, temperature, output cap, prompt version).
-- Re-evaluating a stored submission reuses its verdict, so the same
-- submission always gets the same judge scores and a re-evaluation costs
-- nothing; `scripts/requeue --rejudge` replaces it (rejudged_at, and the
-- tokens/cost/calls columns add up everything paid for that key).
--
-- evaluation_dimensions.reasoning holds the judge's reasoning for a judged
-- dimension. The worker writes it inside the dimension's detail
-- ({"criterion", "judge_score", "reasoning"}); the trigger below copies it
-- into the column, so the insert statements stay as they are and rows
-- inserted by anyone else keep working (the column defaults to NULL).

CREATE TABLE judge_verdicts (
	key            text PRIMARY KEY CHECK (key ~ '^[0-9a-f]{64}$'),
	provider       text NOT NULL,
	model          text NOT NULL,
	prompt_version text NOT NULL,
	verdict        jsonb NOT NULL,      -- {"scores": {key: {"score", "reasoning"}}, "summary"}
	tokens_in      bigint NOT NULL DEFAULT 0,
	tokens_out     bigint NOT NULL DEFAULT 0,
	cost_usd       numeric NOT NULL DEFAULT 0,
	calls          int NOT NULL DEFAULT 1,
	created_at     timestamptz NOT NULL DEFAULT now(),
	rejudged_at    timestamptz NULL
);

ALTER TABLE evaluation_dimensions ADD COLUMN reasoning text NULL DEFAULT NULL;

CREATE FUNCTION arbiter_dimension_reasoning() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.reasoning IS NULL AND jsonb_typeof(NEW.detail) = 'object'
	   AND jsonb_typeof(NEW.detail -> 'reasoning') = 'string' THEN
		NEW.reasoning := NEW.detail ->> 'reasoning';
	END IF;
	RETURN NEW;
END;
$$;

CREATE TRIGGER evaluation_dimensions_reasoning
	BEFORE INSERT ON evaluation_dimensions
	FOR EACH ROW EXECUTE FUNCTION arbiter_dimension_reasoning();
