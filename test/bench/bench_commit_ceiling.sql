-- The strict ceiling of a commit (issue #23), run by test/bench/bench_commit.py with pgbench
-- (-M prepared, 2 clients): per transaction, the writes the exactly-once contract requires
-- for one batch of evaluations, as set-based statements and nothing else. No standings (a
-- projection applied after the commit), no settings, no notification; bench_commit.py
-- disables the standings trigger while this runs, if the schema still has one.
--
-- Each transaction takes the next row of bench_batches (written by bench_commit.py: the
-- batch's rows as the worker would send them, BATCH consecutive submissions, and the sorted
-- ids of their submissions, matches and agents), then in one pipeline:
--   lock the agents, the submissions and the matches, each in ascending id order;
--   insert the results, their dimension rows and their elo_history rows (one statement);
--   update the matches, the agents and the submissions (one statement each); COMMIT.
SELECT rows, sub_ids, mat_ids, agent_ids, agents FROM bench_batches
 WHERE b = (SELECT nextval('bench_batch_seq')) \gset
\startpipeline
BEGIN;
SELECT count(*) FROM (SELECT 1 FROM agents WHERE id = ANY(:agent_ids::uuid[]) ORDER BY id
  FOR NO KEY UPDATE) l;
SELECT count(*) FROM (SELECT 1 FROM submissions WHERE id = ANY(:sub_ids::uuid[]) ORDER BY id
  FOR NO KEY UPDATE) l;
SELECT count(*) FROM (SELECT 1 FROM matches WHERE id = ANY(:mat_ids::uuid[]) ORDER BY id
  FOR NO KEY UPDATE) l;
WITH j AS (SELECT * FROM jsonb_to_recordset(:rows::jsonb) AS x(sub uuid, mat uuid, agent uuid,
    job text, ev text, sc int, rs text, vf bool, res jsonb, log jsonb, dims jsonb, st bigint,
    eb int, ea int, ec int, k int, opp int, bonus numeric, ord int)),
  r AS (INSERT INTO evaluation_results (submission_id, eval_seq, job_id, evaluator, score, result,
    score_breakdown, submission_warnings, constraint_violations, verified, evaluation_log,
    worker_id, started_at, completed_at, elo_before, elo_change, k_factor)
    SELECT j.sub, 1, j.job, j.ev, j.sc, j.rs, j.res->'score_breakdown', j.res->'submission_warnings',
      j.res->'constraint_violations', j.vf, j.log, 'ceiling', to_timestamp(j.st / 1000.0),
      clock_timestamp(), j.eb, j.ec, j.k FROM j ORDER BY j.ord RETURNING id, submission_id),
  d AS (INSERT INTO evaluation_dimensions (result_id, key, score, weight, weighted, detail)
    SELECT r.id, x.key, x.score, x.weight, x.weighted, x.detail FROM r JOIN j ON j.sub = r.submission_id,
      jsonb_to_recordset(j.dims) AS x(key text, score int, weight numeric, weighted numeric, detail jsonb))
INSERT INTO elo_history (agent_id, match_id, result_id, elo_before, elo_after, elo_change,
    opponent_elo, k_factor, bonus, reason)
  SELECT j.agent, j.mat, r.id, j.eb, j.ea, j.ec, j.opp, j.k, j.bonus, 'evaluation'
  FROM j JOIN r ON r.submission_id = j.sub ORDER BY j.ord;
UPDATE matches t SET status = 'completed', result = j.rs, score = j.sc, verified = j.vf,
    elo_before = j.eb, elo_after = j.ea, elo_change = j.ec, completed_at = clock_timestamp()
  FROM jsonb_to_recordset(:rows::jsonb) AS j(mat uuid, rs text, sc int, vf bool, eb int, ea int, ec int)
  WHERE t.id = j.mat;
UPDATE agents t SET elo = g.elo, match_count = g.mc, win_count = g.w, draw_count = g.d,
    loss_count = g.l, current_streak = g.cs, best_streak = g.bs
  FROM jsonb_to_recordset(:agents::jsonb) AS g(id uuid, elo int, mc int, w int, d int, l int,
    cs int, bs int) WHERE t.id = g.id;
UPDATE submissions t SET status = 'completed', attempts = GREATEST(t.attempts, 1)
  WHERE t.id = ANY(:sub_ids::uuid[]);
COMMIT;
\endpipeline
