-- 002_standings: rolling-window standings per agent and per agent x challenge,
-- maintained by a trigger on evaluation_results in the transaction that
-- commits the result, plus the leaderboard views API servers read.
-- sql/README.md ("Standings") describes the rules; this file implements them.
--
-- Terms:
--   task      an evaluated submission: one that has an evaluation_results row
--             (rejected and failed submissions have none and never count).
--             Its score is the score of its LATEST result (highest eval_seq).
--   position  an agent's tasks are numbered 1, 2, 3... in the order of their
--             first results (eval_seq 1, ascending id = commit order: the
--             worker serializes an agent's first evaluations on the agent row).
--             Per agent x challenge there is a second numbering (cseq).
--   window    the last N positions (N = standings_settings.window_size,
--             default 100). window_score = w_sum / N: every position weighs
--             1/N and an empty position (an agent with fewer than N tasks)
--             counts 0. w_count, the plain mean w_sum / w_count, w_best and
--             the win/draw/loss counts describe the same positions.
--
-- Work per evaluation is O(1) index lookups: the new task takes position
-- tasks + 1 and the task at position tasks + 1 - N falls out (one probe of
-- standings_entries). A re-evaluation changes its task's score in place,
-- which changes a window only while the task is still inside it. Only when
-- the best score of a window leaves it or is lowered is the best re-read over
-- the window's N positions (one index range scan), and when an agent's best
-- score on a challenge is lowered by a re-evaluation it is re-read over that
-- agent's tasks on that challenge (the only read beyond a window).
--
-- Existing results (a database migrated from 001) are NOT processed here:
-- this migration marks the agents that have results as not ready, and
-- `arbiter migrate` then runs standings_backfill_batch() in batches (its own
-- transactions, resumable, with a progress line). The trigger ignores agents
-- that are not ready, so nothing is counted twice.

CREATE TABLE standings_settings (
	singleton   bool PRIMARY KEY DEFAULT true CHECK (singleton),
	window_size int NOT NULL DEFAULT 100 CHECK (window_size BETWEEN 1 AND 100000)
);
INSERT INTO standings_settings DEFAULT VALUES;

-- One row per task (derived data: rewritten by re-evaluations and rebuilds).
CREATE TABLE standings_entries (
	submission_id   uuid NOT NULL,     -- found through first_result_id (no index of its own)
	agent_id        uuid NOT NULL,
	challenge_id    uuid NOT NULL,
	seq             bigint NOT NULL,   -- position among the agent's tasks
	cseq            bigint NOT NULL,   -- position among the agent's tasks on this challenge
	first_result_id bigint PRIMARY KEY, -- the eval_seq 1 result (ascending: cheap to index)
	result_id       bigint NOT NULL,   -- the latest result (the one that counts)
	eval_seq        int NOT NULL,
	score           int NOT NULL,
	result          text NOT NULL,
	submitted_at    timestamptz NOT NULL
);
CREATE UNIQUE INDEX standings_entries_seq_idx ON standings_entries (agent_id, seq);
CREATE UNIQUE INDEX standings_entries_cseq_idx ON standings_entries (agent_id, challenge_id, cseq);
-- Deliberately few indexes: each costs every commit a B-tree insertion. The
-- best score of an agent on a challenge, when a re-evaluation lowers it, is
-- re-read through the cseq index (that agent's tasks on that challenge).

-- Window aggregates per agent.
CREATE TABLE standings_agents (
	agent_id   uuid PRIMARY KEY REFERENCES agents,
	ready      bool NOT NULL DEFAULT true,   -- false: waiting for the backfill
	tasks      bigint NOT NULL DEFAULT 0,    -- positions assigned so far
	w_count    int NOT NULL DEFAULT 0,       -- tasks in the window = least(tasks, N)
	w_sum      bigint NOT NULL DEFAULT 0,    -- sum of their scores
	w_wins     int NOT NULL DEFAULT 0,
	w_draws    int NOT NULL DEFAULT 0,
	w_losses   int NOT NULL DEFAULT 0,
	w_best     int NULL,                     -- best score in the window
	w_best_seq bigint NULL                   -- its earliest position
) WITH (fillfactor = 50);
-- The top-N leaderboard by window score reads this index (a scan of every
-- agent's row took 25-110 ms at 100,000 agents on the test machine). It costs
-- each commit one B-tree insertion per agent row (the updates of w_sum are
-- not HOT).
CREATE INDEX standings_agents_window_idx ON standings_agents (w_sum DESC, agent_id);
CREATE INDEX standings_agents_pending_idx ON standings_agents (agent_id) WHERE NOT ready;

-- Window aggregates per agent x challenge, and the all-time best.
CREATE TABLE standings_agent_challenges (
	agent_id          uuid NOT NULL,
	challenge_id      uuid NOT NULL REFERENCES challenges,
	tasks             bigint NOT NULL DEFAULT 0,
	w_count           int NOT NULL DEFAULT 0,
	w_sum             bigint NOT NULL DEFAULT 0,
	w_wins            int NOT NULL DEFAULT 0,
	w_draws           int NOT NULL DEFAULT 0,
	w_losses          int NOT NULL DEFAULT 0,
	w_best            int NULL,
	w_best_seq        bigint NULL,              -- a cseq
	best_score        int NULL,                 -- best latest score over ALL its tasks here
	best_submission   uuid NULL,                -- the earliest task with that score:
	best_submitted_at timestamptz NULL,         --   smallest (submitted_at, first_result_id)
	best_first_id     bigint NULL,
	PRIMARY KEY (agent_id, challenge_id)
) WITH (fillfactor = 50);
CREATE INDEX standings_agent_challenges_best_idx ON standings_agent_challenges
	(challenge_id, best_score DESC, best_submitted_at, best_first_id, agent_id);

-- Best of a window re-read: the earliest position among the best scores.
CREATE FUNCTION standings_window_best_agent(p_agent uuid, p_from bigint,
                                            OUT best int, OUT best_seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT score, seq FROM standings_entries
	WHERE agent_id = p_agent AND seq > p_from ORDER BY score DESC, seq LIMIT 1
$$;

CREATE FUNCTION standings_window_best_challenge(p_agent uuid, p_challenge uuid, p_from bigint,
                                                OUT best int, OUT best_seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT score, cseq FROM standings_entries
	WHERE agent_id = p_agent AND challenge_id = p_challenge AND cseq > p_from
	ORDER BY score DESC, cseq LIMIT 1
$$;

-- Applies the rows one INSERT added to evaluation_results (transition table
-- new_results). Rows are handled per agent in id order; the standings rows
-- are locked first in ascending key order (agents, then agent x challenge),
-- after the worker's own locks (agents, submissions), so concurrent commits
-- cannot deadlock on them.
-- Serialises the writers of one agent's standings for a whole transaction. The
-- worker calls it first in every commit with all the batch's agents: the
-- trigger below locks the agents' rows once per INSERT statement, and a commit
-- inserts first evaluations and re-evaluations in separate statements, so
-- without one lock order for the whole transaction two commits could each hold
-- a row the other's next statement needs (a deadlock). Transaction-level
-- advisory locks (namespace 21332, "St"), taken in key order, give that order.
CREATE FUNCTION standings_lock_agents(p_agents uuid[]) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	k int;
	n int := 0;
BEGIN
	FOR k IN SELECT DISTINCT hashtext(x::text) FROM unnest(p_agents) x ORDER BY 1 LOOP
		PERFORM pg_advisory_xact_lock(21332, k);
		n := n + 1;
	END LOOP;
	RETURN n;
END $$;

CREATE FUNCTION standings_on_results() RETURNS trigger
LANGUAGE plpgsql
-- Plan each statement once per session, not for every commit: planning these
-- statements costs more than running them for a small batch. Every statement
-- here touches a few rows by key, so keyed nested loops are always the right
-- plan; a sequential scan or a hash over the (small, constantly updated)
-- standings tables would read their dead row versions too.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET jit = off   -- those settings inflate cost estimates past the JIT thresholds
AS $$
#variable_conflict use_column
DECLARE
	n      int;
	r      record;
	a      standings_agents%ROWTYPE;
	c      standings_agent_challenges%ROWTYPE;
	e      standings_entries%ROWTYPE;
	f      standings_entries%ROWTYPE;
	fb     record;
	inwin  bool;
	batch  standings_entries[];
	ag     standings_agents[];
	pc     standings_agent_challenges[];
	added  standings_entries[];
	all_first bool;
	nagents bigint;
	npairs bigint;
BEGIN
	-- The transition table alone first: a statement that reads it is planned
	-- anew on every call, so the joins are in the next (cached) statement.
	SELECT array_agg(ROW(x.submission_id, NULL, NULL, 0, 0, x.id, x.id, x.eval_seq, x.score, x.result,
	                     NULL)::standings_entries), bool_and(x.eval_seq = 1)
	INTO batch, all_first FROM new_results x;
	SELECT array_agg(ROW(u.submission_id, s.agent_id, m.challenge_id, 0, 0, u.first_result_id,
	                     u.result_id, u.eval_seq, u.score, u.result, s.submitted_at)::standings_entries
	                 ORDER BY s.agent_id, u.first_result_id)
,
	       count(DISTINCT s.agent_id), count(DISTINCT (s.agent_id, m.challenge_id)),
	       (SELECT window_size FROM standings_settings)
	INTO batch, nagents, npairs, n
	FROM unnest(batch) u JOIN submissions s ON s.id = u.submission_id JOIN matches m ON m.id = s.match_id;
	IF batch IS NULL THEN
		RETURN NULL;
	END IF;

	-- Lock the agents' standings rows in key order, creating the missing ones
	-- first; the locking read returns their latest versions, used below. The
	-- agent x challenge rows need no lock of their own: every writer of them
	-- (this trigger, the backfill) holds their agent's row first.
	SELECT array_agg(ROW(l.*)::standings_agents) INTO ag FROM (
		SELECT sa.* FROM standings_agents sa
		WHERE sa.agent_id = ANY (ARRAY(SELECT u.agent_id FROM unnest(batch) u))
		ORDER BY sa.agent_id FOR NO KEY UPDATE) l;
	IF coalesce(array_length(ag, 1), 0) < nagents THEN
		INSERT INTO standings_agents (agent_id)
			SELECT DISTINCT u.agent_id FROM unnest(batch) u ORDER BY 1 ON CONFLICT DO NOTHING;
		SELECT array_agg(ROW(l.*)::standings_agents) INTO ag FROM (
			SELECT sa.* FROM standings_agents sa
			WHERE sa.agent_id = ANY (ARRAY(SELECT u.agent_id FROM unnest(batch) u))
			ORDER BY sa.agent_id FOR NO KEY UPDATE) l;
	END IF;
	SELECT array_agg(ROW(sc.*)::standings_agent_challenges) INTO pc FROM standings_agent_challenges sc
		WHERE (sc.agent_id, sc.challenge_id) IN (SELECT u.agent_id, u.challenge_id FROM unnest(batch) u);
	IF coalesce(array_length(pc, 1), 0) < npairs THEN   -- (also when some agents are not ready)
		INSERT INTO standings_agent_challenges (agent_id, challenge_id)
			SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(batch) u
			JOIN unnest(ag) a ON a.agent_id = u.agent_id AND a.ready
			ORDER BY 1, 2 ON CONFLICT DO NOTHING;
		SELECT array_agg(ROW(sc.*)::standings_agent_challenges) INTO pc FROM standings_agent_challenges sc
			WHERE (sc.agent_id, sc.challenge_id) IN (SELECT u.agent_id, u.challenge_id FROM unnest(batch) u);
	END IF;
	IF pc IS NULL THEN
		RETURN NULL;   -- every agent here waits for the backfill
	END IF;

	IF all_first THEN
		-- Only first evaluations (the worker's usual statement): the same arithmetic as the
		-- loop below, set-based. The new tasks take the next positions; per agent (and per
		-- agent x challenge) the positions (old tasks - N, new tasks - N] leave the window;
		-- the window's best is kept unless it left, then re-read over the window.
		WITH ins AS (
			INSERT INTO standings_entries
			SELECT u.submission_id, u.agent_id, u.challenge_id,
			       a.tasks + row_number() OVER (PARTITION BY u.agent_id ORDER BY u.first_result_id),
			       c.tasks + row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                                    ORDER BY u.first_result_id),
			       u.first_result_id, u.result_id, u.eval_seq, u.score, u.result, u.submitted_at
			FROM unnest(batch) u
			JOIN unnest(ag) a ON a.agent_id = u.agent_id AND a.ready
			JOIN unnest(pc) c ON c.agent_id = u.agent_id AND c.challenge_id = u.challenge_id
			RETURNING *)
		SELECT array_agg(ROW(i.submission_id, i.agent_id, i.challenge_id, i.seq, i.cseq,
		                     i.first_result_id, i.result_id, i.eval_seq, i.score, i.result,
		                     i.submitted_at)::standings_entries)
		INTO added FROM ins i;
		IF added IS NULL THEN
			RETURN NULL;
		END IF;

		WITH ua AS (UPDATE standings_agents t SET tasks = q.t_new, w_count = least(q.t_new, n),
			w_sum = q.w_sum + q.add_s - coalesce(o.s, 0),
			w_wins = q.w_wins + q.add_w - coalesce(o.w, 0),
			w_draws = q.w_draws + q.add_d - coalesce(o.d, 0),
			w_losses = q.w_losses + q.add_l - coalesce(o.l, 0),
			w_best = CASE WHEN NOT q.keep THEN rb.score WHEN q.nb > q.ob THEN q.nb ELSE q.ob END,
			w_best_seq = CASE WHEN NOT q.keep THEN rb.seq WHEN q.nb > q.ob THEN q.nbs ELSE q.obs END
		FROM (SELECT d.*, a.w_sum, a.w_wins, a.w_draws, a.w_losses, a.w_best AS ob,
		             a.w_best_seq AS obs, coalesce(a.w_best_seq > d.t_new - n AND d.m < n, false) AS keep
		      FROM (SELECT u.agent_id, max(u.seq) AS t_new, count(*) AS m, sum(u.score) AS add_s,
		                   count(*) FILTER (WHERE u.result = 'win') AS add_w,
		                   count(*) FILTER (WHERE u.result = 'draw') AS add_d,
		                   count(*) FILTER (WHERE u.result = 'loss') AS add_l,
		                   (array_agg(u.score ORDER BY u.score DESC, u.seq))[1] AS nb,
		                   (array_agg(u.seq ORDER BY u.score DESC, u.seq))[1] AS nbs
		            FROM unnest(added) u GROUP BY u.agent_id) d
		      JOIN unnest(ag) a ON a.agent_id = d.agent_id) q
		LEFT JOIN LATERAL (SELECT sum(e.score) AS s, count(*) FILTER (WHERE e.result = 'win') AS w,
		                          count(*) FILTER (WHERE e.result = 'draw') AS d,
		                          count(*) FILTER (WHERE e.result = 'loss') AS l
		                   FROM standings_entries e WHERE e.agent_id = q.agent_id
		                   AND e.seq > q.t_new - q.m - n AND e.seq <= q.t_new - n) o ON true
		LEFT JOIN LATERAL (SELECT e.score, e.seq FROM standings_entries e
		                   WHERE NOT q.keep AND e.agent_id = q.agent_id AND e.seq > q.t_new - n
		                   ORDER BY e.score DESC, e.seq LIMIT 1) rb ON true
		WHERE t.agent_id = q.agent_id RETURNING 1),
		up AS (UPDATE standings_agent_challenges t SET tasks = q.t_new, w_count = least(q.t_new, n),
			w_sum = q.w_sum + q.add_s - coalesce(o.s, 0),
			w_wins = q.w_wins + q.add_w - coalesce(o.w, 0),
			w_draws = q.w_draws + q.add_d - coalesce(o.d, 0),
			w_losses = q.w_losses + q.add_l - coalesce(o.l, 0),
			w_best = CASE WHEN NOT q.keep THEN rb.score WHEN q.nb > q.ob THEN q.nb ELSE q.ob END,
			w_best_seq = CASE WHEN NOT q.keep THEN rb.cseq WHEN q.nb > q.ob THEN q.nbs ELSE q.obs END,
			best_score = CASE WHEN q.better THEN q.bsc ELSE q.best_score END,
			best_submission = CASE WHEN q.better THEN q.bsub ELSE q.best_submission END,
			best_submitted_at = CASE WHEN q.better THEN q.bsat ELSE q.best_submitted_at END,
			best_first_id = CASE WHEN q.better THEN q.bfid ELSE q.best_first_id END
		FROM (SELECT d.*, c.w_sum, c.w_wins, c.w_draws, c.w_losses, c.w_best AS ob,
		             c.w_best_seq AS obs, coalesce(c.w_best_seq > d.t_new - n AND d.m < n, false) AS keep,
		             c.best_score, c.best_submission, c.best_submitted_at, c.best_first_id,
		             coalesce(d.bsc > c.best_score OR (d.bsc = c.best_score
		                      AND (d.bsat, d.bfid) < (c.best_submitted_at, c.best_first_id)), true) AS better
		      FROM (SELECT u.agent_id, u.challenge_id, max(u.cseq) AS t_new, count(*) AS m,
		                   sum(u.score) AS add_s,
		                   count(*) FILTER (WHERE u.result = 'win') AS add_w,
		                   count(*) FILTER (WHERE u.result = 'draw') AS add_d,
		                   count(*) FILTER (WHERE u.result = 'loss') AS add_l,
		                   (array_agg(u.score ORDER BY u.score DESC, u.cseq))[1] AS nb,
		                   (array_agg(u.cseq ORDER BY u.score DESC, u.cseq))[1] AS nbs,
		                   (array_agg(u.score ORDER BY u.score DESC, u.submitted_at, u.first_result_id))[1] AS bsc,
		                   (array_agg(u.submission_id ORDER BY u.score DESC, u.submitted_at,
		                              u.first_result_id))[1] AS bsub,
		                   (array_agg(u.submitted_at ORDER BY u.score DESC, u.submitted_at,
		                              u.first_result_id))[1] AS bsat,
		                   (array_agg(u.first_result_id ORDER BY u.score DESC, u.submitted_at,
		                              u.first_result_id))[1] AS bfid
		            FROM unnest(added) u GROUP BY u.agent_id, u.challenge_id) d
		      JOIN unnest(pc) c ON c.agent_id = d.agent_id AND c.challenge_id = d.challenge_id) q
		LEFT JOIN LATERAL (SELECT sum(e.score) AS s, count(*) FILTER (WHERE e.result = 'win') AS w,
		                          count(*) FILTER (WHERE e.result = 'draw') AS d,
		                          count(*) FILTER (WHERE e.result = 'loss') AS l
		                   FROM standings_entries e
		                   WHERE e.agent_id = q.agent_id AND e.challenge_id = q.challenge_id
		                   AND e.cseq > q.t_new - q.m - n AND e.cseq <= q.t_new - n) o ON true
		LEFT JOIN LATERAL (SELECT e.score, e.cseq FROM standings_entries e
		                   WHERE NOT q.keep AND e.agent_id = q.agent_id
		                   AND e.challenge_id = q.challenge_id AND e.cseq > q.t_new - n
		                   ORDER BY e.score DESC, e.cseq LIMIT 1) rb ON true
		WHERE t.agent_id = q.agent_id AND t.challenge_id = q.challenge_id RETURNING 1)
		SELECT (SELECT count(*) FROM ua) + (SELECT count(*) FROM up) INTO nagents;   -- one statement for both
		RETURN NULL;
	END IF;

	-- Re-evaluations (and mixed statements): row by row, in id order per agent.
	FOR r IN SELECT u.first_result_id AS id, u.submission_id, u.eval_seq, u.score, u.result,
	                u.agent_id, u.challenge_id, u.submitted_at
	         FROM unnest(batch) u ORDER BY u.agent_id, u.first_result_id LOOP
		SELECT * INTO a FROM standings_agents WHERE agent_id = r.agent_id;
		CONTINUE WHEN NOT a.ready;
		SELECT * INTO c FROM standings_agent_challenges
			WHERE agent_id = r.agent_id AND challenge_id = r.challenge_id;
		SELECT * INTO e FROM standings_entries WHERE first_result_id =
			(SELECT f.id FROM evaluation_results f WHERE f.submission_id = r.submission_id AND f.eval_seq = 1);

		IF NOT FOUND THEN
			-- A new task: the next position of both windows.
			a.tasks := a.tasks + 1;
			c.tasks := c.tasks + 1;
			INSERT INTO standings_entries VALUES (r.submission_id, r.agent_id, r.challenge_id,
				a.tasks, c.tasks, r.id, r.id, r.eval_seq, r.score, r.result, r.submitted_at);

			-- Agent window: add the new task, drop position tasks - N.
			a.w_sum := a.w_sum + r.score;
			a.w_count := least(a.tasks, n);
			a.w_wins := a.w_wins + (r.result = 'win')::int;
			a.w_draws := a.w_draws + (r.result = 'draw')::int;
			a.w_losses := a.w_losses + (r.result = 'loss')::int;
			IF a.w_best IS NULL OR r.score > a.w_best THEN
				a.w_best := r.score;
				a.w_best_seq := a.tasks;
			END IF;
			IF a.tasks > n THEN
				SELECT * INTO f FROM standings_entries WHERE agent_id = r.agent_id AND seq = a.tasks - n;
				a.w_sum := a.w_sum - f.score;
				a.w_wins := a.w_wins - (f.result = 'win')::int;
				a.w_draws := a.w_draws - (f.result = 'draw')::int;
				a.w_losses := a.w_losses - (f.result = 'loss')::int;
				IF a.w_best_seq = f.seq THEN
					fb := standings_window_best_agent(r.agent_id, a.tasks - n);
					a.w_best := fb.best;
					a.w_best_seq := fb.best_seq;
				END IF;
			END IF;

			-- Agent x challenge window, the same way.
			c.w_sum := c.w_sum + r.score;
			c.w_count := least(c.tasks, n);
			c.w_wins := c.w_wins + (r.result = 'win')::int;
			c.w_draws := c.w_draws + (r.result = 'draw')::int;
			c.w_losses := c.w_losses + (r.result = 'loss')::int;
			IF c.w_best IS NULL OR r.score > c.w_best THEN
				c.w_best := r.score;
				c.w_best_seq := c.tasks;
			END IF;
			IF c.tasks > n THEN
				SELECT * INTO f FROM standings_entries
					WHERE agent_id = r.agent_id AND challenge_id = r.challenge_id AND cseq = c.tasks - n;
				c.w_sum := c.w_sum - f.score;
				c.w_wins := c.w_wins - (f.result = 'win')::int;
				c.w_draws := c.w_draws - (f.result = 'draw')::int;
				c.w_losses := c.w_losses - (f.result = 'loss')::int;
				IF c.w_best_seq = f.cseq THEN
					fb := standings_window_best_challenge(r.agent_id, r.challenge_id, c.tasks - n);
					c.w_best := fb.best;
					c.w_best_seq := fb.best_seq;
				END IF;
			END IF;

			-- All-time best on the challenge; ties go to the earliest task.
			IF c.best_score IS NULL OR r.score > c.best_score
			   OR (r.score = c.best_score
			       AND (r.submitted_at, r.id) < (c.best_submitted_at, c.best_first_id)) THEN
				c.best_score := r.score;
				c.best_submission := r.submission_id;
				c.best_submitted_at := r.submitted_at;
				c.best_first_id := r.id;
			END IF;
		ELSIF r.eval_seq > e.eval_seq THEN
			-- A re-evaluation: the task's score is replaced, once.
			UPDATE standings_entries SET result_id = r.id, eval_seq = r.eval_seq,
				score = r.score, result = r.result
				WHERE first_result_id = e.first_result_id;

			inwin := e.seq > a.tasks - n;
			IF inwin THEN
				a.w_sum := a.w_sum + r.score - e.score;
				a.w_wins := a.w_wins + (r.result = 'win')::int - (e.result = 'win')::int;
				a.w_draws := a.w_draws + (r.result = 'draw')::int - (e.result = 'draw')::int;
				a.w_losses := a.w_losses + (r.result = 'loss')::int - (e.result = 'loss')::int;
				IF e.seq = a.w_best_seq AND r.score < e.score THEN
					fb := standings_window_best_agent(r.agent_id, a.tasks - n);
					a.w_best := fb.best;
					a.w_best_seq := fb.best_seq;
				ELSIF r.score > a.w_best OR (r.score = a.w_best AND e.seq < a.w_best_seq) THEN
					a.w_best := r.score;
					a.w_best_seq := e.seq;
				END IF;
			END IF;

			inwin := e.cseq > c.tasks - n;
			IF inwin THEN
				c.w_sum := c.w_sum + r.score - e.score;
				c.w_wins := c.w_wins + (r.result = 'win')::int - (e.result = 'win')::int;
				c.w_draws := c.w_draws + (r.result = 'draw')::int - (e.result = 'draw')::int;
				c.w_losses := c.w_losses + (r.result = 'loss')::int - (e.result = 'loss')::int;
				IF e.cseq = c.w_best_seq AND r.score < e.score THEN
					fb := standings_window_best_challenge(r.agent_id, r.challenge_id, c.tasks - n);
					c.w_best := fb.best;
					c.w_best_seq := fb.best_seq;
				ELSIF r.score > c.w_best OR (r.score = c.w_best AND e.cseq < c.w_best_seq) THEN
					c.w_best := r.score;
					c.w_best_seq := e.cseq;
				END IF;
			END IF;

			IF c.best_submission = r.submission_id THEN
				IF r.score < e.score THEN
					SELECT x.score, x.submission_id, x.submitted_at, x.first_result_id
					INTO c.best_score, c.best_submission, c.best_submitted_at, c.best_first_id
					FROM standings_entries x
					WHERE x.agent_id = r.agent_id AND x.challenge_id = r.challenge_id
					ORDER BY x.score DESC, x.submitted_at, x.first_result_id LIMIT 1;
				ELSE
					c.best_score := r.score;
				END IF;
			ELSIF c.best_score IS NULL OR r.score > c.best_score
			      OR (r.score = c.best_score
			          AND (e.submitted_at, e.first_result_id) < (c.best_submitted_at, c.best_first_id)) THEN
				c.best_score := r.score;
				c.best_submission := e.submission_id;
				c.best_submitted_at := e.submitted_at;
				c.best_first_id := e.first_result_id;
			END IF;
		ELSE
			CONTINUE;   -- an older result than the one already counted: nothing changes
		END IF;

		UPDATE standings_agents SET tasks = a.tasks, w_count = a.w_count, w_sum = a.w_sum,
			w_wins = a.w_wins, w_draws = a.w_draws, w_losses = a.w_losses,
			w_best = a.w_best, w_best_seq = a.w_best_seq
			WHERE agent_id = r.agent_id;
		UPDATE standings_agent_challenges SET tasks = c.tasks, w_count = c.w_count, w_sum = c.w_sum,
			w_wins = c.w_wins, w_draws = c.w_draws, w_losses = c.w_losses,
			w_best = c.w_best, w_best_seq = c.w_best_seq, best_score = c.best_score,
			best_submission = c.best_submission, best_submitted_at = c.best_submitted_at,
			best_first_id = c.best_first_id
			WHERE agent_id = r.agent_id AND challenge_id = r.challenge_id;
	END LOOP;
	RETURN NULL;
END
$$;

CREATE TRIGGER evaluation_results_standings
	AFTER INSERT ON evaluation_results
	REFERENCING NEW TABLE AS new_results
	FOR EACH STATEMENT EXECUTE FUNCTION standings_on_results();

-- The tasks recomputed from evaluation_results alone (what standings_entries
-- must hold): for the given agents, or for all agents when p_agents is NULL.
CREATE FUNCTION standings_recompute(p_agents uuid[])
RETURNS SETOF standings_entries
LANGUAGE plpgsql STABLE AS $$
BEGIN
	IF p_agents IS NULL THEN
		RETURN QUERY
		WITH last AS (
			SELECT DISTINCT ON (r.submission_id) r.submission_id, r.id, r.eval_seq, r.score, r.result
			FROM evaluation_results r ORDER BY r.submission_id, r.eval_seq DESC)
		SELECT s.id, s.agent_id, m.challenge_id,
		       row_number() OVER (PARTITION BY s.agent_id ORDER BY f.id),
		       row_number() OVER (PARTITION BY s.agent_id, m.challenge_id ORDER BY f.id),
		       f.id, l.id, l.eval_seq, l.score, l.result, s.submitted_at
		FROM evaluation_results f
		JOIN last l ON l.submission_id = f.submission_id
		JOIN submissions s ON s.id = f.submission_id
		JOIN matches m ON m.id = s.match_id
		WHERE f.eval_seq = 1;
	ELSE
		-- Through matches_agent_id_idx: submissions has no index on agent_id.
		RETURN QUERY
		SELECT s.id, s.agent_id, m.challenge_id,
		       row_number() OVER (PARTITION BY s.agent_id ORDER BY f.id),
		       row_number() OVER (PARTITION BY s.agent_id, m.challenge_id ORDER BY f.id),
		       f.id, l.id, l.eval_seq, l.score, l.result, s.submitted_at
		FROM matches m
		JOIN submissions s ON s.match_id = m.id
		JOIN evaluation_results f ON f.submission_id = s.id AND f.eval_seq = 1
		JOIN LATERAL (SELECT x.id, x.eval_seq, x.score, x.result FROM evaluation_results x
		              WHERE x.submission_id = s.id ORDER BY x.eval_seq DESC LIMIT 1) l ON true
		WHERE m.agent_id = ANY(p_agents) AND s.agent_id = ANY(p_agents);
	END IF;
END
$$;

-- The aggregates of a set of tasks (a table shaped like standings_entries):
-- per agent (p_challenges false) or per agent x challenge (true). Set-based,
-- for the backfill and the check; the trigger keeps the same numbers
-- incrementally.
CREATE FUNCTION standings_aggregate(p_src regclass, p_agents uuid[], p_challenges bool)
RETURNS TABLE (agent_id uuid, challenge_id uuid, tasks bigint, w_count int, w_sum bigint,
               w_wins int, w_draws int, w_losses int, w_best int, w_best_seq bigint,
               best_score int, best_submission uuid, best_submitted_at timestamptz,
               best_first_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
	n int;
	pos text := CASE WHEN p_challenges THEN 'cseq' ELSE 'seq' END;
	grp text := CASE WHEN p_challenges THEN 'e.agent_id, e.challenge_id' ELSE 'e.agent_id' END;
BEGIN
	SELECT window_size INTO n FROM standings_settings;
	RETURN QUERY EXECUTE format($q$
		WITH e AS (SELECT * FROM %1$s e WHERE $1 IS NULL OR e.agent_id = ANY($1)),
		t AS (SELECT %2$s, count(*) AS tasks FROM e GROUP BY %2$s),
		w AS (SELECT %2$s, count(*)::int AS w_count, sum(e.score)::bigint AS w_sum,
		             count(*) FILTER (WHERE e.result = 'win')::int AS w_wins,
		             count(*) FILTER (WHERE e.result = 'draw')::int AS w_draws,
		             count(*) FILTER (WHERE e.result = 'loss')::int AS w_losses,
		             (array_agg(e.score ORDER BY e.score DESC, e.%3$s))[1] AS w_best,
		             (array_agg(e.%3$s ORDER BY e.score DESC, e.%3$s))[1] AS w_best_seq
		      FROM e JOIN t USING (%4$s) WHERE e.%3$s > t.tasks - $2 GROUP BY %2$s),
		b AS (SELECT DISTINCT ON (%2$s) %2$s, e.score, e.submission_id, e.submitted_at,
		             e.first_result_id
		      FROM e ORDER BY %2$s, e.score DESC, e.submitted_at, e.first_result_id)
		SELECT t.agent_id, %5$s, t.tasks, w.w_count, w.w_sum, w.w_wins, w.w_draws, w.w_losses,
		       w.w_best, w.w_best_seq, %6$s
		FROM t JOIN w USING (%4$s) %7$s$q$,
		p_src, grp, pos,
		CASE WHEN p_challenges THEN 'agent_id, challenge_id' ELSE 'agent_id' END,
		CASE WHEN p_challenges THEN 't.challenge_id' ELSE 'NULL::uuid' END,
		CASE WHEN p_challenges THEN 'b.score, b.submission_id, b.submitted_at, b.first_result_id'
		     ELSE 'NULL::int, NULL::uuid, NULL::timestamptz, NULL::bigint' END,
		CASE WHEN p_challenges THEN 'JOIN b USING (agent_id, challenge_id)' ELSE '' END)
	USING p_agents, n;
END
$$;

-- One backfill step: up to p_limit agents that are not ready (skipping any
-- another session holds) are rebuilt from evaluation_results and marked
-- ready, in the caller's transaction. Returns how many agents and tasks it
-- did and how many agents are still waiting.
CREATE FUNCTION standings_backfill_batch(p_limit int,
                                         OUT agents_done int, OUT tasks_done bigint,
                                         OUT agents_left bigint)
LANGUAGE plpgsql AS $$
DECLARE
	ids uuid[];
BEGIN
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

-- Starts a rebuild of every aggregate (after changing the window size, or
-- after results were written with the trigger disabled): every agent with a
-- standings row or a result becomes not ready and the tasks are dropped; the
-- backfill then rebuilds them. Runs in the caller's transaction.
CREATE FUNCTION standings_reset(p_window int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	left_ bigint;
BEGIN
	IF p_window IS NOT NULL THEN
		UPDATE standings_settings SET window_size = p_window;
	END IF;
	-- EXCLUSIVE conflicts with the row locks every writer takes first on these
	-- rows: in-flight commits finish, new ones wait here, before any of them
	-- touches the tables truncated next (so the two cannot deadlock).
	LOCK standings_agents IN EXCLUSIVE MODE;
	TRUNCATE standings_entries, standings_agent_challenges;
	UPDATE standings_agents SET ready = false, tasks = 0, w_count = 0, w_sum = 0, w_wins = 0,
		w_draws = 0, w_losses = 0, w_best = NULL, w_best_seq = NULL;
	-- Agents with results but no row (results written while the trigger was disabled).
	INSERT INTO standings_agents (agent_id, ready)
		SELECT DISTINCT s.agent_id, false FROM evaluation_results r
		JOIN submissions s ON s.id = r.submission_id ORDER BY 1
		ON CONFLICT DO NOTHING;
	SELECT count(*) INTO left_ FROM standings_agents;
	RETURN left_;
END
$$;

-- Every difference between the stored standings and a recomputation from
-- evaluation_results (empty when they agree). Agents still waiting for the
-- backfill are left out.
CREATE FUNCTION standings_check()
RETURNS TABLE (what text, agent_id uuid, challenge_id uuid, submission_id uuid, stored text,
               expected text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
	CREATE TEMP TABLE standings_check_entries (LIKE standings_entries) ON COMMIT DROP;
	INSERT INTO standings_check_entries
		SELECT x.* FROM standings_recompute(NULL) x
		WHERE NOT EXISTS (SELECT 1 FROM standings_agents p WHERE p.agent_id = x.agent_id AND NOT p.ready);
	ANALYZE standings_check_entries;

	RETURN QUERY
	SELECT 'task', coalesce(s.agent_id, x.agent_id), coalesce(s.challenge_id, x.challenge_id),
	       coalesce(s.submission_id, x.submission_id),
	       CASE WHEN s.submission_id IS NULL THEN 'missing' ELSE row(s.seq, s.cseq, s.first_result_id,
	            s.result_id, s.eval_seq, s.score, s.result, s.submitted_at)::text END,
	       CASE WHEN x.submission_id IS NULL THEN 'none' ELSE row(x.seq, x.cseq, x.first_result_id,
	            x.result_id, x.eval_seq, x.score, x.result, x.submitted_at)::text END
	FROM (SELECT * FROM standings_entries se WHERE NOT EXISTS (SELECT 1 FROM standings_agents p
	      WHERE p.agent_id = se.agent_id AND NOT p.ready)) s
	FULL JOIN standings_check_entries x ON x.first_result_id = s.first_result_id
	WHERE s IS DISTINCT FROM x;

	RETURN QUERY
	SELECT 'agent', coalesce(s.agent_id, g.agent_id), NULL::uuid, NULL::uuid,
	       row(s.tasks, s.w_count, s.w_sum, s.w_wins, s.w_draws, s.w_losses, s.w_best, s.w_best_seq)::text,
	       row(coalesce(g.tasks, 0), coalesce(g.w_count, 0), coalesce(g.w_sum, 0), coalesce(g.w_wins, 0),
	           coalesce(g.w_draws, 0), coalesce(g.w_losses, 0), g.w_best, g.w_best_seq)::text
	FROM (SELECT * FROM standings_agents WHERE ready) s
	FULL JOIN standings_aggregate('standings_check_entries', NULL, false) g ON g.agent_id = s.agent_id
	WHERE row(s.tasks, s.w_count, s.w_sum, s.w_wins, s.w_draws, s.w_losses, s.w_best, s.w_best_seq)
	      IS DISTINCT FROM
	      row(coalesce(g.tasks, 0), coalesce(g.w_count, 0), coalesce(g.w_sum, 0), coalesce(g.w_wins, 0),
	          coalesce(g.w_draws, 0), coalesce(g.w_losses, 0), g.w_best, g.w_best_seq);

	RETURN QUERY
	SELECT 'agent_challenge', coalesce(s.agent_id, g.agent_id), coalesce(s.challenge_id, g.challenge_id),
	       NULL::uuid,
	       row(s.tasks, s.w_count, s.w_sum, s.w_wins, s.w_draws, s.w_losses, s.w_best, s.w_best_seq,
	           s.best_score, s.best_submission, s.best_submitted_at, s.best_first_id)::text,
	       row(g.tasks, g.w_count, g.w_sum, g.w_wins, g.w_draws, g.w_losses, g.w_best, g.w_best_seq,
	           g.best_score, g.best_submission, g.best_submitted_at, g.best_first_id)::text
	FROM (SELECT x.* FROM standings_agent_challenges x JOIN standings_agents p
	      ON p.agent_id = x.agent_id AND p.ready) s
	FULL JOIN standings_aggregate('standings_check_entries', NULL, true) g
	     ON g.agent_id = s.agent_id AND g.challenge_id = s.challenge_id
	WHERE row(s.tasks, s.w_count, s.w_sum, s.w_wins, s.w_draws, s.w_losses, s.w_best, s.w_best_seq,
	          s.best_score, s.best_submission, s.best_submitted_at, s.best_first_id)
	      IS DISTINCT FROM
	      row(g.tasks, g.w_count, g.w_sum, g.w_wins, g.w_draws, g.w_losses, g.w_best, g.w_best_seq,
	          g.best_score, g.best_submission, g.best_submitted_at, g.best_first_id);

	DROP TABLE standings_check_entries;
END
$$;

-- Leaderboards for API servers. rank() gives equal values the same rank;
-- rows of equal rank are listed by the stated tie-break.

-- By Elo (every agent); ties listed by agent id.
CREATE VIEW leaderboard_elo AS
SELECT rank() OVER (ORDER BY a.elo DESC) AS rank, a.id AS agent_id, a.name, a.elo,
       a.match_count, a.win_count, a.draw_count, a.loss_count
FROM agents a ORDER BY a.elo DESC, a.id;

-- By window score (agents with at least one task); window_score = w_sum / N
-- (exact: window_sum and window_size are given too); ties listed by agent id.
CREATE VIEW leaderboard_window AS
SELECT rank() OVER (ORDER BY sa.w_sum DESC) AS rank, sa.agent_id, a.name,
       round(sa.w_sum::numeric / st.window_size, 6) AS window_score,
       sa.w_sum AS window_sum, st.window_size, sa.w_count AS window_count,
       CASE WHEN sa.w_count > 0 THEN round(sa.w_sum::numeric / sa.w_count, 6) END AS window_mean,
       sa.w_wins AS window_wins, sa.w_draws AS window_draws, sa.w_losses AS window_losses,
       sa.w_best AS window_best, sa.tasks, a.elo, sa.ready
FROM standings_agents sa JOIN agents a ON a.id = sa.agent_id CROSS JOIN standings_settings st
ORDER BY sa.w_sum DESC, sa.agent_id;

-- Per challenge: each agent's best score there; equal scores are ranked by
-- who got it first (the task's submitted_at, then its first result's id).
CREATE VIEW leaderboard_challenge AS
SELECT rank() OVER (PARTITION BY c.challenge_id
                    ORDER BY c.best_score DESC, c.best_submitted_at, c.best_first_id) AS rank,
       c.challenge_id, ch.slug, c.agent_id, a.name, c.best_score, c.best_submission,
       c.best_submitted_at, c.tasks,
       round(c.w_sum::numeric / st.window_size, 6) AS window_score, c.w_sum AS window_sum,
       c.w_count AS window_count, c.w_wins AS window_wins, c.w_draws AS window_draws,
       c.w_losses AS window_losses, c.w_best AS window_best, a.elo
FROM standings_agent_challenges c JOIN agents a ON a.id = c.agent_id
JOIN challenges ch ON ch.id = c.challenge_id CROSS JOIN standings_settings st
WHERE c.best_score IS NOT NULL
ORDER BY c.challenge_id, c.best_score DESC, c.best_submitted_at, c.best_first_id, c.agent_id;

-- Agents that already have results wait for the backfill (`arbiter migrate`
-- runs it right after this migration; `arbiter standings --backfill` resumes it).
INSERT INTO standings_agents (agent_id, ready)
SELECT DISTINCT s.agent_id, false FROM evaluation_results r JOIN submissions s ON s.id = r.submission_id
ORDER BY 1;
