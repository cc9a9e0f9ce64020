"""go-ycsb v1.0.3 (PingCAP's Go port of YCSB, ``go-ycsb load|run postgresql|mysql -P WORKLOAD``) on PostgreSQL
and MySQL/MariaDB: cumulative reports on stdout every ``--interval``, lines without a time (the wrapper
records their arrival), every property it was given printed back at the start (a password hidden by
``output_redactor``), an exit code 0 after a bad flag."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from benchwatch.loadgens import ArgvFacts, LoadGenerator, OutputModel, fatal_line, output_events
from benchwatch.loadgens.goycsb import args as goycsb_args
from benchwatch.loadgens.goycsb import output as gy
from benchwatch.util import gobinary

# The module version Go records in the binary (go version -m): go-ycsb's own when it was built as a
# dependency (scripts/install-deps does), "(devel)" when built inside its source tree.
_MODULE = gobinary.module_pattern("github.com/pingcap/go-ycsb", ("mod", "dep"))
_PROPERTY = re.compile(rb'^"([^"]*)"="(.*)"$')
_FAILING = ("usage", "panic", "connect", "forced")


def _redact(line: bytes) -> bytes:
    """go-ycsb's echo of a property whose value is a password: ``"mysql.password"="*****"``."""
    m = _PROPERTY.match(line.rstrip(b"\r"))
    if m and goycsb_args.secret_property(m.group(1).decode("utf-8", "replace")):
        return b'"' + m.group(1) + b'"="' + goycsb_args.REDACTED.encode() + b'"' + (b"\r" if line.endswith(b"\r") else b"")
    return line


