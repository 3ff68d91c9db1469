-- 009_console: what the operator console reads (deploy/README.md
-- "Operator console") without scanning a large table.
--
-- 1. Exact counts of submissions by status, in microseconds. Counting a large table by status reads all of it (seconds at
-- 10M rows); these counters change in the same transaction as the rows, so
-- their sum is exact in every snapshot.
--
-- Statement-level triggers with transition tables: one statement (the
-- worker's commit updates a whole batch in one) adds its net change per
-- status, +1 for each new row's status and -1 for each old row's, so an
-- update that leaves the status alone writes nothing. The counters are
-- spread over 16 rows per status (the backend's pid picks one): concurrent
-- writers rarely wait on one row, and a statement takes its rows in status
-- order. Cost: one trigger call per statement writing submissions, and an
-- upsert of the one to three counter rows whose status changed.
--
-- The first count and the triggers are made in this migration's
-- transaction, which holds submissions' lock from CREATE TRIGGER on: writes
-- wait for the count (about a second per million rows) and none is missed.

CREATE TABLE submission_status_counts (
	status text NOT NULL,
	shard  int NOT NULL,
	n      bigint NOT NULL,
	PRIMARY KEY (status, shard)
);

CREATE FUNCTION submission_counts_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	s int := pg_backend_pid() % 16;
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO submission_status_counts AS c (status, shard, n)
		SELECT status, s, count(*) FROM new_rows GROUP BY status ORDER BY status
		ON CONFLICT (status, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
	ELSIF TG_OP = 'UPDATE' THEN
		INSERT INTO submission_status_counts AS c (status, shard, n)
		SELECT status, s, sum(d) FROM (SELECT status, 1 AS d FROM new_rows
		                               UNION ALL SELECT status, -1 FROM old_rows) x
		GROUP BY status HAVING sum(d) <> 0 ORDER BY status
		ON CONFLICT (status, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
	ELSE
		INSERT INTO submission_status_counts AS c (status, shard, n)
		SELECT status, s, -count(*) FROM old_rows GROUP BY status ORDER BY status
		ON CONFLICT (status, shard) DO UPDATE SET n = c.n + EXCLUDED.n;
	END IF;
	RETURN NULL;
END
$$;

CREATE TRIGGER submissions_count_insert AFTER INSERT ON submissions
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION submission_counts_apply();
CREATE TRIGGER submissions_count_update AFTER UPDATE ON submissions
	REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION submission_counts_apply();
CREATE TRIGGER submissions_count_delete AFTER DELETE ON submissions
	REFERENCING OLD TABLE AS old_rows
	FOR EACH STATEMENT EXECUTE FUNCTION submission_counts_apply();

INSERT INTO submission_status_counts (status, shard, n)
SELECT status, 0, count(*) FROM submissions GROUP BY status;

-- 2. The results of the last hour (arbiter status, the console's overview)
-- by an index on completed_at instead of a scan of every result: one more
-- index entry per result, at the right edge of the index (completed_at
-- grows), the cheapest kind of index insert. Built here under the
-- migration's lock: about a second per million results.
CREATE INDEX evaluation_results_completed_at_idx ON evaluation_results (completed_at);

-- The counters again from the rows, under the table's lock: for a database
-- whose submissions were written with the triggers off (a data-only restore,
-- session_replication_role = replica). Returns the submissions counted.
CREATE FUNCTION submission_counts_recount() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	total bigint;
BEGIN
	LOCK TABLE submissions IN SHARE MODE;
	DELETE FROM submission_status_counts;
	INSERT INTO submission_status_counts (status, shard, n)
	SELECT status, 0, count(*) FROM submissions GROUP BY status;
	SELECT coalesce(sum(n), 0) INTO total FROM submission_status_counts;
	RETURN total;
END
$$;

-- The counts by status, exact: what the console shows.
CREATE FUNCTION submission_counts(OUT status text, OUT n bigint) RETURNS SETOF record
LANGUAGE sql STABLE AS $$
	SELECT status, sum(n)::bigint FROM submission_status_counts GROUP BY status ORDER BY status
$$;
