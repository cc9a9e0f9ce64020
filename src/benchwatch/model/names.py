"""Run series names across versions.

Series every load generator writes carry tool-neutral names (``benchmark_*``)
and a ``tool`` label; only what one tool alone prints keeps its tool's prefix
(``pgbench_statement_latency_seconds``). Until issue 19 every run series was named
``pgbench_*``, for sysbench runs too: runs stored that way still open, because
whatever reads a recorded run from Prometheus (dashboards, snapshot, compare,
explain) reads the old name beside the new one, through this module. Live
evaluation (recording rules, alerts) reads the new names only: a run that is
live now was written by this version.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "benchmark_"
LEGACY_PREFIX = "pgbench_"

_NEUTRAL = """progress_tps progress_latency_seconds progress_interval_seconds progress_last_line_timestamp_seconds
progress_lines_total progress_stalled transactions_total aborted_clients_total running exit_code run_info
run_start_timestamp_seconds
progress_qps progress_latency_quantile_seconds progress_threads queries_total errors_total reconnects_total
latency_seconds_bucket latency_seconds_sum latency_seconds_count
dip_info dip_leading_cause_info""".split()

# The name a series had before issue 19 -> its name now.
RENAMED: dict[str, str] = {LEGACY_PREFIX + n: PREFIX + n for n in _NEUTRAL}
RENAMED["pgbench_exporter_unparsed_lines_total"] = PREFIX + "unparsed_lines_total"
# The figures a tool prints at the end: "result", since promtool reads "summary" as the metric type.
RENAMED.update({f"{LEGACY_PREFIX}summary_{n}": f"{PREFIX}result_{n}" for n in (
    "tps", "latency_seconds", "transactions", "qps", "latency_quantile_seconds", "latency_min_seconds",
    "latency_max_seconds", "latency_histogram_events")})
LEGACY: dict[str, str] = {new: old for old, new in RENAMED.items()}

# Every series of one run, as recorded by any version: for {__name__=~...,run_id="..."}.
RUN_SERIES_NAMES = f"({PREFIX[:-1]}|{LEGACY_PREFIX[:-1]})_.*"


def current(name: str) -> str:
    """The name a series has now (a stored run's old name mapped to it)."""
    return RENAMED.get(name, name)


def either(name: str, matchers: str = "") -> str:
    """PromQL for a run series under its name now or the name stored runs have: ``(new{m} or old{m})``.

    ``or`` matches on the labels without the metric name, so a run recorded under both (it
    cannot be) would show once. Only for instant and range selections of recorded runs."""
    braces = f"{{{matchers}}}" if matchers else ""
    old = LEGACY.get(name)
    return f"({name}{braces} or {old}{braces})" if old else f"{name}{braces}"


def select(name: str, matchers: str = "") -> str:
    """A selector of a run series under its name now or the name stored runs have, usable where a range
    vector is needed too: ``{__name__=~"new|old", matchers}``; a plain selector for a name never renamed."""
    old = LEGACY.get(name)
    if old is None:
        return f"{name}{{{matchers}}}" if matchers else name
    return f'{{__name__=~"{name}|{old}"' + (f", {matchers}" if matchers else "") + "}"


def renamed(series: Iterable) -> list:
    """Series (anything with a ``name``) with stored runs' old names replaced by the names of now."""
    out = []
    for s in series:
        new = RENAMED.get(s.name)
        if new is not None:
            s.name = new
        out.append(s)
    return out