class Goycsb(LoadGenerator):
    name = "goycsb"
    title = "go-ycsb"
    programs = frozenset({"go-ycsb"})
    progress_stream = "stdout"
    progress_option = "--interval"
    version_argv = ("help",)  # it has no version command; this one prints its help and exits 0 at once
    version_key = "goycsb_version"
    clients_flag = "--threads"
    engines = ("postgresql", "mysql")
    series_prefix = "goycsb_"
    progress_clock = "arrival"
    not_work = frozenset({"operationcount", "interval_seconds"})
    run_picker_labels = ("command", "workload", "threads")
    run_picker_format = "go-ycsb $2 $3, $4 threads"
    dashboard_names: ClassVar[Mapping[str, tuple[str, str, str]]] = {
        "mysql": ("benchwatch-goycsb-innodb", "goycsb-innodb.json", "go-ycsb on InnoDB")}
    panels_summary = "operations per second and latency by YCSB operation (READ, UPDATE, INSERT, SCAN, ...), failed operations"
    metrics_doc = """
## go-ycsb runs (benchwatch exporter, `pgbench_runs` collector)

A go-ycsb run (`benchwatch run -- go-ycsb run postgresql -P workloads/workloada ...`, or `mysql`; `load`
likewise; `--interval 1` added when neither `--interval` nor `-p measurement.interval` is given) writes
the tool-neutral series above with `tool="goycsb"`, a transaction being one YCSB operation, so the
TPS-drop and stall alerts, `explain` and the run dashboard serve it as they serve the other tools.
go-ycsb's report lines (`READ   - Takes(s): 10.0, Count: 4980, OPS: 498.1, Avg(us): 1420, ...`, one
per operation type per `--interval`) carry no time: `benchwatch run` records when each arrived
(`arrivals.log`) and a report is one sample of every series at the arrival of its first line. Its
figures are cumulative since each type's first operation: `benchmark_progress_tps` is the difference of
two reports' `TOTAL` counts over the interval, `benchmark_transactions_total` is `TOTAL`'s count, and
`benchmark_progress_latency_seconds` the interval's mean latency from the difference of the reports'
Avg x Count. An interval without operations prints the same lines again: TPS 0. The percentiles can
only be the run's so far (`goycsb_latency_seconds`). `benchmark_result_*` come from the lines after
`Run finished` (`TOTAL`). go-ycsb's own figures are named `goycsb_*`, labelled `op` (`READ`, `UPDATE`,
`INSERT`, `SCAN`, `READ_MODIFY_WRITE`, `DELETE`, `TOTAL`; a failed operation's type without `_ERROR` in
the error series) and, for latencies, `quantile` (`0` is go-ycsb's Min, `1` its Max). go-ycsb exits 0
after a bad flag or command: `benchwatch run` reads its output too, and such a run ends with exit code 1
(meta.json keeps go-ycsb's own code as `tool_exit_code` and the reason as `failure`), as does a run in
which every operation failed. `benchmark_run_info` carries `command`, `db`, `workload` (the `-P` files),
`threads`, `rate_limit_ops` (`--target`), `recordcount`, `operationcount`, `properties` (the other `-p`
that change the work), `interval_seconds`, `database`, `goycsb_version`, `server_version`, `mode`,
`hostname`, and `target` on a MariaDB stack.

| metric | type | meaning |
| --- | --- | --- |

"""

    @property
    def metrics(self) -> Mapping[str, tuple[str, str]]:
        from benchwatch.loadgens.goycsb.model import GOYCSB_METRICS

        return GOYCSB_METRICS

    # -- the command line ----------------------------------------------------------------

    def progress_elapsed(self, line: bytes) -> float | None:
        return None  # its lines carry no time: progress_line and the arrivals instead

    def progress_line(self, line: bytes) -> bool:
        return gy.report_line(line)

    def ensure_progress(self, argv: list[str]) -> tuple[list[str], list[str]]:
        return goycsb_args.ensure_interval(argv)

    def clients_option(self, argv: list[str]) -> str | None:
        parsed = goycsb_args.parse_goycsb_args(argv)
        if "threads" in parsed.flags:
            return "--threads"
        return "-p threadcount" if "threadcount" in parsed.props else None

    def with_clients(self, argv: list[str], clients: int, cores: int) -> list[str]:
        # The flag wins over a threadcount property, wherever that is.
        return [*argv, "--threads", str(clients)]

    def with_option(self, argv: list[str], option: str, value: str) -> list[str]:
        """A flag (``--target``) as given, anything else as a property: ``sweep --arg readproportion=0.5,0.95``."""
        if option.startswith("-"):
            return [*argv, option, value]
        return [*argv, "-p", f"{option}={value}"]

    def init_argvs(self, argv: list[str], scale: int | None) -> list[list[str]]:
        """The same command as ``load``, its table dropped first (``dropdata``): the records re-created."""
        parsed = goycsb_args.parse_goycsb_args(argv)
        if not parsed.runs:
            return []
        i = next(i for i, word in enumerate(argv) if not word.startswith("-") and goycsb_args._find_command(word) == parsed.command)
        return [[*argv[:i], "load", *argv[i + 1:], "-p", "dropdata=true"]]

    def read_argv(self, argv: list[str]) -> ArgvFacts:
        parsed = goycsb_args.parse_goycsb_args(argv)
        labels = {"command": parsed.command or ""}
        work = parsed.work_properties()
        values = (("db", parsed.db), ("workload", ",".join(parsed.workload_files)), ("threads", parsed.threads),
                  ("rate_limit_ops", parsed.target), ("recordcount", parsed.props.get("recordcount")),
                  ("operationcount", parsed.props.get("operationcount")),
                  ("properties", ",".join(f"{k}={v}" for k, v in work.items())),
                  ("interval_seconds", parsed.interval_s if parsed.runs else None),
                  ("database", parsed.props.get("pg.db") or parsed.props.get("mysql.db")))
        for key, value in values:
            if value not in (None, ""):
                labels[key] = f"{value:g}" if isinstance(value, float) else str(value)
        return ArgvFacts(parsed.error, parsed.interval_s if parsed.runs else None, labels, engine=parsed.engine)

    def redact_argv(self, argv: list[str]) -> list[str]:
        return goycsb_args.redact_argv(argv)

    def output_redactor(self, argv: list[str]) -> Callable[[bytes], bytes] | None:
        return _redact

    def locate(self, program: str, env: Mapping[str, str]) -> str | None:
        """A build by hand lands in $GOBIN, $GOPATH/bin or ~/go/bin, seldom on PATH."""
        return gobinary.locate(program, env)

    def parse_version(self, text: str) -> str | None:
        return None  # go-ycsb has no version command (--version: its usage, exit 0): binary_version instead

    def binary_version(self, path: str) -> str | None:
        """The module version Go keeps in the binary (``go version -m``): ``1.0.3``."""
        return gobinary.module_version(path, _MODULE)

    def connect(self, argv: list[str], target: Any, notice: Callable[[str], None]) -> tuple[list[str], Callable[[], None] | None]:
        from benchwatch.loadgens.goycsb.connect import mysql_connection

        args, added = mysql_connection(argv, target)
        if added:
            notice(f"added {' '.join(added)} to the go-ycsb arguments (the stack's MariaDB {target.name}; the password "
                   "stays in that 0600 file, and go-ycsb's echo of it is hidden)")
        return args, None

    def connect_env(self, argv: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
        from benchwatch.loadgens.goycsb.connect import pg_connection

        return pg_connection(argv, env)

    def judge(self, argv: list[str], stdout: bytes, stderr: bytes, exit_code: int) -> str | None:
        return judge(argv, stdout, stderr)

    # -- saved output and the run model ---------------------------------------------------------

    def recognises(self, line: bytes) -> bool:
        return gy.recognises_line(line)

    def run_model(self, run_id: str, meta: Mapping[str, Any], info_labels: dict[str, str]):
        from benchwatch.loadgens.goycsb.model import GoycsbRunModel

        return GoycsbRunModel(run_id, info_labels=info_labels, interval_s=meta.get("progress_interval"),
                              start_epoch=meta.get("clock_start_epoch"))

    def output_model(self, lines: Sequence[bytes], run_id: str, start_epoch: float | None,
                     labels: Mapping[str, str]) -> OutputModel:
        from benchwatch.loadgens.goycsb.model import GoycsbRunModel

        model = GoycsbRunModel(run_id, info_labels={"command": "run", **labels}, start_epoch=start_epoch)
        return OutputModel(model, GoycsbRunModel.saved_output_end(lines, run_id, 10.0))


def judge(argv: list[str], stdout: bytes, stderr: bytes) -> str | None:
    """Why a go-ycsb run that exited 0 failed, from its output; None if it did not (or only printed help)."""
    parsed = goycsb_args.parse_goycsb_args(argv)
    if parsed.help and parsed.error is None:
        return None
    events = output_events(gy.GoycsbOutputParser(), stdout, stderr)
    finished = any(isinstance(e, gy.Finished) for e in events)
    signalled = any(isinstance(e, gy.Signal) for e in events)
    results = {e.op: e for e in events if isinstance(e, gy.Summary)}
    fatal = fatal_line(events, gy.Failure, _FAILING)
    if fatal:
        return fatal
    if parsed.error:
        return parsed.error
    if not parsed.runs:
        return None
    if not finished:
        return "it never printed Run finished"
    failed = sum(s.count for s in results.values() if s.error)
    if failed and "TOTAL" not in results and not signalled:
        return f"every operation failed ({failed}: {', '.join(sorted(s.op for s in results.values() if s.error))})"
    return None


LOAD_GENERATOR = Goycsb()
