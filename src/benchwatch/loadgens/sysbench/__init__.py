"""sysbench 0.4 to 1.0: progress and summary on stdout (``--report-interval``), on MySQL/MariaDB or,
with ``--db-driver=pgsql``, PostgreSQL."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from benchwatch.loadgens import ArgvFacts, LoadGenerator, OutputModel
from benchwatch.loadgens.sysbench import args as sysbench_args

# 1.0: "[ 1s ] thds: ...", 0.5: "[  10s] threads: ..." (the queue lines of --rate are not progress lines).
_PROGRESS = re.compile(rb"^\[ *([0-9]+(?:\.[0-9]+)?)s ?\] (?:thds|threads):")
_BANNER = re.compile(rb"^sysbench [0-9]+\.[0-9]+")
# --db-driver values and the engine family each reaches.
DRIVERS = {"mysql": "mysql", "pgsql": "postgresql"}


class Sysbench(LoadGenerator):
    name = "sysbench"
    title = "sysbench"
    programs = frozenset({"sysbench"})
    progress_stream = "stdout"
    progress_option = "--report-interval"
    version_key = "sysbench_version"
    clients_flag = "--threads"
    packages = ("sysbench",)
    engines = ("mysql", "postgresql")
    run_picker_labels = ("script", "threads")
    run_picker_format = "sysbench $2, $3 threads"
    dashboard_names: ClassVar[Mapping[str, tuple[str, str, str]]] = {"mysql": ("benchwatch-sysbench-innodb", "sysbench-innodb.json", "sysbench on InnoDB")}
    panels_summary = "queries per second by type, its latency percentile, errors and reconnects"
    metrics_doc = """
## sysbench runs (benchwatch exporter, `pgbench_runs` collector)

