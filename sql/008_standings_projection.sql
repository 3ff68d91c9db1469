-- 008_standings_projection: the standings become a projection of
-- evaluation_results, applied after the commit in set-based batches by
-- whichever worker holds the lease, instead of a trigger inside the commit
-- (sql/README.md, "The projection"). The rules and the numbers are those of
-- 002-007; only when they are computed changes.
--
-- Which results are applied: every result carries the id of the transaction
-- that inserted it (standings_xid, a default: no writer names it). The
-- progress row holds a horizon H: every result with standings_xid < H is
-- applied. An apply batch reads the results with standings_xid >= H that
-- are not applied yet (a first evaluation without its task, a re-evaluation
-- newer than its task's eval_seq: the standings themselves say what is
-- applied), the smallest ids first, and applies them per agent in id order.
-- That is the order of the rules: an agent's first evaluations are
-- serialized on its row, so a result that becomes visible later has a
-- higher id than every visible result of the same agent, even though ids
-- are not commit order across agents. H then moves to the oldest
-- transaction still running when the batch's snapshot was taken (or to the
-- oldest result the batch left for the next one): a transaction running
-- then has an id >= H, so nothing can appear below H afterwards.
--
-- Exactly once: the progress row is the lease (FOR UPDATE SKIP LOCKED: one
-- applier at a time; a killed applier's transaction rolls back and frees it),
-- and the projection's writes, the horizon and the counters commit together.
-- Applying a result twice is impossible by construction: a batch only takes
-- results its own snapshot of the standings shows unapplied.

DROP TRIGGER evaluation_results_standings ON evaluation_results;

-- Nullable and without a default first (no table rewrite): rows written
-- before this migration were applied by the trigger and stay NULL.
ALTER TABLE evaluation_results ADD COLUMN standings_xid bigint;
ALTER TABLE evaluation_results ALTER COLUMN standings_xid
	SET DEFAULT (pg_current_xact_id()::text::bigint);
CREATE INDEX evaluation_results_standings_xid_idx ON evaluation_results (standings_xid)
	WHERE standings_xid IS NOT NULL;

CREATE TABLE standings_progress (
	singleton       bool PRIMARY KEY DEFAULT true CHECK (singleton),
	horizon         bigint NOT NULL,        -- every result with standings_xid < horizon is applied
	as_of           timestamptz NOT NULL,   -- every result committed before it is applied
	applied_results bigint NOT NULL DEFAULT 0,
	applied_batches bigint NOT NULL DEFAULT 0,
	last_result_id  bigint NULL,            -- the highest result id applied so far
	updated_at      timestamptz NOT NULL DEFAULT now()
);
-- A transaction still running now has an id >= this horizon.
INSERT INTO standings_progress (horizon, as_of)
VALUES (pg_snapshot_xmin(pg_current_snapshot())::text::bigint, now());

-- The results at or above p_horizon not applied yet, with their task's key
-- (first_result_id) and the agent, challenge and submission time: agents
-- waiting for the backfill are left out (their backfill reads the results).
CREATE FUNCTION standings_unapplied(p_horizon bigint)
RETURNS TABLE (id bigint, xid bigint, submission_id uuid, agent_id uuid, challenge_id uuid,
               first_result_id bigint, eval_seq int, score int, result text,
               submitted_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT r.id, r.standings_xid, r.submission_id, s.agent_id, m.challenge_id,
	       CASE WHEN r.eval_seq = 1 THEN r.id
	            ELSE (SELECT f.id FROM evaluation_results f
	                  WHERE f.submission_id = r.submission_id AND f.eval_seq = 1) END,
	       r.eval_seq, r.score, r.result, s.submitted_at
	FROM evaluation_results r
	JOIN submissions s ON s.id = r.submission_id
	JOIN matches m ON m.id = s.match_id
	WHERE r.standings_xid IS NOT NULL AND r.standings_xid >= p_horizon
	  -- (through the small partial index of the agents waiting)
	  AND (SELECT 1 FROM standings_agents sa WHERE sa.agent_id = s.agent_id AND NOT sa.ready) IS NULL
	  -- a scalar subquery, not NOT EXISTS: always one probe of the primary key
	  -- (a generic plan may hash the anti-join, reading every task)
	  AND coalesce((SELECT e.eval_seq FROM standings_entries e
	                WHERE e.first_result_id = CASE WHEN r.eval_seq = 1 THEN r.id
	                                          ELSE (SELECT f.id FROM evaluation_results f
	                                                WHERE f.submission_id = r.submission_id
	                                                AND f.eval_seq = 1) END), 0) < r.eval_seq
$$;

-- Applies the next batch: up to p_limit unapplied results (the smallest ids),
-- in the caller's transaction, which must be this statement alone (the lease
-- is the progress row's lock). busy: another session holds the lease,
-- nothing was done. caught_up: no unapplied result was left behind, as_of
-- then is this batch's snapshot time. lag_seconds: now - as_of.
CREATE FUNCTION standings_apply(p_limit int, OUT applied int, OUT busy bool, OUT caught_up bool,
                                OUT as_of timestamptz, OUT lag_seconds float8,
                                OUT last_result_id bigint)
LANGUAGE plpgsql
-- Every statement here reads a batch's rows by key, so keyed nested loops
-- are the right plan whatever the statistics say (tiny standings tables
-- after a rebuild would otherwise get sequential scans that read every task,
-- or a custom plan that reads a pair's window through the agent's position
-- index, i.e. all the agent's tasks). Plans are made once per session, as
-- the trigger's were (005-007).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off   -- those settings inflate cost estimates past the JIT thresholds
AS $$
#variable_conflict use_column
DECLARE
	h     bigint;
	x     bigint;
	n     int;
	t0    timestamptz;
	b     standings_entries[];
	nleft bigint;
	hleft bigint;
	maxid bigint;
	redo_a  uuid[];   -- agents whose window best must be re-read
	redo_ca uuid[];   -- agent x challenge pairs likewise (agent, challenge)
	redo_cc uuid[];
	re_a  uuid[];     -- agents with a re-evaluated task
	re_pa uuid[];     -- re-evaluated tasks: agent, challenge, first result id
	re_pc uuid[];
	re_f  bigint[];
	rf bigint[];      -- the batch's re-evaluations, the latest per task
	rr bigint[];
	rq int[];
	rs int[];
	rt text[];
BEGIN
	SELECT p.horizon INTO h FROM standings_progress p FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		SELECT 0, true, false, p.as_of, extract(epoch FROM clock_timestamp() - p.as_of),
		       p.last_result_id
		INTO applied, busy, caught_up, as_of, lag_seconds, last_result_id
		FROM standings_progress p;
		RETURN;
	END IF;
	busy := false;
	SELECT window_size INTO n FROM standings_settings;

	-- Every result committed before t0 is visible to the next statement. It is
	-- planned on each call with the horizon's value (EXECUTE): a generic plan
	-- guesses that a third of the results are above any horizon and, to have
	-- them in id order, read all of them through the primary key (100 ms per
	-- batch at 25,000 results, growing with the history).
	t0 := clock_timestamp();
	EXECUTE $q$
	SELECT array_agg(ROW(q.submission_id, q.agent_id, q.challenge_id, 0, 0, q.first_result_id, q.id,
	                     q.eval_seq, q.score, q.result, q.submitted_at)::standings_entries
	                 ORDER BY q.id) FILTER (WHERE q.rn <= $2),
	       count(*) FILTER (WHERE q.rn > $2), min(q.xid) FILTER (WHERE q.rn > $2),
	       max(q.id) FILTER (WHERE q.rn <= $2),
	       pg_snapshot_xmin(pg_current_snapshot())::text::bigint
	FROM (SELECT u.*, row_number() OVER (ORDER BY u.id) AS rn FROM standings_unapplied($1) u) q
	$q$ INTO b, nleft, hleft, maxid, x USING h, p_limit;
	applied := coalesce(array_length(b, 1), 0);

	IF applied > 0 THEN
		-- Rows for new agents and pairs.
		INSERT INTO standings_agents (agent_id)
			SELECT DISTINCT u.agent_id FROM unnest(b) u ORDER BY 1 ON CONFLICT DO NOTHING;
		INSERT INTO standings_agent_challenges (agent_id, challenge_id)
			SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(b) u ORDER BY 1, 2
			ON CONFLICT DO NOTHING;

		-- First evaluations (the usual batch), as 005-007's trigger did but for any
		-- number of new tasks m per group: the new tasks take positions tasks+1 ...
		-- tasks+m in id order; the old positions (tasks - N, least(tasks, tasks + m - N)]
		-- leave the window (one index range read of at most m entries; the entries
		-- inserted by this statement are not visible to it, and need not be), and only
		-- the last min(m, N) new tasks are in it. The window's best becomes the best new
		-- task in the window if it equals or beats the old best (the later position
		-- wins a tie), else stays if its position is still inside, else is re-read
		-- below (w_best NULL marks it).
		WITH nw AS (
			SELECT u.submission_id, u.agent_id, u.challenge_id,
			       a.tasks + row_number() OVER (PARTITION BY u.agent_id ORDER BY u.first_result_id) AS seq,
			       c.tasks + row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                                    ORDER BY u.first_result_id) AS cseq,
			       u.first_result_id, u.result_id, u.eval_seq, u.score, u.result, u.submitted_at,
			       row_number() OVER (PARTITION BY u.agent_id ORDER BY u.first_result_id DESC) <= n AS a_in,
			       row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                          ORDER BY u.first_result_id DESC) <= n AS c_in
			FROM unnest(b) u
			JOIN standings_agents a ON a.agent_id = u.agent_id
			JOIN standings_agent_challenges c ON c.agent_id = u.agent_id AND c.challenge_id = u.challenge_id
			WHERE u.eval_seq = 1),
		ins AS (
			INSERT INTO standings_entries
			SELECT w.submission_id, w.agent_id, w.challenge_id, w.seq, w.cseq, w.first_result_id,
			       w.result_id, w.eval_seq, w.score, w.result, w.submitted_at FROM nw w),
		-- the best new task in each window (latest position on ties), and on the
		-- challenge (earliest submitted_at, then first id)
		nb AS (
			SELECT w.*,
			       row_number() OVER (PARTITION BY w.agent_id
			                          ORDER BY w.a_in DESC, w.score DESC, w.seq DESC) = 1 AS a_best,
			       row_number() OVER (PARTITION BY w.agent_id, w.challenge_id
			                          ORDER BY w.c_in DESC, w.score DESC, w.cseq DESC) = 1 AS c_best,
			       row_number() OVER (PARTITION BY w.agent_id, w.challenge_id
			                          ORDER BY w.score DESC, w.submitted_at, w.first_result_id) = 1 AS t_best
			FROM nw w),
		ga AS (
			SELECT w.agent_id, count(*) AS m,
			       coalesce(sum(w.score) FILTER (WHERE w.a_in), 0) AS add_s,
			       count(*) FILTER (WHERE w.a_in AND w.result = 'win') AS add_w,
			       count(*) FILTER (WHERE w.a_in AND w.result = 'draw') AS add_d,
			       count(*) FILTER (WHERE w.a_in AND w.result = 'loss') AS add_l,
			       max(w.score) FILTER (WHERE w.a_best) AS nb, max(w.seq) FILTER (WHERE w.a_best) AS nbs
			FROM nb w GROUP BY w.agent_id),
		ua AS (
			UPDATE standings_agents t SET tasks = t.tasks + g.m, w_count = least(t.tasks + g.m, n),
				(w_sum, w_wins, w_draws, w_losses) = (
					SELECT t.w_sum + g.add_s - coalesce(sum(e.score), 0),
					       t.w_wins + g.add_w - count(*) FILTER (WHERE e.result = 'win'),
					       t.w_draws + g.add_d - count(*) FILTER (WHERE e.result = 'draw'),
					       t.w_losses + g.add_l - count(*) FILTER (WHERE e.result = 'loss')
					FROM standings_entries e WHERE e.agent_id = t.agent_id
					AND e.seq > t.tasks - n AND e.seq <= least(t.tasks, t.tasks + g.m - n)),
				w_best = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nb
				              WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best END,
				w_best_seq = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nbs
				                  WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best_seq END
			FROM ga g WHERE t.agent_id = g.agent_id
			RETURNING t.agent_id, t.w_best IS NULL AS redo),
		gp AS (
			SELECT w.agent_id, w.challenge_id, count(*) AS m,
			       coalesce(sum(w.score) FILTER (WHERE w.c_in), 0) AS add_s,
			       count(*) FILTER (WHERE w.c_in AND w.result = 'win') AS add_w,
			       count(*) FILTER (WHERE w.c_in AND w.result = 'draw') AS add_d,
			       count(*) FILTER (WHERE w.c_in AND w.result = 'loss') AS add_l,
			       max(w.score) FILTER (WHERE w.c_best) AS nb, max(w.cseq) FILTER (WHERE w.c_best) AS nbs,
			       max(w.score) FILTER (WHERE w.t_best) AS bsc,
			       (array_agg(w.submission_id) FILTER (WHERE w.t_best))[1] AS bsub,
			       max(w.submitted_at) FILTER (WHERE w.t_best) AS bsat,
			       max(w.first_result_id) FILTER (WHERE w.t_best) AS bfid
			FROM nb w GROUP BY w.agent_id, w.challenge_id),
		up AS (
			UPDATE standings_agent_challenges t SET tasks = t.tasks + g.m, w_count = least(t.tasks + g.m, n),
				(w_sum, w_wins, w_draws, w_losses) = (
					SELECT t.w_sum + g.add_s - coalesce(sum(e.score), 0),
					       t.w_wins + g.add_w - count(*) FILTER (WHERE e.result = 'win'),
					       t.w_draws + g.add_d - count(*) FILTER (WHERE e.result = 'draw'),
					       t.w_losses + g.add_l - count(*) FILTER (WHERE e.result = 'loss')
					-- ordered by cseq: through the per-challenge position index
					-- (the agent's position index would read all its tasks)
					FROM (SELECT e.score, e.result FROM standings_entries e
					      WHERE e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id
					      AND e.cseq > 0 AND e.cseq > t.tasks - n
					      AND e.cseq <= least(t.tasks, t.tasks + g.m - n)
					      ORDER BY e.cseq LIMIT g.m) e),
				w_best = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nb
				              WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best END,
				w_best_seq = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nbs
				                  WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best_seq END,
				-- all-time best on the challenge; ties go to the earliest task
				(best_score, best_submission, best_submitted_at, best_first_id) = (
					SELECT CASE WHEN x.b THEN g.bsc ELSE t.best_score END,
					       CASE WHEN x.b THEN g.bsub ELSE t.best_submission END,
					       CASE WHEN x.b THEN g.bsat ELSE t.best_submitted_at END,
					       CASE WHEN x.b THEN g.bfid ELSE t.best_first_id END
					FROM (SELECT t.best_score IS NULL OR g.bsc > t.best_score
					             OR (g.bsc = t.best_score AND (g.bsat, g.bfid)
					                 < (t.best_submitted_at, t.best_first_id)) AS b) x)
			FROM gp g WHERE t.agent_id = g.agent_id AND t.challenge_id = g.challenge_id
			RETURNING t.agent_id, t.challenge_id, t.w_best IS NULL AS redo)
		SELECT x.ra, y.ca, y.cc INTO redo_a, redo_ca, redo_cc
		FROM (SELECT array_agg(ua.agent_id) AS ra FROM ua WHERE ua.redo) x,
		     (SELECT array_agg(up.agent_id) AS ca, array_agg(up.challenge_id) AS cc
		      FROM up WHERE up.redo) y;

		-- Re-evaluations: a task takes its latest result's score, once (an older
		-- result than the one counted changes nothing). Their groups are re-read
		-- whole below (a window's N positions; rarer than first evaluations).
		IF EXISTS (SELECT 1 FROM unnest(b) u WHERE u.eval_seq > 1) THEN
			SELECT array_agg(q.first_result_id), array_agg(q.result_id), array_agg(q.eval_seq),
			       array_agg(q.score), array_agg(q.result)
			INTO rf, rr, rq, rs, rt
			FROM (SELECT DISTINCT ON (u.first_result_id) u.first_result_id, u.result_id, u.eval_seq,
			             u.score, u.result
			      FROM unnest(b) u WHERE u.eval_seq > 1
			      ORDER BY u.first_result_id, u.eval_seq DESC) q;
			WITH c AS (
				UPDATE standings_entries e SET result_id = q.result_id, eval_seq = q.eval_seq,
					score = q.score, result = q.result
				FROM unnest(rf, rr, rq, rs, rt) AS q(first_result_id, result_id, eval_seq, score, result)
				WHERE e.first_result_id = q.first_result_id AND e.eval_seq < q.eval_seq
				RETURNING e.agent_id, e.challenge_id, e.first_result_id)
			SELECT array_agg(DISTINCT c.agent_id), array_agg(c.agent_id), array_agg(c.challenge_id),
			       array_agg(c.first_result_id)
			INTO re_a, re_pa, re_pc, re_f FROM c;
		END IF;

		-- Window bests to re-read (first evaluations) and windows re-evaluations
		-- changed: over the window's N positions (one index range scan each).
		-- Most batches have none.
		IF redo_a IS NOT NULL OR re_a IS NOT NULL THEN
		UPDATE standings_agents t SET
			(w_sum, w_wins, w_draws, w_losses, w_best, w_best_seq) = (
				SELECT coalesce(sum(w.score), 0), count(*) FILTER (WHERE w.result = 'win'),
				       count(*) FILTER (WHERE w.result = 'draw'),
				       count(*) FILTER (WHERE w.result = 'loss'), max(w.score),
				       (array_agg(w.seq ORDER BY w.score DESC, w.seq DESC))[1]
				FROM (SELECT e.score, e.result, e.seq FROM standings_entries e
				      WHERE e.agent_id = t.agent_id AND e.seq > t.tasks - n
				      ORDER BY e.seq LIMIT n) w)
			FROM unnest(coalesce(redo_a, '{}') || coalesce(re_a, '{}')) AS x(id)
			WHERE t.agent_id = x.id;
		END IF;
		IF redo_ca IS NOT NULL OR re_pa IS NOT NULL THEN
		-- Per pair the same, and the all-time best after re-evaluations: the better
		-- of the stored best and the re-evaluated tasks (their new scores), unless
		-- the stored best's own task was lowered: then re-read over the pair's tasks.
		UPDATE standings_agent_challenges t SET
			(w_sum, w_wins, w_draws, w_losses, w_best, w_best_seq) = (
				SELECT coalesce(sum(w.score), 0), count(*) FILTER (WHERE w.result = 'win'),
				       count(*) FILTER (WHERE w.result = 'draw'),
				       count(*) FILTER (WHERE w.result = 'loss'), max(w.score),
				       (array_agg(w.cseq ORDER BY w.score DESC, w.cseq DESC))[1]
				FROM (SELECT e.score, e.result, e.cseq FROM standings_entries e
				      WHERE e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id AND e.cseq > 0
				      AND e.cseq > t.tasks - n ORDER BY e.cseq LIMIT n) w),
			(best_score, best_submission, best_submitted_at, best_first_id) = (
				SELECT x.score, x.submission_id, x.submitted_at, x.first_result_id FROM (
					SELECT t.best_score AS score, t.best_submission AS submission_id,
					       t.best_submitted_at AS submitted_at, t.best_first_id AS first_result_id
					WHERE t.best_score IS NOT NULL AND NOT g.lowered
					UNION ALL
					SELECT e.score, e.submission_id, e.submitted_at, e.first_result_id
					FROM standings_entries e WHERE e.first_result_id = ANY (g.firsts)
					UNION ALL
					SELECT e.score, e.submission_id, e.submitted_at, e.first_result_id
					FROM standings_entries e
					WHERE g.lowered AND e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id
					AND e.cseq > 0) x
				ORDER BY x.score DESC, x.submitted_at, x.first_result_id LIMIT 1)
			FROM (SELECT p.agent_id, p.challenge_id, array_agg(p.first_result_id) AS firsts,
			             coalesce(bool_or(e.score < c.best_score), false) AS lowered
			      FROM (SELECT unnest(redo_ca) AS agent_id, unnest(redo_cc) AS challenge_id,
			                   NULL::bigint AS first_result_id
			            UNION ALL
			            SELECT unnest(re_pa), unnest(re_pc), unnest(re_f)) p
			      JOIN standings_agent_challenges c ON c.agent_id = p.agent_id
			           AND c.challenge_id = p.challenge_id
			      LEFT JOIN standings_entries e ON e.first_result_id = c.best_first_id
			           AND e.first_result_id = p.first_result_id
			      GROUP BY 1, 2) g
			WHERE t.agent_id = g.agent_id AND t.challenge_id = g.challenge_id;
		END IF;
	END IF;

	-- Below the oldest transaction running at the snapshot, and below the
	-- oldest result left for the next batch, everything is applied.
	caught_up := nleft = 0;
	UPDATE standings_progress p SET
		horizon = greatest(p.horizon, least(x, coalesce(hleft, x))),
		as_of = CASE WHEN nleft = 0 THEN greatest(p.as_of, t0) ELSE p.as_of END,
		applied_results = p.applied_results + applied,
		applied_batches = p.applied_batches + (applied > 0)::int,
		last_result_id = greatest(p.last_result_id, maxid),
		updated_at = clock_timestamp()
	RETURNING p.as_of, extract(epoch FROM clock_timestamp() - p.as_of), p.last_result_id
	INTO as_of, lag_seconds, last_result_id;
END
$$;

-- Where the projection stands, without the lease: the progress row and how
-- many committed results it has not applied yet (as this statement sees them).
CREATE FUNCTION standings_status(OUT as_of timestamptz, OUT lag_seconds float8,
                                 OUT pending bigint, OUT applied_results bigint,
                                 OUT last_result_id bigint, OUT horizon bigint)
LANGUAGE plpgsql STABLE
-- Keyed plans, as standings_apply's; and no JIT: compiling took 170-420 ms of
-- each call of the commands, whose whole query takes well under a millisecond.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off
AS $$
BEGIN
	SELECT p.as_of, extract(epoch FROM clock_timestamp() - p.as_of), p.applied_results,
	       p.last_result_id, p.horizon
	INTO as_of, lag_seconds, applied_results, last_result_id, horizon
	FROM standings_progress p;
	-- planned with the horizon's value, as in standings_apply
	EXECUTE 'SELECT count(*) FROM standings_unapplied($1)' INTO pending USING horizon;
END
$$;

-- The backfill and the reset write the standings too: they take the lease
-- first (waiting for it), so no batch runs beside them. Otherwise 002/007's.
CREATE OR REPLACE FUNCTION standings_backfill_batch(p_limit int,
                                                    OUT agents_done int, OUT tasks_done bigint,
                                                    OUT agents_left bigint)
LANGUAGE plpgsql AS $$
DECLARE
	ids uuid[];
BEGIN
	PERFORM 1 FROM standings_progress FOR UPDATE;
	ids := ARRAY(SELECT sa.agent_id FROM standings_agents sa WHERE NOT sa.ready
	             ORDER BY sa.agent_id LIMIT p_limit FOR NO KEY UPDATE SKIP LOCKED);
	agents_done := coalesce(array_length(ids, 1), 0);
	tasks_done := 0;
	IF agents_done > 0 THEN
		DELETE FROM standings_entries WHERE agent_id = ANY(ids);
		DELETE FROM standings_agent_challenges WHERE agent_id = ANY(ids);
		INSERT INTO standings_entries SELECT * FROM standings_recompute(ids);
		GET DIAGNOSTICS tasks_done = ROW_COUNT;
		UPDATE standings_agents sa SET ready = true, tasks = coalesce(g.tasks, 0),
			w_count = coalesce(g.w_count, 0), w_sum = coalesce(g.w_sum, 0),
			w_wins = coalesce(g.w_wins, 0), w_draws = coalesce(g.w_draws, 0),
			w_losses = coalesce(g.w_losses, 0), w_best = g.w_best, w_best_seq = g.w_best_seq
			FROM unnest(ids) AS u(id)
			LEFT JOIN standings_aggregate('standings_entries', ids, false) g ON g.agent_id = u.id
			WHERE sa.agent_id = u.id;
		INSERT INTO standings_agent_challenges
			SELECT g.agent_id, g.challenge_id, g.tasks, g.w_count, g.w_sum, g.w_wins, g.w_draws,
			       g.w_losses, g.w_best, g.w_best_seq, g.best_score, g.best_submission,
			       g.best_submitted_at, g.best_first_id
			FROM standings_aggregate('standings_entries', ids, true) g;
	END IF;
	SELECT count(*) INTO agents_left FROM standings_agents WHERE NOT ready;
END
$$;

CREATE OR REPLACE FUNCTION standings_reset(p_window int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	left_ bigint;
BEGIN
	PERFORM 1 FROM standings_progress FOR UPDATE;
	IF p_window IS NOT NULL THEN
		UPDATE standings_settings SET window_size = p_window;
	END IF;
	LOCK standings_agents IN EXCLUSIVE MODE;
	TRUNCATE standings_entries, standings_agent_challenges;
	UPDATE standings_agents SET ready = false, tasks = 0, w_count = 0, w_sum = 0, w_wins = 0,
		w_draws = 0, w_losses = 0, w_best = NULL, w_best_seq = NULL;
	INSERT INTO standings_agents (agent_id, ready)
		SELECT DISTINCT s.agent_id, false FROM evaluation_results r
		JOIN submissions s ON s.id = r.submission_id ORDER BY 1
		ON CONFLICT DO NOTHING;
	SELECT count(*) INTO left_ FROM standings_agents;
	RETURN left_;
END
$$;
