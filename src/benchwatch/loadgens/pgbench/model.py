"""One pgbench run as Prometheus series: what pgbench prints beyond every tool's series.

The shared part (placement in time, counting, stalls, the end) is
benchwatch.model.run.RunModel; here: latency stddev and schedule lag per
progress line, pgbench 15's failed/skipped/retried counts, statements per
transaction, the per-statement table of ``-r`` and the summary's figures.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from typing import ClassVar

from benchwatch.loadgens.pgbench import output as po
from benchwatch.model import run
from benchwatch.model.run import RunModel
from benchwatch.model.samples import Sample

# pgbench's own series: name -> (type, help).
PGBENCH_METRICS: dict[str, tuple[str, str]] = {
    "pgbench_progress_latency_stddev_seconds": ("gauge", "Standard deviation of transaction latency over the last progress interval."),
    "pgbench_progress_lag_seconds": ("gauge", "Average schedule lag over the last progress interval (only with -R)."),
    "pgbench_failed_transactions_total": ("counter", "Failed transactions (pgbench 15+ 'failed')."),
    "pgbench_skipped_transactions_total": ("counter", "Transactions skipped for being too late (-R with -L)."),
    "pgbench_retried_transactions_total": ("counter", "Transactions retried after a serialization or deadlock failure (--max-tries)."),
    "pgbench_retries_total": ("counter", "Retries, all transactions together (--max-tries)."),
    "pgbench_script_sql_statements": ("gauge", "SQL statements per transaction (weighted over the run's scripts); statements per second = TPS x this."),
    "pgbench_statement_latency_seconds": ("gauge", "Average latency per script statement, from pgbench -r."),
    "pgbench_statement_failures_total": ("counter", "Failures per script statement, from pgbench -r (pgbench 15+)."),
    "pgbench_statement_retries_total": ("counter", "Retries per script statement, from pgbench -r (pgbench 15+)."),
    "pgbench_summary_latency_stddev_seconds": ("gauge", "Latency standard deviation of the whole run from pgbench's summary."),
    "pgbench_summary_initial_connection_time_seconds": ("gauge", "Initial connection time from pgbench's summary (pgbench 14+)."),
}
# Every series of a pgbench run.
METRICS: dict[str, tuple[str, str]] = {**run.METRICS, **PGBENCH_METRICS}

STDDEV = "pgbench_progress_latency_stddev_seconds"
LAG = "pgbench_progress_lag_seconds"
SQL_STATEMENTS = "pgbench_script_sql_statements"
STATEMENT_LATENCY = "pgbench_statement_latency_seconds"
STATEMENT_FAILURES = "pgbench_statement_failures_total"
STATEMENT_RETRIES = "pgbench_statement_retries_total"

_SUMMARY_GAUGES = {
    "tps": "benchmark_result_tps",
    "latency_avg_s": "benchmark_result_latency_seconds",
    "latency_stddev_s": "pgbench_summary_latency_stddev_seconds",
    "initial_connection_time_s": "pgbench_summary_initial_connection_time_seconds",
    "transactions_processed": "benchmark_result_transactions",
}
# Per-line counts pgbench 15+ prints, and the Progress field each comes from.
_PROGRESS_COUNTERS = (
    ("pgbench_failed_transactions_total", "failed"),
    ("pgbench_skipped_transactions_total", "skipped"),
    ("pgbench_retried_transactions_total", "retried"),
    ("pgbench_retries_total", "retries"),
)
# Counters per statement carry the statement's labels: written at the end, not with the run's counters.
_PER_STATEMENT = (STATEMENT_FAILURES, STATEMENT_RETRIES)

_BUILTIN_NAMES = {"TPC-B (sort of)": "tpcb-like", "simple update": "simple-update", "select only": "select-only"}


def script_name(transaction_type: str) -> str:
    """How people name a script: pgbench's builtin names, or a script file's base name."""
    text = transaction_type.strip()
    m = re.fullmatch(r"<builtin: (.*)>", text)
    if m:
        return _BUILTIN_NAMES.get(m.group(1), m.group(1))
    return os.path.basename(text)


class PgbenchRunModel(RunModel):
    tool = "pgbench"
    catalogue: ClassVar[Mapping[str, tuple[str, str]]] = METRICS
    summary_gauges: ClassVar[Mapping[str, str]] = _SUMMARY_GAUGES
    ended_with_the_run = run.ENDED_WITH_THE_RUN + (STDDEV, LAG)
    exact_transactions_key = "transactions_processed"
    line_time_re = re.compile(r"progress: ([0-9]+(?:\.[0-9]+)?) s")

    def __init__(self, run_id: str, *, sql_statements: float | None = None, **kw) -> None:
        super().__init__(run_id, **kw)
        self.sql_statements = sql_statements
        self.statements: list[po.StatementLatency] = []
        self.script_names: dict[int, str] = {}
        for name in _PER_STATEMENT:
            self._counters.pop(name, None)

    def new_parser(self) -> po.PgbenchOutputParser:
        return po.PgbenchOutputParser()

    def feed(self, event: object, arrival_epoch: float | None = None) -> list[Sample]:
        if isinstance(event, po.Progress):
            return self.progress(event.time_s, event.absolute, arrival_epoch, event.tps,
                                 gauges=((run.LATENCY, event.latency_s, None), (STDDEV, event.stddev_s, None),
                                         (LAG, event.lag_s, None)),
                                 counters=[(name, getattr(event, attr)) for name, attr in _PROGRESS_COUNTERS])
        if isinstance(event, po.Unparsed):
            return self.unparsed(arrival_epoch, text=event.text)
        if isinstance(event, po.ClientAborted):
            return self.client_aborted(event.message, arrival_epoch)
        if isinstance(event, po.Summary):
            return self.summary_figure(event.key, event.value, arrival_epoch)
        if isinstance(event, po.StatementLatency):
            problem = (run.figure_problem("statement latency", event.latency_s, math.inf)
                       or run.figure_problem("statement failures", event.failures, math.inf)
                       or run.figure_problem("statement retries", event.retries, math.inf))
            if problem is not None:
                return self.unparsed(arrival_epoch, problem)
            self.statements.append(event)
        elif isinstance(event, po.ScriptHeader):
            self.script_names[event.index] = script_name(event.name)
        elif isinstance(event, (po.ErrorLine, po.RunAborted)):
            self.errors.append(event.message)
        return []

    def heartbeat_extra(self, ts: int) -> list[Sample]:
        if self.sql_statements is None:
            return []
        return [self._set(SQL_STATEMENTS, float(self.sql_statements), ts)]

    def finish_extra(self, ts: int) -> list[Sample]:
        out = []
        for row in self.statements:
            # A single script's table has index 0: name it as the run's script.
            script = (self.script_names.get(row.script_index) if row.script_index
                      else self.info_labels.get("script") or script_name(str(self.summary.get("transaction_type", ""))))
            labels = {"statement": row.statement, "script": script or str(row.script_index)}
            out.append(self._set(STATEMENT_LATENCY, row.latency_s, ts, labels))
            if row.failures is not None:
                out.append(self._set(STATEMENT_FAILURES, float(row.failures), ts, labels))
            if row.retries is not None:
                out.append(self._set(STATEMENT_RETRIES, float(row.retries), ts, labels))
        return out
