"""Pure, line-oriented parser for the console output of go-tpc's TPC-C workload (``go-tpc tpcc ...``).

Feed it the lines go-tpc writes, one at a time, stdout and stderr alike; it
returns the events each line carries. No I/O, no clock, nothing imported from
the rest of benchwatch. Read from go-tpc v1.0.7's source (cmd/go-tpc/*.go,
tpcc/workload.go, pkg/measurement/*.go) and checked against real captures
(tests/fixtures/gotpc/, go-tpc v1.0.7 on MariaDB 10.11).

Streams
-------
Everything go-tpc prints itself goes to **stdout** (``fmt.Printf``/``Println``,
unbuffered, one write per call): the reports, the summary, tpmC, the
prepare/check/cleanup steps, the ``execute ... failed`` error lines, the
signal messages, ``Finished`` and the version. **stderr** gets only what is not
go-tpc's own printing: cobra's ``Error: ...`` line and usage (a bad flag, an
unknown command, a bad flag value), Go's ``panic: ...`` with its goroutine
trace (a failed connection, ``--interval 0``), and the MySQL driver's log
lines (``[mysql] 2026/11/25 18:07:12 packets.go:36: unexpected EOF`` when a
connection is killed or cut at the end of a run).

Formats (v1.0.7)
----------------
* Interval report, every ``--interval`` (default 10s), one line per
  transaction type that finished at least one transaction in the interval,
  sorted by type name (``sort.Strings`` on ``delivery``, ``new_order``,
  ``new_order_ERR``, ... then upper-cased; ``"%s%-6s - %s\\n"``)::

    [Current] NEW_ORDER - Takes(s): 1.0, Count: 185, TPM: 11387.9, Sum(ms): 1101.1, Avg(ms): 6.0, 50th(ms): 5.8, 90th(ms): 8.9, 95th(ms): 10.0, 99th(ms): 12.1, 99.9th(ms): 14.2, Max(ms): 14.2

  Every figure is ``%.1f`` but Count (``%d``). The figures count from the
  moment the type's histogram was created, i.e. its **first transaction in
  the interval** (or the first of its ``_ERR`` twin: both are made together),
  to the moment of printing: ``Takes(s)`` is that span, ``TPM`` is
  ``Count / Takes * 60``, so a type whose first transaction came late in the
  interval shows a short Takes and a TPM above ``Count / interval * 60``.
  Latencies are milliseconds from an HDR histogram (1 significant figure,
  1 ms..``--max-measure-latency`` (16s), values clamped into that range;
  ``Sum`` and ``Avg`` are the raw sum and the histogram mean). A type with no
  transaction in the interval prints no line; an interval with none at all
  (a full stall) prints nothing: a stall is *missing* lines, never zeros.
* ``[Current] NEW_ORDER_ERR - ...`` (same shape) counts the transactions of
  that type that returned an error in the interval. At the end of every run
  (``--time`` elapsed, or a signal) the transactions in flight fail with the
  cancelled context and are counted in ``*_ERR`` of the summary without any
  error line: one per thread at most.
* ``--wait`` (keying and thinking time) adds, after each report group,
  ``[Current] KEYINGTIME-NEW_ORDER - 15.8s`` / ``THINKINGTIME-...`` lines
  (the mean wait in seconds, ``%.1fs``), and the same in the summary.
* At the end: ``Finished``, then one ``[Summary]`` line per type (figures
  since the type's first transaction of the run, same shape as ``[Current]``)
  and, if any NEW_ORDER committed, ``tpmC: 12667.6, efficiency: 98504.2%``:
  tpmC is NEW_ORDER's summary TPM (read again a moment later, so it can
  differ from the summary line in the last digit), efficiency is
  ``100 * tpmC / (12.86 * warehouses)``.
* Errors in a run: ``[2026-11-25 18:06:44] execute run failed, err exec
  UPDATE district SET ... failed Error 1205: Lock wait timeout exceeded; ...``
  for each failed transaction (local time, ``--silence`` hides them). Without
  ``--ignore-error`` the thread then stops, printing ``execute run failed, err
  ...`` again without the time; when every thread stopped the run ends early
  (``Finished`` and the summary still follow, exit code 0). The message is the
  driver's error and may hold the SQL text with its newlines: the lines after
  it that match nothing are ``ErrorContinuation``.
* prepare: ``creating table warehouse`` (9 tables), ``load to item``, ``load
  to warehouse in warehouse 1``, ``load to customer in warehouse 1 district
  1``, ..., ``exec statement error: ..., may try again later...`` on a
  retried batch, then the consistency check (all 12 conditions, in random
  order) ``begin to check warehouse 1 at condition 3.3.2.5``, ``check prepare
  failed, err ...``; then ``Finished`` (no summary). check: the same ``begin
  to check`` lines (11 conditions, 12 with ``--check-all``) and ``Finished``;
  a failed check prints ``execute check failed, err check warehouse 1 at
  condition 3.3.2.x failed ...``. cleanup: ``DROP TABLE IF EXISTS item`` (9
  tables) and ``Finished``.
* Signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT): a blank line and ``Got signal
  [interrupt] to exit.`` (``terminated``, ``hangup``, ``quit``), then the run
  stops as at ``--time``: ``Finished``, summary, tpmC, exit code 0. A second
  signal prints (blank line) ``Got signal [interrupt] again to exit.`` and
  exits 1; if the threads take more than 10 s to stop (``--wait`` sleeps are
  not interrupted), (blank line) ``Wait 10s for closed, force exit``, exit 1,
  no summary.
* A server that is not there, or a wrong password: go-tpc swallows the
  driver's error and panics on stderr with ``panic: failed to connect to
  database when loading data`` and a goroutine trace, exit code 2. Both cases
  print the same thing; the password is never printed.
* ``version``: ``Git Commit Hash: none`` / ``UTC Build Time: unknown`` /
  ``Release version: dev`` for a ``go install`` build (the release version
  is only set by ``-ldflags``; the module version is in ``go version -m``).

Known harmless lines (blank, usage, panic trace) give ``Ignored(kind)``;
anything else, including cut or malformed report lines, non-finite figures
(Go's ``NaN``/``+Inf``) and lines that are not UTF-8, gives ``Unparsed(text,
reason)``. ``feed`` never raises. Latencies are converted to seconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Current", "ErrorContinuation", "ErrorLine", "Finished", "ForcedExit", "GotpcOutputParser", "Ignored",
           "Report", "Signal", "Step", "Summary", "TpmC", "Unparsed", "VersionInfo", "VersionLine", "WaitTime",
           "is_gotpc_output", "parse_version", "read_version", "recognises_line"]


@dataclass(frozen=True, slots=True)
class Report:
    """The figures of one ``[Current]`` or ``[Summary]`` line; latencies in seconds.

    ``op`` is the name as printed (``NEW_ORDER_ERR``), ``txn`` the type
    without ``_ERR``, ``error`` whether the line counts failed transactions.
    ``takes_s`` is the time since the type's first transaction of the
    interval (``[Current]``) or of the run (``[Summary]``); ``tpm`` is
    ``count / takes_s * 60`` as go-tpc computed it.
    """

    op: str
    txn: str
    error: bool
    takes_s: float
    count: int
    tpm: float
    sum_s: float
    avg_s: float
    p50_s: float
    p90_s: float
    p95_s: float
    p99_s: float
    p999_s: float
    max_s: float


@dataclass(frozen=True, slots=True)
class Current(Report):
    """A ``[Current]`` line. ``tick`` numbers the report groups (1, 2, ...): a
    new group starts when a line's type does not sort after the previous
    line's (go-tpc prints each group sorted). A best guess: two one-line
    groups in sorted order (``PAYMENT`` then ``STOCK_LEVEL``) read as one, and
    an interval that printed nothing is not counted."""

    tick: int


@dataclass(frozen=True, slots=True)
class Summary(Report):
    """A ``[Summary]`` line at the end of the run."""


@dataclass(frozen=True, slots=True)
class WaitTime:
    """``--wait``: ``[Current] KEYINGTIME-NEW_ORDER - 15.8s``, the mean keying or thinking time."""

    summary: bool
    kind: str  # "keying" or "thinking"
    txn: str
    avg_s: float
    tick: int | None  # as Current.tick; None in the summary


@dataclass(frozen=True, slots=True)
class TpmC:
    """``tpmC: 12667.6, efficiency: 98504.2%`` (efficiency in percent of 12.86 tpmC per warehouse)."""

    tpmc: float
    efficiency_pct: float


@dataclass(frozen=True, slots=True)
class Step:
    """A prepare/check/cleanup progress line.

    ``action``: ``create_table``, ``load``, ``check``, ``drop_table``, ``skip_check``.
    """

    action: str
    table: str | None = None
    warehouse: int | None = None
    district: int | None = None
    condition: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """An error or warning line.

    ``kind``: ``txn_error`` (``[time] execute run failed, err ...``: one
    failed transaction), ``worker_stopped`` (``execute run failed, err ...``:
    the thread gave up; ``execute check failed, err ...``: a failed check,
    ``action`` says which), ``check_failed``
    (``check prepare failed``), ``retry`` (``exec statement error``, a
    warning), ``init_failed``, ``connect``, ``file_error``, ``panic``,
    ``fatal`` (Go runtime), ``usage`` (cobra's ``Error:``), ``driver`` (the
    MySQL driver's ``[mysql]`` log, a warning). ``time`` is as printed
    (local time, no zone), ``source`` the driver's ``file.go:NN``.
    """

    kind: str
    message: str
    severity: str = "error"  # or "warning"
    action: str | None = None
    time: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class ErrorContinuation:
    """A line of a multi-line error message (the SQL text of a failed statement), after its ErrorLine."""

    text: str


@dataclass(frozen=True, slots=True)
class Signal:
    """``Got signal [interrupt] to exit.`` (``again``: the second signal, go-tpc exits 1 at once)."""

    name: str
    again: bool


@dataclass(frozen=True, slots=True)
class ForcedExit:
    """``Wait 10s for closed, force exit``: the threads did not stop within 10 s of a signal; exit 1, no summary."""


@dataclass(frozen=True, slots=True)
class Finished:
    """``Finished``: the workers are done; the summary follows (``detail`` for ch's ``Finished: N OLTP workers, ...``)."""

    detail: str = ""


@dataclass(frozen=True, slots=True)
class VersionLine:
    """A line of ``go-tpc version``: key ``git_commit``, ``build_time`` or ``release``."""

    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Ignored:
    kind: str  # blank, usage, traceback


@dataclass(frozen=True, slots=True)
class Unparsed:
    text: str
    reason: str


Event = (Current | Summary | WaitTime | TpmC | Step | ErrorLine | ErrorContinuation | Signal | ForcedExit | Finished
         | VersionLine | Ignored | Unparsed)

# %.1f of a float64 (always one decimal: a line cut inside its last figure does not match), NaN/+Inf/-Inf included.
_F = r"([-+]?(?:\d+\.\d|NaN|Inf))"
_D = r"(-?\d+)"
_REPORT = re.compile(
    r"^\[(Current|Summary)\] (\S+?) +- Takes\(s\): " + _F + r", Count: " + _D + r", TPM: " + _F
    + r", Sum\(ms\): " + _F + r", Avg\(ms\): " + _F + r", 50th\(ms\): " + _F + r", 90th\(ms\): " + _F
    + r", 95th\(ms\): " + _F + r", 99th\(ms\): " + _F + r", 99\.9th\(ms\): " + _F + r", Max\(ms\): " + _F + r"$")
_WAIT = re.compile(r"^\[(Current|Summary)\] (KEYINGTIME|THINKINGTIME)-(\S+?) +- " + _F + r"s$")
_TPMC = re.compile(r"^tpmC: " + _F + r", efficiency: " + _F + r"%$")
_TXN_ERROR = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] execute (\S+) failed, err (.*)$")
_WORKER_STOPPED = re.compile(r"^execute (\S+) failed, err (.*)$")
_DRIVER = re.compile(r"^\[mysql\] (\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?:(\S+?:\d+): )?(.*)$")
_SIGNAL = re.compile(r"^Got signal \[(.+)\] (again )?to exit\.$")
_FINISHED = re.compile(r"^Finished(?:: (.*))?$")
_VERSION = re.compile(r"^(Git Commit Hash|UTC Build Time|Release version):(?: (.*))?$")
_VERSION_KEYS = {"Git Commit Hash": "git_commit", "UTC Build Time": "build_time", "Release version": "release"}

# (pattern, kind, severity, whether the message may go on over the next lines)
_ERRORS = (
    (re.compile(r"^check prepare failed, err (.*)$"), "check_failed", "error", True),
    (re.compile(r"^exec statement error: (.*?)(?:, may try again later\.\.\.)?$"), "retry", "warning", True),
    (re.compile(r"^Failed to init (?:tp )?work loader: (.*)$"), "init_failed", "error", True),
    (re.compile(r"^(cannot connect to the database)$"), "connect", "error", False),
    (re.compile(r"^(Output Directory cannot be empty when generating files)"), "usage", "error", False),
    (re.compile(r"^(failed to create file .*)$"), "file_error", "error", False),
)
_STEPS = (
    (re.compile(r"^creating table (\S+)$"), "create_table"),
    (re.compile(r"^load to (\S+)(?: in warehouse (\d+)(?: district (\d+))?)?$"), "load"),
    (re.compile(r"^begin to check warehouse (\d+) at condition (\S+)$"), "check"),
    (re.compile(r"^DROP TABLE IF EXISTS (\S+)$"), "drop_table"),
    (re.compile(r"^Skip preparing checking\. Please load CSV data into database and check later\.$"), "skip_check"),
)
# cobra's help and usage text (after "Error: ...", or for a command without a Run such as ``go-tpc tpcc``).
_USAGE_START = re.compile(r"^(Usage:|Benchmark database with different workloads)$")
_USAGE_LINE = re.compile(r"^Run '.*--help' for usage\.$")


def _num(text: str) -> float:
    return float(text)  # float() reads NaN, +Inf, -Inf as Go prints them


def _ms(text: str) -> float:
    return _num(text) / 1000.0


def _go_key(op: str, wait_kind: str | None = None) -> tuple[int, str]:
    """The key go-tpc sorted a printed name by (the lower-case map key, ``_ERR`` kept upper-case)."""
    if wait_kind is not None:
        return 1, ("keyingTime-" if wait_kind == "keying" else "thinkingTime-") + op.lower()
    if op.endswith("_ERR"):
        return 0, op[:-4].lower() + "_ERR"
    return 0, op.lower()


class GotpcOutputParser:
    """Keeps only what the next line's meaning depends on: the report group (tick), whether an error
    message may go on, and whether a usage text or a panic trace is being printed."""

    def __init__(self) -> None:
        self.tick = 0
        self._last_key: tuple[int, str] | None = None
        self._mode = ""            # "", "usage", "traceback"
        self._error_open = False   # the previous line was an error whose message may go on

    def feed(self, line: bytes | str) -> list[Event]:
        try:
            return self._feed(line)
        except Exception as exc:  # never fatal: a line we fail on is a line we did not understand
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
            return [Unparsed(text.rstrip("\r\n"), f"parser error: {type(exc).__name__}")]

    def flush(self) -> list[Event]:
        self._error_open = False
        return []

    def _feed(self, line: bytes | str) -> list[Event]:
        if isinstance(line, bytes):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                self._error_open = False
                return [Unparsed(line.decode("utf-8", "replace").rstrip("\r\n"), "not UTF-8")]
        else:
            text = line
        text = text.rstrip("\r\n")
        error_open, self._error_open = self._error_open, False

        if text.startswith(("[Current]", "[Summary]")):
            return [self._report(text)]
        m = _TPMC.match(text)
        if m:
            tpmc, efc = _num(m.group(1)), _num(m.group(2))
            if not (math.isfinite(tpmc) and math.isfinite(efc)):
                return [Unparsed(text, "non-finite figure")]
            return [TpmC(tpmc, efc)]
        if self._mode == "traceback":
            return [Ignored("traceback")]
        if not text.strip():
            return [Ignored("usage" if self._mode == "usage" else "blank")]

        m = _TXN_ERROR.match(text)
        if m:
            self._error_open = True
            return [ErrorLine("txn_error", m.group(3), action=m.group(2), time=m.group(1))]
        m = _WORKER_STOPPED.match(text)
        if m:
            self._error_open = True
            return [ErrorLine("worker_stopped", m.group(2), action=m.group(1))]
        m = _DRIVER.match(text)
        if m:
            return [ErrorLine("driver", m.group(3), severity="warning", time=m.group(1), source=m.group(2))]
        for pattern, kind, severity, goes_on in _ERRORS:
            m = pattern.match(text)
            if m:
                self._error_open = goes_on
                return [ErrorLine(kind, m.group(1), severity=severity)]
        if text.startswith(("panic: ", "fatal error: ")):
            self._mode = "traceback"
            kind = "panic" if text.startswith("panic") else "fatal"
            return [ErrorLine(kind, text.split(": ", 1)[1])]
        if text.startswith("Error: "):
            self._mode = "usage"
            return [ErrorLine("usage", text[len("Error: "):])]

        m = _SIGNAL.match(text)
        if m:
            return [Signal(m.group(1), bool(m.group(2)))]
        if text == "Wait 10s for closed, force exit":
            return [ForcedExit()]
        m = _FINISHED.match(text)
        if m:
            self._mode = ""
            return [Finished(m.group(1) or "")]
        for pattern, action in _STEPS:
            m = pattern.match(text)
            if m:
                return [self._step(action, m.groups())]
        m = _VERSION.match(text)
        if m:
            return [VersionLine(_VERSION_KEYS[m.group(1)], m.group(2) or "")]
        if _USAGE_START.match(text):
            self._mode = "usage"
            return [Ignored("usage")]
        if self._mode == "usage" or _USAGE_LINE.match(text):
            return [Ignored("usage")]
        if error_open:
            self._error_open = True
            return [ErrorContinuation(text)]
        return [Unparsed(text, "unknown line")]

    def _report(self, text: str) -> Event:
        m = _REPORT.match(text)
        if m:
            g = m.groups()
            values = [_num(v) for v in (g[2], *g[4:])]
            if not all(math.isfinite(v) for v in values):
                return Unparsed(text, "non-finite figure")
            op = g[1]
            error = op.endswith("_ERR")
            txn = op[:-4] if error else op
            takes, count, tpm = _num(g[2]), int(g[3]), _num(g[4])
            sum_s, avg, p50, p90, p95, p99, p999, mx = (_ms(v) for v in g[5:13])
            if g[0] == "Summary":
                return Summary(op, txn, error, takes, count, tpm, sum_s, avg, p50, p90, p95, p99, p999, mx)
            return Current(op, txn, error, takes, count, tpm, sum_s, avg, p50, p90, p95, p99, p999, mx,
                           tick=self._next_tick(_go_key(op)))
        m = _WAIT.match(text)
        if m:
            avg = _num(m.group(4))
            if not math.isfinite(avg):
                return Unparsed(text, "non-finite figure")
            kind = "keying" if m.group(2) == "KEYINGTIME" else "thinking"
            summary = m.group(1) == "Summary"
            tick = None if summary else self._next_tick(_go_key(m.group(3), kind))
            return WaitTime(summary, kind, m.group(3), avg, tick)
        return Unparsed(text, "malformed or truncated report line")

    def _next_tick(self, key: tuple[int, str]) -> int:
        if self._last_key is None or key <= self._last_key:
            self.tick += 1
        self._last_key = key
        return self.tick

    @staticmethod
    def _step(action: str, groups: tuple[str | None, ...]) -> Step:
        if action == "load":
            table, warehouse, district = groups
            return Step("load", table, int(warehouse) if warehouse else None, int(district) if district else None)
        if action == "check":
            return Step("check", warehouse=int(groups[0] or 0), condition=groups[1])
        if action == "skip_check":
            return Step("skip_check")
        return Step(action, table=groups[0])


# -- telling go-tpc's output apart -------------------------------------------------------------

_ONLY_GOTPC = (
    re.compile(r"^\[(?:Current|Summary)\] \S+ +- Takes\(s\): [-+\d.NaInf]+, Count: -?\d+, TPM: "),
    re.compile(r"^\[(?:Current|Summary)\] (?:KEYINGTIME|THINKINGTIME)-\S+ +- "),
    re.compile(r"^tpmC: [-+\d.NaInf]+, efficiency: [-+\d.NaInf]+%$"),
    re.compile(r"^load to (?:item|warehouse in warehouse \d+|\S+ in warehouse \d+ district \d+)$"),
    re.compile(r"^begin to check warehouse \d+ at condition 3\.3\.2\.\d+$"),
    re.compile(r"^panic: failed to connect to database when loading data$"),
)
# A frame of a go-tpc panic trace: "github.com/pingcap/go-tpc/tpcc.NewWorkloader(...)" or its source line
# "\t/root/go/pkg/mod/github.com/pingcap/go-tpc@v1.0.7/tpcc/workload.go:94 +0x63b".
_GOTPC_FRAME = re.compile(r"github\.com/pingcap/go-tpc(?:@[^/\s]+)?/\S*(?:\.go:\d+|\.[\w.*()]+\()")


def _text(line: bytes | str) -> str:
    return (line.decode("utf-8", "replace") if isinstance(line, bytes) else line).rstrip("\r\n")


def recognises_line(line: bytes | str) -> bool:
    """True for a line only go-tpc prints: a TPC-C report or tpmC line, a prepare/check step, its panic."""
    text = _text(line)
    return any(p.match(text) for p in _ONLY_GOTPC) or bool(_GOTPC_FRAME.search(text))


def is_gotpc_output(data: bytes | str | Iterable[bytes | str], max_lines: int | None = None) -> bool:
    """Whether a saved output (whole text or its lines) was printed by go-tpc: a line only go-tpc prints,
    or the three lines of ``go-tpc version``. Reads at most ``max_lines`` lines (all by default)."""
    lines: Iterable[bytes | str]
    if isinstance(data, bytes):
        lines = data.split(b"\n")
    elif isinstance(data, str):
        lines = data.split("\n")
    else:
        lines = data
    version_keys: set[str] = set()
    for i, line in enumerate(lines):
        if max_lines is not None and i >= max_lines:
            break
        text = _text(line)
        if recognises_line(text):
            return True
        m = _VERSION.match(text)
        if m:
            version_keys.add(m.group(1))
            if len(version_keys) == 3:
                return True
    return False


# -- the version -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class VersionInfo:
    """What ``go-tpc version`` prints (``release`` ``dev`` for a ``go install`` build) and, from
    ``go version -m <binary>`` (or the binary's own bytes, where Go keeps that text as is), the module
    version. go-tpc's Makefile swaps the two others: its builds print the date as the commit hash."""

    release: str | None = None
    git_commit: str | None = None
    build_time: str | None = None
    module_version: str | None = None  # "v1.0.7"

    @property
    def version(self) -> str | None:
        """``1.0.7``: the release version when it is one, else the module version; None if neither."""
        for candidate in (self.release, self.module_version):
            if candidate and re.match(r"^v?\d+(?:\.\d+)+", candidate):
                return candidate.removeprefix("v")
        return None


_MODULE = re.compile(r"(?:^|\s)mod\s+github\.com/pingcap/go-tpc\s+(v\S+)")


def read_version(text: bytes | str) -> VersionInfo | None:
    """The version lines of ``go-tpc version`` and/or ``go version -m`` output; None if there are none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _VERSION.match(line.strip())
        if m:
            found.setdefault(_VERSION_KEYS[m.group(1)], (m.group(2) or "").strip())
    m = _MODULE.search(text)
    if m:
        found["module_version"] = m.group(1)
    return VersionInfo(**found) if found else None


def parse_version(text: bytes | str) -> str | None:
    """``1.0.7`` from the output of ``go-tpc version`` (a release build) or ``go version -m go-tpc``;
    None for a ``go install`` build's ``Release version: dev`` alone."""
    info = read_version(text)
    return info.version if info else None
