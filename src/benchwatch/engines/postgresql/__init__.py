"""PostgreSQL: the embedded server (or one the user has), postgres_exporter, the server log's checkpoints."""

from __future__ import annotations

from benchwatch.engines import Engine


class PostgreSQL(Engine):
    name = "postgresql"
    title = "PostgreSQL"
    aliases = ("postgres",)
    default = True
    scrape_job = "postgres"


ENGINE = PostgreSQL()
