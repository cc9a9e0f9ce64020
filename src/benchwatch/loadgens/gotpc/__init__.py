"""go-tpc v1.0.7 (PingCAP's TPC-C driver, ``go-tpc tpcc ... run``) on MySQL/MariaDB: reports on stdout every
``--interval``, lines without a time (the wrapper records their arrival), an exit code that says little."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from benchwatch.loadgens import ArgvFacts, LoadGenerator, OutputModel, fatal_line, output_events
from benchwatch.loadgens.gotpc import args as gotpc_args
from benchwatch.loadgens.gotpc import output as gt
from benchwatch.util import gobinary

_MODULE = gobinary.module_pattern("github.com/pingcap/go-tpc")
# Reports go-tpc's stdout; failures it ends with exit code 0 anyway (its Execute() error is ignored).
_FAILING = ("panic", "fatal", "usage", "init_failed", "connect", "check_failed", "file_error")


class Gotpc(LoadGenerator):
    name = "gotpc"
    title = "go-tpc"
    programs = frozenset({"go-tpc"})
    progress_stream = "stdout"
    progress_option = "--interval"
    version_argv = ("version",)
    version_key = "gotpc_version"
    clients_flag = "--threads/-T"
    # Not packaged for Debian; v1.0.7 is the only version the module proxy serves (docs/gotpc.md).
    go_modules = ("github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.7",)
    engines = ("mysql",)
    series_prefix = "gotpc_"
    progress_clock = "arrival"
    run_picker_labels = ("warehouses", "threads")
    run_picker_format = "go-tpc TPC-C, $2 warehouses, $3 threads"
    dashboard_names: ClassVar[Mapping[str, tuple[str, str, str]]] = {
        "mysql": ("benchwatch-gotpc-innodb", "gotpc-innodb.json", "go-tpc TPC-C on InnoDB")}
    panels_summary = "tpmC, transactions per second and p99 latency by TPC-C transaction type, failed transactions"
    metrics_doc = """
## go-tpc runs (benchwatch exporter, `pgbench_runs` collector)

