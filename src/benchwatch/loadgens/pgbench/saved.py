"""A saved pgbench output (``import``): what it says of the run, which has no argv."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from benchwatch.loadgens.pgbench import output as po
from benchwatch.loadgens.pgbench.model import script_name


def read_events(lines: Sequence[bytes]) -> tuple[dict[str, object], list[str], float | None]:
    """First pass over a saved output: the summary facts, script names and the last progress time."""
    parser = po.PgbenchOutputParser()
    summary: dict[str, object] = {}
    scripts: list[str] = []
    weights: dict[int, int] = {}
    sql_rows: dict[int, int] = {}
    last_time = None
    for line in lines:
        for event in parser.feed(line):
            if isinstance(event, po.Summary):
                summary[event.key] = event.value
            elif isinstance(event, po.ScriptHeader):
                scripts.append(event.name)
                weights[event.index] = event.weight or 1
            elif isinstance(event, po.StatementLatency) and not event.statement.startswith("\\"):
                sql_rows[event.script_index] = sql_rows.get(event.script_index, 0) + 1
            elif isinstance(event, po.Progress):
                last_time = event.time_s
    if sql_rows:
        total = sum(weights.get(i, 1) for i in sql_rows)
        summary["_sql_statements"] = sum(weights.get(i, 1) * n for i, n in sql_rows.items()) / total
    return summary, scripts, last_time


def info_from_summary(summary: Mapping[str, object], scripts: list[str]) -> dict[str, str]:
    """benchmark_run_info's labels for a saved output, which has no argv: from its summary."""
    labels: dict[str, str] = {}
    if scripts:
        labels["script"] = "+".join(script_name(s) for s in scripts)
    elif "transaction_type" in summary:
        labels["script"] = script_name(str(summary["transaction_type"]))
    for key, label in (("clients", "clients"), ("threads", "threads"), ("scaling_factor", "scale"),
                       ("query_mode", "protocol"), ("duration_s", "duration_seconds"),
                       ("transactions_per_client", "transactions_per_client"), ("rate_limit_tps", "rate_limit_tps"),
                       ("pgbench_version", "pgbench_version")):
        if key in summary:
            value = summary[key]
            labels[label] = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return labels
