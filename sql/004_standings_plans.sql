-- 004_standings_plans: the standings trigger's statements keep their cheap,
-- O(1) plans whatever the tables held when a session planned them.
--
-- The trigger (002) runs generic plans, made once per session and again after
-- each ANALYZE. Planned while the standings tables are tiny (a new database, a
-- rebuild, autovacuum's first ANALYZE), index costs tie, and 002's plans read
-- the wrong index: the leaving positions of an agent's window through
-- (agent_id, challenge_id, cseq) with agent_id alone as the condition, those
-- of an agent x challenge window through (agent_id, seq) -- every task of the
-- agent read and filtered on every commit -- and the agent x challenge rows
-- through the best-score index with no key at all. Those plans stayed until
-- the next ANALYZE while the history grew. Here each lookup can use only the
-- index that fits it:
--   * the per-challenge position index is partial on cseq > 0 (every row has
--     cseq >= 1): only a statement that says `cseq > 0` can use it, so an
--     agent's lookups (which never do) read (agent_id, seq); the agent x
--     challenge lookups say it and read their positions in cseq order, which
--     only this index gives without a sort;
--   * the best-score index (the per-challenge leaderboard) is partial on
--     best_score IS NOT NULL, as the view reads it, so key lookups of
--     standings_agent_challenges can only use its primary key;
--   * the trigger reads the agent x challenge rows of a batch one key at a
--     time (002's row IN (...) test planned as a scan).
-- The rules and results are unchanged (sql/README.md, "Standings").
-- test/integration/test_standings_plans.py checks the plans.

DROP INDEX standings_entries_cseq_idx;
CREATE UNIQUE INDEX standings_entries_cseq_idx ON standings_entries (agent_id, challenge_id, cseq)
	WHERE cseq > 0;

DROP INDEX standings_agent_challenges_best_idx;
CREATE INDEX standings_agent_challenges_best_idx ON standings_agent_challenges
	(challenge_id, best_score DESC, best_submitted_at, best_first_id, agent_id)
	WHERE best_score IS NOT NULL;

CREATE OR REPLACE FUNCTION standings_window_best_challenge(p_agent uuid, p_challenge uuid,
                                                           p_from bigint,
                                                           OUT best int, OUT best_seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT w.score, w.cseq FROM (
		SELECT score, cseq FROM standings_entries
		WHERE agent_id = p_agent AND challenge_id = p_challenge AND cseq > 0 AND cseq > p_from
		ORDER BY cseq) w
	ORDER BY w.score DESC, w.cseq LIMIT 1
$$;

CREATE OR REPLACE FUNCTION standings_on_results() RETURNS trigger
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
	SELECT array_agg(ROW(sc.*)::standings_agent_challenges) INTO pc
		FROM (SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(batch) u) k
		CROSS JOIN LATERAL (SELECT x.* FROM standings_agent_challenges x
		                    WHERE x.agent_id = k.agent_id AND x.challenge_id = k.challenge_id LIMIT 1) sc;
	IF coalesce(array_length(pc, 1), 0) < npairs THEN   -- (also when some agents are not ready)
		INSERT INTO standings_agent_challenges (agent_id, challenge_id)
			SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(batch) u
			JOIN unnest(ag) a ON a.agent_id = u.agent_id AND a.ready
			ORDER BY 1, 2 ON CONFLICT DO NOTHING;
		SELECT array_agg(ROW(sc.*)::standings_agent_challenges) INTO pc
			FROM (SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(batch) u) k
			CROSS JOIN LATERAL (SELECT x.* FROM standings_agent_challenges x
			                    WHERE x.agent_id = k.agent_id AND x.challenge_id = k.challenge_id LIMIT 1) sc;
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
		                   FROM (SELECT e.score, e.result FROM standings_entries e
		                         WHERE e.challenge_id = q.challenge_id AND e.agent_id = q.agent_id
		                         AND e.cseq > 0 AND e.cseq > q.t_new - q.m - n AND e.cseq <= q.t_new - n
		                         ORDER BY e.cseq LIMIT q.m) e) o ON true
		LEFT JOIN LATERAL (SELECT e.score, e.cseq
		                   FROM (SELECT e.score, e.cseq FROM standings_entries e
		                         WHERE NOT q.keep AND e.challenge_id = q.challenge_id
		                         AND e.agent_id = q.agent_id AND e.cseq > 0 AND e.cseq > q.t_new - n
		                         ORDER BY e.cseq LIMIT n) e
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
					WHERE agent_id = r.agent_id AND challenge_id = r.challenge_id AND cseq > 0
					AND cseq = c.tasks - n ORDER BY cseq LIMIT 1;
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
					WHERE x.agent_id = r.agent_id AND x.challenge_id = r.challenge_id AND x.cseq > 0
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
