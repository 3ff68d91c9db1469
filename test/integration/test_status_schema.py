#!/usr/bin/python3
"""`arbiter status` shows the schema state as the workers' /readyz does (README "arbiter
status"), through a real redis-server and PostgreSQL:
- on a database never migrated it says so and names `arbiter migrate` (not a bare
  "relation ... does not exist"), exit 1;
- with the schema one version behind this binary it says SCHEMA BEHIND with both versions
  and `arbiter migrate`, exit 1, and --json has schema_version / schema_needed /
  schema_current;
- with the schema current it shows the version, exit 0.
"""
import json
import sys

import psycopg2

from services import Services
from workerkit import cli, migrate, ok, done


def main():
    with Services() as s:
        p = cli(s, s.redis_url, "status")
        ok(p.returncode == 1 and "run `arbiter migrate`" in p.stdout
           and "does not exist" not in p.stdout,
           "unmigrated: status names `arbiter migrate`, exit 1", (p.returncode, p.stdout, p.stderr))
        migrate(s)
        p = cli(s, s.redis_url, "status", "--json")
        pg = json.loads(p.stdout)["postgres"]
        latest = pg.get("schema_needed")
        ok(p.returncode == 0 and pg.get("schema_current") is True and pg.get("schema_version") == latest
           and isinstance(latest, int) and latest > 0,
           "migrated: schema current, exit 0", (p.returncode, pg))
        p = cli(s, s.redis_url, "status")
        ok("schema version" in p.stdout and "%d (current)" % latest in p.stdout,
           "the table shows the version", p.stdout)

        db = psycopg2.connect(s.database_url)
        db.autocommit = True
        with db.cursor() as c:
            c.execute("CREATE TABLE saved_migration AS SELECT * FROM arbiter_migrations "
                      "WHERE version = %s", (latest,))
            c.execute("DELETE FROM arbiter_migrations WHERE version = %s", (latest,))
        p = cli(s, s.redis_url, "status")
        ok(p.returncode == 1 and "SCHEMA BEHIND" in p.stdout
           and "%d, this binary needs %d" % (latest - 1, latest) in p.stdout
           and "arbiter migrate" in p.stdout,
           "one version behind: SCHEMA BEHIND with both versions, exit 1", (p.returncode, p.stdout))
        p = cli(s, s.redis_url, "status", "--json")
        pg = json.loads(p.stdout)["postgres"]
        ok(p.returncode == 1 and pg.get("schema_current") is False
           and pg.get("schema_version") == latest - 1, "--json: schema_current false", pg)
        with db.cursor() as c:
            c.execute("INSERT INTO arbiter_migrations SELECT * FROM saved_migration")
        p = cli(s, s.redis_url, "status")
        ok(p.returncode == 0, "restored: exit 0 again", p.stdout)
        db.close()
    return done()


if __name__ == "__main__":
    sys.exit(main())
