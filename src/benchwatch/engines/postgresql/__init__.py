"""PostgreSQL: the embedded server (or one the user has), postgres_exporter, the server log's checkpoints."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from benchwatch.engines import Engine

if TYPE_CHECKING:
    from benchwatch.engines import StackPart
    from benchwatch.stack.native import Stack


class PostgreSQL(Engine):
    name = "postgresql"
    title = "PostgreSQL"
    aliases = ("postgres",)
    default = True
    scrape_job = "postgres"
    server_transactions_text = "commits+rollbacks per second counted by the selected targets' servers (pg_stat_database)"
    regions_text = "Shaded regions are checkpoints, coloured by reason (the server log's timestamps)."
    regions_name = "checkpoint regions"
    panels_summary = "each target's disks, checkpoints, WAL and commits"
    default_ports: ClassVar[Mapping[str, int]] = {"postgres": 15432, "postgres_exporter": 19187}
    packages: ClassVar[Mapping[str, str]] = {"postgres": "postgresql", "postgres_exporter": "prometheus-postgres-exporter"}
    demo = "demo"

    def binary(self, component: str) -> str | None:
        from benchwatch.engines.postgresql import embedded

        return embedded.binary(component)

    def stack_part(self, stack: Stack) -> StackPart:
        from benchwatch.engines.postgresql import embedded

        return embedded.PostgreSQLPart(self, stack)

    def describe_server(self, env: Mapping[str, str]) -> dict:
        from benchwatch.engines.postgresql.settings import describe_server

        return describe_server(env)

    def capabilities(self, facts: Mapping[str, Any]) -> dict[str, bool]:
        from benchwatch.engines.postgresql.settings import capabilities

        recorded = dict(facts.get("capabilities") or {})
        if recorded:
            return recorded
        found = capabilities(facts.get("server_version"), None)
        found.pop("pg_stat_statements", None)  # runs recorded before did not say what was preloaded
        return found

    def server_transactions_expr(self) -> str:
        from benchwatch.engines.postgresql import dashboard

        return dashboard.server_transactions()

    def annotations(self) -> list[Any]:
        from benchwatch.engines.postgresql import dashboard

        return list(dashboard.checkpoint_annotations())

    def dashboard_panels(self, layout: Any) -> list[Any]:
        from benchwatch.engines.postgresql import dashboard

        return dashboard.target_rows(layout)

    def dashboards(self) -> dict[str, Callable[[], dict]]:
        from benchwatch.engines.postgresql import dashboard

        return {dashboard.CHECKPOINTS_WAL[1]: dashboard.checkpoints_wal}


ENGINE = PostgreSQL()