A go-tpc TPC-C run (`benchwatch run -- go-tpc tpcc --warehouses N run ...`, `--interval 1s` added when
not given) writes the tool-neutral series above with `tool="gotpc"`, so the TPS-drop and stall alerts,
`explain` and the run dashboard serve it as they serve pgbench and sysbench. go-tpc's report lines
(`[Current] NEW_ORDER - Takes(s): 1.0, Count: 185, ...`, one per transaction type per `--interval`)
carry no time: `benchwatch run` records when each arrived (`arrivals.log` in the run directory) and a
report is one sample of every series at the arrival of its first line. `benchmark_progress_tps` is the
sum of `Count` over the report's transaction types (failed transactions, `*_ERR`, excluded) divided by
the interval; `benchmark_transactions_total` adds the counts exactly; `benchmark_progress_latency_seconds`
is the mean latency of the report's committed transactions. An interval in which nothing committed
prints nothing: it is a stall (`benchmark_progress_stalled 1`, TPS 0), as for the other tools.
`benchmark_result_tps`, `benchmark_result_transactions` and `benchmark_result_latency_seconds` come
from the `[Summary]` lines. go-tpc's own figures are named `gotpc_*`, labelled `txn` (the transaction
type as go-tpc prints it: `NEW_ORDER`, `PAYMENT`, `ORDER_STATUS`, `DELIVERY`, `STOCK_LEVEL`) and, for
latencies, `quantile` (`1` is go-tpc's Max); rates are per second except tpmC, which TPC-C defines per
minute. go-tpc exits 0 after most failures (a bad flag, a refused connection before its panic is
caught, every thread stopped on an error): `benchwatch run` reads its output too, and a run that
failed that way ends with exit code 1 (`benchmark_exit_code 1`; meta.json keeps go-tpc's own code as
`tool_exit_code` and the reason as `failure`). `benchmark_run_info` carries `command`, `warehouses`,
`threads`, `duration_seconds`, `interval_seconds`, `database`, `gotpc_version` (from the binary's
module version: a `go install` build prints `Release version: dev`), `server_version`, `mode`,
`hostname`, and `target` for `benchwatch run` on a MariaDB stack.

| metric | type | meaning |
| --- | --- | --- |

"""

    @property
    def metrics(self) -> Mapping[str, tuple[str, str]]:
        from benchwatch.loadgens.gotpc.model import GOTPC_METRICS

        return GOTPC_METRICS

    # -- the command line ----------------------------------------------------------------

    def progress_elapsed(self, line: bytes) -> float | None:
        return None  # its lines carry no time: progress_line and the arrivals instead

    def progress_line(self, line: bytes) -> bool:
        from benchwatch.loadgens.gotpc.model import REPORT_PREFIX

        return line.startswith(REPORT_PREFIX)

    def ensure_progress(self, argv: list[str]) -> tuple[list[str], list[str]]:
        return gotpc_args.ensure_interval(argv)

    def clients_option(self, argv: list[str]) -> str | None:
        return "--threads/-T" if "threads" in gotpc_args.parse_gotpc_args(argv).options else None

    def with_clients(self, argv: list[str], clients: int, cores: int) -> list[str]:
        # A persistent flag: cobra reads it after the subcommands too.
        return [*argv, "--threads", str(clients)]

    def with_option(self, argv: list[str], option: str, value: str) -> list[str]:
        return [*argv, option, value]

    def read_argv(self, argv: list[str]) -> ArgvFacts:
        parsed = gotpc_args.parse_gotpc_args(argv)
        labels = {"command": " ".join(parsed.command)}
        for key, value in (("warehouses", parsed.warehouses), ("threads", parsed.threads), ("duration_seconds", parsed.time_s),
                           ("interval_seconds", parsed.interval_s), ("database", parsed.value("db"))):
            if value is not None and parsed.command[:1] in (("tpcc",), ("ch",)):
                labels[key] = f"{value:g}" if isinstance(value, float) else str(value)
        interval = parsed.interval_s if parsed.command[-1:] == ("run",) else None
        return ArgvFacts(parsed.error, interval, labels, engine="mysql")

    def redact_argv(self, argv: list[str]) -> list[str]:
        return gotpc_args.redact_argv(argv)

    def locate(self, program: str, env: Mapping[str, str]) -> str | None:
        """``go install`` puts go-tpc in $GOBIN, else $GOPATH/bin, else ~/go/bin, seldom on PATH."""
        return gobinary.locate(program, env)

    def binary_version(self, path: str) -> str | None:
        """The module version Go keeps in the binary (``go version -m``): ``1.0.7``."""
        return gobinary.module_version(path, _MODULE)

    def parse_version(self, text: str) -> str | None:
        return gt.parse_version(text)

    def connect(self, argv: list[str], target: Any, notice: Callable[[str], None]) -> tuple[list[str], Callable[[], None] | None]:
        from benchwatch.loadgens.gotpc.connect import gotpc_connection

        return gotpc_connection(argv, target, notice)

    def judge(self, argv: list[str], stdout: bytes, stderr: bytes, exit_code: int) -> str | None:
        return judge(argv, stdout, stderr)

    # -- saved output and the run model ---------------------------------------------------------

    def recognises(self, line: bytes) -> bool:
        return gt.recognises_line(line)

    def run_model(self, run_id: str, meta: Mapping[str, Any], info_labels: dict[str, str]):
        from benchwatch.loadgens.gotpc.model import GotpcRunModel

        return GotpcRunModel(run_id, info_labels=info_labels, interval_s=meta.get("progress_interval"),
                             start_epoch=meta.get("clock_start_epoch"))

    def output_model(self, lines: Sequence[bytes], run_id: str, start_epoch: float | None,
                     labels: Mapping[str, str]) -> OutputModel:
        from benchwatch.loadgens.gotpc.model import GotpcRunModel

        model = GotpcRunModel(run_id, info_labels={"script": "tpcc", **labels}, start_epoch=start_epoch)
        # One interval per report: the last report's time is known once a model has read them.
        return OutputModel(model, GotpcRunModel.saved_output_end(lines, run_id, 1.0))


def judge(argv: list[str], stdout: bytes, stderr: bytes) -> str | None:
    """Why a go-tpc action that exited 0 failed, from its output; None if it did not (or only printed help)."""
    parsed = gotpc_args.parse_gotpc_args(argv)
    if parsed.help and parsed.error is None:
        return None
    events = output_events(gt.GotpcOutputParser(), stdout, stderr)
    errors = [e for e in events if isinstance(e, gt.ErrorLine)]
    finished = any(isinstance(e, gt.Finished) for e in events)
    forced = any(isinstance(e, gt.ForcedExit) for e in events)
    signalled = any(isinstance(e, gt.Signal) for e in events)
    fatal = fatal_line(events, gt.ErrorLine, _FAILING)
    if fatal:
        return fatal
    if parsed.error:
        return parsed.error
    if forced:
        return "its threads did not stop within 10 s of a signal (forced exit, no summary)"
    if not parsed.runs or parsed.command[:1] not in (("tpcc",), ("ch",), ("tpch",)):
        return None
    if not finished:
        return "it never printed Finished"
    stopped = [e for e in errors if e.kind == "worker_stopped"]
    if stopped and not signalled:
        return f"{len(stopped)} thread(s) stopped on an error: {stopped[0].message.splitlines()[0][:200]}"
    return None


LOAD_GENERATOR = Gotpc()
