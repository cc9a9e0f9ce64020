"""pgbench, PostgreSQL's own benchmark: progress on stderr (``-P``), its summary and ``-r`` table on stdout,
a per-transaction log with ``-l``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from benchwatch.loadgens import ArgvFacts, LoadGenerator, OutputModel
from benchwatch.loadgens.pgbench import args as pgbench_args

_PROGRESS = re.compile(rb"^progress: ([0-9]+(?:\.[0-9]+)?) s")
_LOG_SUFFIX = re.compile(r"\.\d+(\.\d+)?")


class Pgbench(LoadGenerator):
    name = "pgbench"
    title = "pgbench"
    programs = frozenset({"pgbench"})
    progress_stream = "stderr"
    progress_option = "-P"
    version_key = "pgbench_version"
    clients_flag = "-c/-j"
    packages = ("postgresql",)  # pgbench is in postgresql-15, the server package, on Debian
    engines = ("postgresql",)
    default = True
    run_picker_labels = ("script", "clients", "scale")
    run_picker_format = "$2, $3 clients, scale $4"
    dashboard_names: ClassVar[Mapping[str, tuple[str, str, str]]] = {"postgresql": ("benchwatch-pgbench-run", "pgbench-run.json", "pgbench run")}
    panels_summary = "statements per second, latency and its percentiles, failures, lag, the -r table"
    metrics_doc = """
## pgbench's own series

Beyond the series every tool writes (above): latency stddev and schedule lag per progress line,
pgbench 15's failed, skipped and retried transactions, statements per transaction, the `-r` table
(`pgbench_statement_*`, with `script` and `statement`) and the summary's stddev and connection time.

### Latency percentiles (pgbench -l)

From pgbench's per-transaction logs, one histogram per run (`run_id`, `le` from 0.1 ms to 10 s), at
1-second steps of transaction time: `histogram_quantile(0.99, sum by (le) (rate(benchmark_latency_seconds_bucket{run_id="…"}[$__rate_interval])))`.
See [latency-percentiles.md](latency-percentiles.md).

| metric | type | meaning |
| --- | --- | --- |
"""

    @property
    def metrics(self) -> Mapping[str, tuple[str, str]]:
        from benchwatch.loadgens.pgbench.model import PGBENCH_METRICS

        return PGBENCH_METRICS

    @property
    def latency_log_metrics(self) -> Mapping[str, tuple[str, str]]:
        from benchwatch.loadgens.pgbench.txlog import TXLOG_METRICS

        return TXLOG_METRICS

    def progress_held_back(self, version: str) -> bool:
        # Before pgbench 10, thread 0 printed the progress of all threads: its clients blocked, nothing came.
        m = re.match(r"(\d+)", version)
        return m is not None and int(m.group(1)) < 10

    def progress_elapsed(self, line: bytes) -> float | None:
        m = _PROGRESS.match(line)
        return float(m.group(1)) if m else None

    def ensure_progress(self, argv: list[str]) -> tuple[list[str], list[str]]:
        args, added = pgbench_args.ensure_progress(argv)
        return args, (["-P", "1"] if added else [])

    duration_option = "-T"

    def clients_option(self, argv: list[str]) -> str | None:
        return pgbench_args.clients_option(argv)

    def with_clients(self, argv: list[str], clients: int, cores: int) -> list[str]:
        return pgbench_args.insert_options(argv, ["-c", str(clients), "-j", str(max(1, min(clients, cores)))])

    def with_option(self, argv: list[str], option: str, value: str) -> list[str]:
        return pgbench_args.insert_options(argv, [option, value])

    def init_argvs(self, argv: list[str], scale: int | None) -> list[list[str]]:
        return [pgbench_args.init_argv(argv, scale)]

    def read_argv(self, argv: list[str]) -> ArgvFacts:
        parsed = pgbench_args.parse_pgbench_args(argv)
        return ArgvFacts(parsed.error, parsed.progress_interval, parsed.info_labels(),
                         pgbench_args.sql_statements_per_transaction(parsed))

    def latency_log(self, argv: list[str], default_prefix: str, add: bool) -> tuple[list[str], str | None, list[str]]:
        """With -l (or when asked to add it), pgbench's per-transaction logs go where the exporter reads them."""
        parsed = pgbench_args.parse_pgbench_args(argv)
        said: list[str] = []
        if parsed.error:
            return argv, None, said  # pgbench will refuse this argv; adding to it would only confuse
        if "log" not in parsed.flags:
            if not add:
                return argv, None, said
            argv = pgbench_args.insert_options(argv, ["-l"])
            said.append("-l")
        prefix = parsed.last("log-prefix")
        if prefix is None:
            prefix = default_prefix
            argv = pgbench_args.insert_options(argv, [f"--log-prefix={prefix}"])
            said.append(f"--log-prefix={prefix}")
        return argv, os.path.abspath(prefix), said

    def latency_log_reader(self, run_id: str):
        from benchwatch.loadgens.pgbench.txlog import TxlogAggregator

        return TxlogAggregator(run_id)

    def latency_log_file(self, base: str, name: str) -> bool:
        """pgbench names thread 0's log <prefix>.<pid> and thread n's <prefix>.<pid>.<n> (9.4 to 17)."""
        return name.startswith(base + ".") and _LOG_SUFFIX.fullmatch(name[len(base):]) is not None

    def run_model(self, run_id: str, meta: Mapping[str, Any], info_labels: dict[str, str]):
        from benchwatch.loadgens.pgbench.model import PgbenchRunModel

        return PgbenchRunModel(run_id, info_labels=info_labels, interval_s=meta.get("progress_interval"),
                               start_epoch=meta.get("clock_start_epoch"),
                               sql_statements=meta.get("sql_statements_per_transaction"))

    def output_model(self, lines: Sequence[bytes], run_id: str, start_epoch: float | None,
                     labels: Mapping[str, str]) -> OutputModel:
        from benchwatch.loadgens.pgbench.model import PgbenchRunModel
        from benchwatch.loadgens.pgbench.saved import info_from_summary, read_events

        summary, scripts, last_time = read_events(lines)
        model = PgbenchRunModel(run_id, info_labels={**info_from_summary(summary, scripts), **labels},
                                start_epoch=start_epoch,
                                sql_statements=summary.get("_sql_statements"))  # type: ignore[arg-type]
        return OutputModel(model, last_time)


LOAD_GENERATOR = Pgbench()
