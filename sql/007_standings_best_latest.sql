-- 007_standings_best_latest: the window's best position is now the LATEST
-- position holding the best score, not the earliest (sql/README.md,
-- "Standings"). w_best (the score) is unchanged; only w_best_seq, which
-- marks where it sits, moves on ties.
--
-- Why: the window's best is re-read from the agent's N window entries when
-- its position leaves the window (about one evaluation in N for distinct
-- scores). With the earliest position marked, ties made that happen on
-- nearly every evaluation once a window was full: the earliest of equal
-- scores is always the next to leave. Scores tie often (a deterministic
-- challenge's perfect answers all score 1000); in the worker's benches one
-- evaluation in three re-read a window, ~25 us of database time per
-- evaluation. With the latest position marked, a window's best is re-read
-- only when no later task has that score, which for equal scores is never.
--
-- Changed: the two window-best functions, the set-based aggregate (the
-- backfill and the check use it) and the trigger, each with the tie rule
-- reversed (002, 004 and 006 otherwise); the stored w_best_seq of existing
-- rows is moved to the latest position of their w_best in the window.

CREATE OR REPLACE FUNCTION standings_window_best_agent(p_agent uuid, p_from bigint,
                                                       OUT best int, OUT best_seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT score, seq FROM standings_entries
	WHERE agent_id = p_agent AND seq > p_from ORDER BY score DESC, seq DESC LIMIT 1
$$;

CREATE OR REPLACE FUNCTION standings_window_best_challenge(p_agent uuid, p_challenge uuid,
                                                           p_from bigint,
                                                           OUT best int, OUT best_seq bigint)
LANGUAGE sql STABLE AS $$
	SELECT w.score, w.cseq FROM (
		SELECT score, cseq FROM standings_entries
		WHERE agent_id = p_agent AND challenge_id = p_challenge AND cseq > 0 AND cseq > p_from
		ORDER BY cseq) w
	ORDER BY w.score DESC, w.cseq DESC LIMIT 1
$$;

CREATE OR REPLACE FUNCTION standings_aggregate(p_src regclass, p_agents uuid[], p_challenges bool)
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
		             (array_agg(e.score ORDER BY e.score DESC, e.%3$s DESC))[1] AS w_best,
		             (array_agg(e.%3$s ORDER BY e.score DESC, e.%3$s DESC))[1] AS w_best_seq
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


-- Existing windows: their best's latest position (the trigger's rule from now on).
UPDATE standings_agents t SET w_best_seq = (
	SELECT max(e.seq) FROM standings_entries e
	WHERE e.agent_id = t.agent_id AND e.seq > t.tasks - (SELECT window_size FROM standings_settings)
	AND e.score = t.w_best)
WHERE t.w_best IS NOT NULL AND t.ready;
UPDATE standings_agent_challenges t SET w_best_seq = (
	SELECT max(e.cseq) FROM standings_entries e
	WHERE e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id AND e.cseq > 0
	AND e.cseq > t.tasks - (SELECT window_size FROM standings_settings) AND e.score = t.w_best)
WHERE t.w_best IS NOT NULL;

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
	all_first bool;
	nrows  bigint;
	nagents bigint;
	nlocked bigint;
	redo_a uuid[];    -- agents whose window best must be re-read
	redo_ca uuid[];   -- agent x challenge pairs likewise (agent, challenge)
	redo_cc uuid[];
	given  bool;
	npairs bigint;
	nfound bigint;
BEGIN
	-- The transition table alone first: a statement that reads it is planned
	-- anew on every call, so the joins are in the next (cached) statement.
	-- The worker's first-evaluation commit fills the standings_* columns from
	-- the rows it updates in the same statement; then the batch is complete
	-- here and the lookup of submissions and matches is skipped.
	SELECT array_agg(ROW(x.submission_id, x.standings_agent_id, x.standings_challenge_id, 0, 0, x.id,
	                     x.id, x.eval_seq, x.score, x.result, x.standings_submitted_at)::standings_entries
	                 ORDER BY x.standings_agent_id, x.id),
	       bool_and(x.eval_seq = 1),
	       bool_and(x.standings_agent_id IS NOT NULL AND x.standings_challenge_id IS NOT NULL
	                AND x.standings_submitted_at IS NOT NULL),
	       count(*), count(DISTINCT x.standings_agent_id),
	       count(DISTINCT (x.standings_agent_id, x.standings_challenge_id)),
	       (SELECT window_size FROM standings_settings)
	INTO batch, all_first, given, nrows, nagents, npairs, n FROM new_results x;
	IF batch IS NULL THEN
		RETURN NULL;
	END IF;
	IF NOT given THEN
		-- Other writers (and the worker's re-evaluations): agent, challenge and
		-- submission time from submissions and matches.
		SELECT array_agg(ROW(u.submission_id, s.agent_id, m.challenge_id, 0, 0, u.first_result_id,
		                     u.result_id, u.eval_seq, u.score, u.result, s.submitted_at)::standings_entries
		                 ORDER BY s.agent_id, u.first_result_id),
		       count(*), count(DISTINCT s.agent_id), count(DISTINCT (s.agent_id, m.challenge_id))
		INTO batch, nrows, nagents, npairs
		FROM unnest(batch) u JOIN submissions s ON s.id = u.submission_id JOIN matches m ON m.id = s.match_id;
		IF batch IS NULL THEN
			RETURN NULL;
		END IF;
	END IF;

	-- Lock the agents' standings rows in key order, creating the missing ones
	-- first. The statements below read the locked rows themselves (each takes
	-- a new snapshot, so they see the latest versions: e.g. a backfill batch
	-- that held a row and committed). The agent x challenge rows need no lock
	-- of their own: every writer of them (this trigger, the backfill) holds
	-- their agent's row first.
	-- The same statement counts the batch's agent x challenge rows that exist
	-- (its snapshot may miss one created by a commit it waited for: then the
	-- INSERT below runs, as it would for a new pair).
	SELECT count(*), (SELECT count(*) FROM standings_agent_challenges sc
	                  WHERE (sc.agent_id, sc.challenge_id) IN (SELECT u.agent_id, u.challenge_id
	                                                           FROM unnest(batch) u))
	INTO nlocked, nfound FROM (
		SELECT 1 FROM standings_agents sa
		WHERE sa.agent_id = ANY (ARRAY(SELECT u.agent_id FROM unnest(batch) u))
		ORDER BY sa.agent_id FOR NO KEY UPDATE) l;
	IF nlocked < nagents THEN
		INSERT INTO standings_agents (agent_id)
			SELECT DISTINCT u.agent_id FROM unnest(batch) u ORDER BY 1 ON CONFLICT DO NOTHING;
		PERFORM FROM (
			SELECT 1 FROM standings_agents sa
			WHERE sa.agent_id = ANY (ARRAY(SELECT u.agent_id FROM unnest(batch) u))
			ORDER BY sa.agent_id FOR NO KEY UPDATE) l;
	END IF;
	-- The missing agent x challenge rows of the ready agents (agents waiting
	-- for the backfill are skipped: their batch picks these results up).
	IF nfound < npairs THEN
		INSERT INTO standings_agent_challenges (agent_id, challenge_id)
			SELECT DISTINCT u.agent_id, u.challenge_id FROM unnest(batch) u
			JOIN standings_agents sa ON sa.agent_id = u.agent_id AND sa.ready
			ORDER BY 1, 2 ON CONFLICT DO NOTHING;
	END IF;

	IF all_first AND nrows <= n THEN
		-- Only first evaluations (the worker's usual statement), set-based. The new
		-- tasks take the next positions; per agent (and per agent x challenge) the
		-- positions (old tasks - N, new tasks - N] leave the window: with no more new
		-- tasks than N these are all old tasks, read by one index range (the entries
		-- inserted here are not visible to this statement, and need not be). The
		-- window's best becomes the best new task if it equals or beats the old best
		-- (the later position wins a tie), else stays if the old best is still in
		-- the window, else is re-read below (w_best set to NULL marks it).
		WITH nw AS (
			SELECT u.submission_id, u.agent_id, u.challenge_id,
			       a.tasks + row_number() OVER (PARTITION BY u.agent_id ORDER BY u.first_result_id) AS seq,
			       c.tasks + row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                                    ORDER BY u.first_result_id) AS cseq,
			       u.first_result_id, u.result_id, u.eval_seq, u.score, u.result, u.submitted_at,
			       -- the best new task of the agent, of the pair (both: latest position
			       -- on ties), and on the challenge (earliest submitted_at, first id)
			       row_number() OVER (PARTITION BY u.agent_id
			                          ORDER BY u.score DESC, u.first_result_id DESC) = 1 AS a_best,
			       row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                          ORDER BY u.score DESC, u.first_result_id DESC) = 1 AS c_best,
			       row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                          ORDER BY u.score DESC, u.submitted_at, u.first_result_id) = 1 AS t_best
			FROM unnest(batch) u
			JOIN standings_agents a ON a.agent_id = u.agent_id AND a.ready
			JOIN standings_agent_challenges c ON c.agent_id = u.agent_id AND c.challenge_id = u.challenge_id),
		ins AS (
			INSERT INTO standings_entries
			SELECT w.submission_id, w.agent_id, w.challenge_id, w.seq, w.cseq, w.first_result_id,
			       w.result_id, w.eval_seq, w.score, w.result, w.submitted_at FROM nw w),
		ga AS (
			SELECT w.agent_id, count(*) AS m, sum(w.score) AS add_s,
			       count(*) FILTER (WHERE w.result = 'win') AS add_w,
			       count(*) FILTER (WHERE w.result = 'draw') AS add_d,
			       count(*) FILTER (WHERE w.result = 'loss') AS add_l,
			       max(w.score) FILTER (WHERE w.a_best) AS nb, max(w.seq) FILTER (WHERE w.a_best) AS nbs
			FROM nw w GROUP BY w.agent_id),
		ua AS (
			UPDATE standings_agents t SET tasks = t.tasks + g.m, w_count = least(t.tasks + g.m, n),
				(w_sum, w_wins, w_draws, w_losses) = (
					SELECT t.w_sum + g.add_s - coalesce(sum(e.score), 0),
					       t.w_wins + g.add_w - count(*) FILTER (WHERE e.result = 'win'),
					       t.w_draws + g.add_d - count(*) FILTER (WHERE e.result = 'draw'),
					       t.w_losses + g.add_l - count(*) FILTER (WHERE e.result = 'loss')
					FROM standings_entries e WHERE e.agent_id = t.agent_id
					AND e.seq > t.tasks - n AND e.seq <= t.tasks + g.m - n),
				w_best = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nb
				              WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best END,
				w_best_seq = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nbs
				                  WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best_seq END
			FROM ga g WHERE t.agent_id = g.agent_id
			RETURNING t.agent_id, t.w_best IS NULL AS redo),
		gp AS (
			SELECT w.agent_id, w.challenge_id, count(*) AS m, sum(w.score) AS add_s,
			       count(*) FILTER (WHERE w.result = 'win') AS add_w,
			       count(*) FILTER (WHERE w.result = 'draw') AS add_d,
			       count(*) FILTER (WHERE w.result = 'loss') AS add_l,
			       max(w.score) FILTER (WHERE w.c_best) AS nb, max(w.cseq) FILTER (WHERE w.c_best) AS nbs,
			       max(w.score) FILTER (WHERE w.t_best) AS bsc,
			       (array_agg(w.submission_id) FILTER (WHERE w.t_best))[1] AS bsub,
			       max(w.submitted_at) FILTER (WHERE w.t_best) AS bsat,
			       max(w.first_result_id) FILTER (WHERE w.t_best) AS bfid
			FROM nw w GROUP BY w.agent_id, w.challenge_id),
		up AS (
			UPDATE standings_agent_challenges t SET tasks = t.tasks + g.m, w_count = least(t.tasks + g.m, n),
				(w_sum, w_wins, w_draws, w_losses) = (
					SELECT t.w_sum + g.add_s - coalesce(sum(e.score), 0),
					       t.w_wins + g.add_w - count(*) FILTER (WHERE e.result = 'win'),
					       t.w_draws + g.add_d - count(*) FILTER (WHERE e.result = 'draw'),
					       t.w_losses + g.add_l - count(*) FILTER (WHERE e.result = 'loss')
					FROM (SELECT e.score, e.result FROM standings_entries e
					      WHERE e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id AND e.cseq > 0
					      AND e.cseq > t.tasks - n AND e.cseq <= t.tasks + g.m - n
					      ORDER BY e.cseq LIMIT g.m) e),
				w_best = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nb
				              WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best END,
				w_best_seq = CASE WHEN t.w_best IS NULL OR g.nb >= t.w_best THEN g.nbs
				                  WHEN t.w_best_seq > t.tasks + g.m - n THEN t.w_best_seq END,
				-- all-time best on the challenge; ties go to the earliest task
				(best_score, best_submission, best_submitted_at, best_first_id) = (
					SELECT CASE WHEN b THEN g.bsc ELSE t.best_score END,
					       CASE WHEN b THEN g.bsub ELSE t.best_submission END,
					       CASE WHEN b THEN g.bsat ELSE t.best_submitted_at END,
					       CASE WHEN b THEN g.bfid ELSE t.best_first_id END
					FROM (SELECT t.best_score IS NULL OR g.bsc > t.best_score
					             OR (g.bsc = t.best_score AND (g.bsat, g.bfid)
					                 < (t.best_submitted_at, t.best_first_id)) AS b) x)
			FROM gp g WHERE t.agent_id = g.agent_id AND t.challenge_id = g.challenge_id
			RETURNING t.agent_id, t.challenge_id, t.w_best IS NULL AS redo)
		SELECT x.ra, y.ca, y.cc INTO redo_a, redo_ca, redo_cc
		FROM (SELECT array_agg(ua.agent_id) AS ra FROM ua WHERE ua.redo) x,
		     (SELECT array_agg(up.agent_id) AS ca, array_agg(up.challenge_id) AS cc FROM up WHERE up.redo) y;

		-- The best left the window and no new task equals it: re-read over the
		-- window's N positions (these statements see the entries inserted above),
		-- one row at a time, by key (rare: about one group in N per new task).
		FOR i IN 1 .. coalesce(array_length(redo_a, 1), 0) LOOP
			UPDATE standings_agents t SET (w_best, w_best_seq) = (
				SELECT w.score, w.seq FROM (
					SELECT e.score, e.seq FROM standings_entries e
					WHERE e.agent_id = t.agent_id AND e.seq > t.tasks - n ORDER BY e.seq LIMIT n) w
				ORDER BY w.score DESC, w.seq DESC LIMIT 1)
			WHERE t.agent_id = redo_a[i];
		END LOOP;
		FOR i IN 1 .. coalesce(array_length(redo_ca, 1), 0) LOOP
			UPDATE standings_agent_challenges t SET (w_best, w_best_seq) = (
				SELECT w.score, w.cseq FROM (
					SELECT e.score, e.cseq FROM standings_entries e
					WHERE e.agent_id = t.agent_id AND e.challenge_id = t.challenge_id AND e.cseq > 0
					AND e.cseq > t.tasks - n ORDER BY e.cseq LIMIT n) w
				ORDER BY w.score DESC, w.cseq DESC LIMIT 1)
			WHERE t.agent_id = redo_ca[i] AND t.challenge_id = redo_cc[i];
		END LOOP;
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
			IF a.w_best IS NULL OR r.score >= a.w_best THEN
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
			IF c.w_best IS NULL OR r.score >= c.w_best THEN
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
				ELSIF r.score > a.w_best OR (r.score = a.w_best AND e.seq > a.w_best_seq) THEN
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
				ELSIF r.score > c.w_best OR (r.score = c.w_best AND e.cseq > c.w_best_seq) THEN
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