A sysbench run (`benchwatch run -- sysbench ...`, or `import` of a saved sysbench 1.0 or 0.5 output)
writes the series above that mean the same for it, under the same names with `tool="sysbench"`, so
the TPS-drop and stall alerts and the run dashboard serve both tools: `benchmark_progress_tps`,
`benchmark_progress_stalled`, `benchmark_progress_interval_seconds` (`--report-interval`),
`benchmark_progress_last_line_timestamp_seconds`, `benchmark_progress_lines_total`,
`benchmark_transactions_total`, `benchmark_running`, `benchmark_exit_code`, `benchmark_run_info`,
`benchmark_run_start_timestamp_seconds`, `benchmark_result_tps`, `benchmark_result_latency_seconds`
(the average), `benchmark_result_transactions` and `benchmark_unparsed_lines_total`.
sysbench prints a latency percentile, not an average, per interval: it has its own name below, with
`quantile` (`0.95` for sysbench's default `--percentile=95`); `benchmark_progress_latency_seconds` stays
pgbench's average. `type` is `read`, `write` or `other` (sysbench 0.5 prints no `other`).
`benchmark_run_info` of a sysbench run carries `script` (the test, e.g. `oltp_read_write`), `command`,
`threads`, `duration_seconds`, `transactions` (`--events`), `rate_limit_tps`, `tables`, `table_size`,
`percentile`, `db_driver`, `database`, `sysbench_version`, `server_version`, `mode`, `hostname`
(each where known), and, for `benchwatch run` on a MariaDB stack, `target` (the instance the run
drives) and, with `--experiment NAME`, `experiment` (runs observed as one, e.g. one per instance).
With `--histogram`, sysbench's latency table (hundreds of rows) is folded at the end of the run onto
the ladder of `benchmark_latency_seconds` as `benchmark_result_latency_histogram_events` (52 series per
run): `histogram_quantile(0.99, benchmark_result_latency_histogram_events{run_id="…"})`.

| metric | type | meaning |
| --- | --- | --- |

"""

    @property
    def metrics(self) -> Mapping[str, tuple[str, str]]:
        from benchwatch.loadgens.sysbench.model import SYSBENCH_METRICS

        return SYSBENCH_METRICS

    def progress_elapsed(self, line: bytes) -> float | None:
        m = _PROGRESS.match(line)
        return float(m.group(1)) if m else None

    def ensure_progress(self, argv: list[str]) -> tuple[list[str], list[str]]:
        return sysbench_args.ensure_progress(argv)

    duration_option = "--time"

    def clients_option(self, argv: list[str]) -> str | None:
        return sysbench_args.threads_option(argv)

    def with_clients(self, argv: list[str], clients: int, cores: int) -> list[str]:
        return [f"--threads={clients}", *argv]

    def with_option(self, argv: list[str], option: str, value: str) -> list[str]:
        return sysbench_args.with_option(argv, option, value)

    def init_argvs(self, argv: list[str], scale: int | None) -> list[list[str]]:
        return sysbench_args.reinit_argvs(argv)

    def read_argv(self, argv: list[str]) -> ArgvFacts:
        parsed = sysbench_args.parse_sysbench_args(argv)
        driver = parsed.options.get("db-driver")
        return ArgvFacts(parsed.error, sysbench_args.progress_interval(parsed), parsed.info_labels(),
                         engine=DRIVERS.get(driver) if driver else None)

    def connect(self, argv: list[str], target: Any, notice: Callable[[str], None]) -> tuple[list[str], Callable[[], None] | None]:
        """sysbench pointed at a MariaDB of the stack through its 0600 --config-file."""
        from benchwatch.loadgens.sysbench.connect import sysbench_connection

        if not os.path.exists(target.sysbench_file):
            return argv, None
        args, added = sysbench_connection(argv, target.sysbench_file)
        if added:
            notice(f"added {' '.join(added)} to the sysbench arguments (the connection to the stack's MariaDB "
                   f"{target.name}; the password stays in that 0600 file)")
        return args, None

    def connect_env(self, argv: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """sysbench's pgsql driver reads no PG* variable (its defaults are localhost:5432, user and database
        sbtest): the stack's server as the --pgsql-* options the argv does not give. No password option:
        with an empty --pgsql-password libpq reads the PGPASSFILE run sets (sysbench 1.0.20, libpq 15)."""
        from benchwatch.loadgens.sysbench.connect import pgsql_connection

        return pgsql_connection(argv, env)

    def recognises(self, line: bytes) -> bool:
        return bool(_PROGRESS.match(line) or _BANNER.match(line))

    def run_model(self, run_id: str, meta: Mapping[str, Any], info_labels: dict[str, str]):
        from benchwatch.loadgens.sysbench.model import SysbenchRunModel

        return SysbenchRunModel(run_id, info_labels=info_labels, interval_s=meta.get("progress_interval"),
                                start_epoch=meta.get("clock_start_epoch"))

    def output_model(self, lines: Sequence[bytes], run_id: str, start_epoch: float | None,
                     labels: Mapping[str, str]) -> OutputModel:
        from benchwatch.loadgens.sysbench import output as sb
        from benchwatch.loadgens.sysbench.model import SysbenchRunModel, info_from_summary

        parser = sb.SysbenchOutputParser()
        summary: dict[str, object] = {}
        last_time = None
        for line in lines:
            if line.startswith(b"["):
                # A report line (progress, queue or cut): the parser reads it without changing its
                # state, and only the last progress line's time is wanted: skip parsing 21,600 of them.
                continue
            for event in parser.feed(line):
                if isinstance(event, sb.Summary):
                    summary[event.key] = event.value
        for line in reversed(lines):
            if line.startswith(b"["):
                last_time = next((e.time_s for e in sb.SysbenchOutputParser().feed(line) if isinstance(e, sb.Progress)), None)
                if last_time is not None:
                    break
        interval = summary.get("report_interval_s")
        model = SysbenchRunModel(run_id, info_labels={**info_from_summary(summary), **labels}, start_epoch=start_epoch,
                                 interval_s=float(interval) if isinstance(interval, float) else None)
        return OutputModel(model, last_time)


LOAD_GENERATOR = Sysbench()
