-- 010_standings_select: the projection's batch finds its results through the
-- candidates above the horizon, in id order, and probes only as many as it
-- takes (sql/README.md, "The projection", Cost). 008's query joined every
-- submission to find them when the planner misjudged the horizon's share
-- (132 ms of a 158 ms batch of 2,000 at 40,000 submissions), and probed every
-- unapplied result above the horizon on each batch, so a projection far
-- behind caught up in time quadratic in its lag. The rules, the order and
-- what a batch applies are 008's.

-- The candidates (every result at or above the horizon, from the partial
-- index on standings_xid), sorted by id, then per candidate: its task, agent,
-- challenge and submission time (the commit's hints, else by key), and whether
-- it is applied (the standings say so) or its agent waits for the backfill. A LIMIT on the caller's
-- ORDER BY id stops the probes after as many unapplied results.
CREATE OR REPLACE FUNCTION standings_unapplied(p_horizon bigint)
RETURNS TABLE (id bigint, xid bigint, submission_id uuid, agent_id uuid, challenge_id uuid,
               first_result_id bigint, eval_seq int, score int, result text,
               submitted_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT c.id, c.standings_xid, c.submission_id, k.agent_id, k.challenge_id, c.first_id,
	       c.eval_seq, c.score, c.result, k.submitted_at
	FROM (SELECT r.id, r.standings_xid, r.submission_id, r.eval_seq, r.score, r.result,
	             CASE WHEN r.eval_seq = 1 THEN r.id
	                  ELSE (SELECT f.id FROM evaluation_results f
	                        WHERE f.submission_id = r.submission_id AND f.eval_seq = 1) END
	             AS first_id,
	             r.standings_agent_id IS NOT NULL AND r.standings_challenge_id IS NOT NULL
	             AND r.standings_submitted_at IS NOT NULL AS hinted,
	             r.standings_agent_id, r.standings_challenge_id, r.standings_submitted_at
	      FROM evaluation_results r
	      WHERE r.standings_xid IS NOT NULL AND r.standings_xid >= p_horizon
	      ORDER BY r.id) c
	-- the worker's first evaluations carry their agent, challenge and submission
	-- time (sql/006's hints, copies of those rows); others are looked up by key
	CROSS JOIN LATERAL (SELECT c.standings_agent_id AS agent_id,
	                           c.standings_challenge_id AS challenge_id,
	                           c.standings_submitted_at AS submitted_at
	                    WHERE c.hinted
	                    UNION ALL
	                    SELECT s.agent_id, m.challenge_id, s.submitted_at
	                    FROM submissions s JOIN matches m ON m.id = s.match_id
	                    WHERE NOT c.hinted AND s.id = c.submission_id) k
	-- (through the small partial index of the agents waiting)
	WHERE (SELECT 1 FROM standings_agents sa WHERE sa.agent_id = k.agent_id AND NOT sa.ready) IS NULL
	  -- a scalar subquery: one probe of the primary key
	  AND coalesce((SELECT e.eval_seq FROM standings_entries e
	                WHERE e.first_result_id = c.first_id), 0) < c.eval_seq
$$;

-- 008's batch, with the selection above.
CREATE OR REPLACE FUNCTION standings_apply(p_limit int, OUT applied int, OUT busy bool, OUT caught_up bool,
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
	more  bool;
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

	-- Every result committed before t0 is visible to the next statement, which
	-- takes the p_limit + 1 smallest unapplied ids (the extra one only says that
	-- more are left). It is planned on each call with the horizon's value
	-- (EXECUTE), as in 008.
	t0 := clock_timestamp();
	EXECUTE $q$
	SELECT array_agg(ROW(q.submission_id, q.agent_id, q.challenge_id, 0, 0, q.first_result_id, q.id,
	                     q.eval_seq, q.score, q.result, q.submitted_at)::standings_entries
	                 ORDER BY q.id) FILTER (WHERE q.rn <= $2),
	       count(*) > $2, max(q.id) FILTER (WHERE q.rn <= $2),
	       pg_snapshot_xmin(pg_current_snapshot())::text::bigint
	FROM (SELECT u.*, row_number() OVER (ORDER BY u.id) AS rn
	      FROM (SELECT * FROM standings_unapplied($1) v ORDER BY v.id LIMIT $2 + 1) u) q
	$q$ INTO b, more, maxid, x USING h, p_limit;
	-- What the limit left has ids above the batch's; the oldest transaction among
	-- the candidates there bounds the next horizon (applied ones included: a
	-- lower horizon only re-reads them).
	IF more THEN
		EXECUTE 'SELECT min(r.standings_xid) FROM evaluation_results r
		         WHERE r.standings_xid >= $1 AND r.id > $2'
		INTO hleft USING h, maxid;
	END IF;
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
			-- (positions counted ascending only, the window's last n from the group's
			-- count: two sorts of the batch where four descending ones were)
			SELECT x.submission_id, x.agent_id, x.challenge_id, a.tasks + x.ra AS seq,
			       c.tasks + x.rc AS cseq, x.first_result_id, x.result_id, x.eval_seq, x.score,
			       x.result, x.submitted_at, x.na - x.ra < n AS a_in, x.nc - x.rc < n AS c_in
			FROM (SELECT u.*,
			             row_number() OVER (PARTITION BY u.agent_id ORDER BY u.first_result_id) AS ra,
			             count(*) OVER (PARTITION BY u.agent_id) AS na,
			             row_number() OVER (PARTITION BY u.agent_id, u.challenge_id
			                                ORDER BY u.first_result_id) AS rc,
			             count(*) OVER (PARTITION BY u.agent_id, u.challenge_id) AS nc
			      FROM unnest(b) u WHERE u.eval_seq = 1) x
			JOIN standings_agents a ON a.agent_id = x.agent_id
			JOIN standings_agent_challenges c ON c.agent_id = x.agent_id AND c.challenge_id = x.challenge_id),
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
	caught_up := NOT more;
	UPDATE standings_progress p SET
		horizon = greatest(p.horizon, least(x, coalesce(hleft, x))),
		as_of = CASE WHEN NOT more THEN greatest(p.as_of, t0) ELSE p.as_of END,
		applied_results = p.applied_results + applied,
		applied_batches = p.applied_batches + (applied > 0)::int,
		last_result_id = greatest(p.last_result_id, maxid),
		updated_at = clock_timestamp()
	RETURNING p.as_of, extract(epoch FROM clock_timestamp() - p.as_of), p.last_result_id
	INTO as_of, lag_seconds, last_result_id;
END
$$;

