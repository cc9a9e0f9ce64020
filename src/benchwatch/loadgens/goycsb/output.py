"""Pure, line-oriented parser for the console output of go-ycsb v1.0.3 (``go-ycsb load|run DB ...``).

Feed it the lines go-ycsb writes, stdout and stderr alike, one at a time; it returns the events each
line carries. No I/O, no clock, nothing imported from the rest of benchwatch. Read from go-ycsb
v1.0.3's source (cmd/go-ycsb/*.go, pkg/client/*.go, pkg/measurement/*.go, pkg/util/output.go) and
checked against real captures (tests/fixtures/goycsb/: PostgreSQL 15 and MariaDB 10.11).

Formats (v1.0.3, the default ``measurementtype=histogram``, ``outputstyle=plain``)
-------------------------------------------------------------------------------------
* At the start, on stdout, ``Using request distribution 'uniform' a keyrange of [0 999]`` (the core
  workload), then every property it was given (files, ``-p``, and its own ``command``,
  ``dotransactions``, ...), in Go's random map order, **passwords included**::

    ***************** properties *****************
    "recordcount"="1000"
    "pg.password"="..."
    **********************************************

* Every ``--interval`` (``measurement.interval``, default 10 s, whole seconds), one line per
  operation measured so far, sorted by name (``"%-6s - %s\\n"``, the whole report in one write)::

    READ   - Takes(s): 10.0, Count: 4980, OPS: 498.1, Avg(us): 1420, Min(us): 310, Max(us): 40191, 50th(us): 1227, 90th(us): 2207, 95th(us): 2737, 99th(us): 4647, 99.9th(us): 15015, 99.99th(us): 40191

  The figures are **cumulative**: each operation's histogram is made at its first operation and
  never reset, so ``Count`` is every operation of that type since then, ``Takes(s)`` the time
  since then, ``OPS`` = Count / Takes, and the latencies (whole microseconds, an HDR histogram with 3
  significant figures) describe the whole run so far. An interval's own rate is the difference of
  two reports' counts. ``TOTAL`` counts every successful operation; a failed one counts only under
  ``<OP>_ERROR`` (``READ_ERROR``). ``READ_MODIFY_WRITE`` (workload F) is measured beside its READ and
  UPDATE, which ``TOTAL`` already counts. Before the first operation a report prints nothing.
* At the end (``operationcount`` reached, or a signal)::

    **********************************************
    Run finished, takes 5.020631047s
    READ   - Takes(s): 5.0, Count: 2517, OPS: 502.5, ...

  the same lines once more, for the whole run (to stdout, or to ``measurement.output_file``).
* ``load`` prints the same (``INSERT`` and ``TOTAL``), with ``"dotransactions"="false"``.
* A signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT): a blank line and ``Got signal [interrupt] to exit.``,
  then the run stops as at its end: ``Run finished``, the summary, exit code 0. A second signal:
  ``Got signal [interrupt] again to exit.`` and exit 1; ``Wait 10s for closed, force exit`` after 10 s.
* ``operation err: ...`` for each failed operation, only with ``silence=false`` (the default hides them).
* Failures: a bad flag or command prints ``Error: unknown flag: --x`` on stderr and the usage on
  stdout and **exits 0**; a server that refuses the connection: ``create db pg failed dial tcp ...``
  on stderr, exit 1; ``operationcount`` below the thread count: ``totalOpCount(...): 0 should be
  bigger than threadCount: 4`` (no newline), exit 255; Go's ``panic: ...`` (exit 2).

go-ycsb has no version command: the version is the module's, in the binary (``go version -m``).
Latencies are converted to seconds. ``feed`` never raises; a line that looks like a report but
cannot be read is ``Unparsed``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["Current", "Failure", "Figures", "Finished", "GoycsbOutputParser", "Ignored", "Property", "Signal",
           "Summary", "Unparsed", "recognises_line", "report_line"]

PROPERTIES_BEGIN = b"***************** properties *****************"
SEPARATOR = b"**********************************************"
# Latency columns after Avg, in go-ycsb's order, with their quantile (Min as 0, Max as 1).
LATENCIES = (("Min(us)", "0"), ("Max(us)", "1"), ("50th(us)", "0.5"), ("90th(us)", "0.9"), ("95th(us)", "0.95"),
             ("99th(us)", "0.99"), ("99.9th(us)", "0.999"), ("99.99th(us)", "0.9999"))
_FIELDS = ("Takes(s)", "Count", "OPS", "Avg(us)") + tuple(name for name, _ in LATENCIES)
_REPORT = re.compile(rb"^([A-Z][A-Z_]*) *- (Takes\(s\): .*)$")
_NUMBER = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?$")
_PROPERTY = re.compile(rb'^"([^"]*)"="(.*)"$')
_FINISHED = re.compile(rb"^Run finished, takes (\S+)$")
_SIGNAL = re.compile(rb"^Got signal \[([a-z ]+)\] (to exit\.|again to exit\.)$")
_FAILURES = ((re.compile(rb"^Error: (.+)$"), "usage"), (re.compile(rb"^panic: (.+)$"), "panic"),
             (re.compile(rb"^(create (?:db|workload) \S+ failed.*)$"), "connect"),
             (re.compile(rb"^(\S+ is not registered)$"), "usage"),
             (re.compile(rb"^(totalOpCount\(.*should be bigger than threadCount.*)$"), "usage"),
             (re.compile(rb"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (bad property: .*)$"), "usage"),
             (re.compile(rb"^(Wait 10s for closed, force exit)$"), "forced"))


@dataclass(frozen=True, slots=True)
class Figures:
    """One report or summary line; latencies in seconds, cumulative since the operation's first.

    ``op`` is the name as printed (``READ_ERROR``), ``base`` without ``_ERROR``, ``error`` whether it
    counts failed operations. ``quantiles``: (quantile, seconds), Min as "0" and Max as "1"."""

    op: str
    base: str
    error: bool
    takes_s: float
    count: int
    ops: float
    avg_s: float
    quantiles: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class Current(Figures):
    """A line of a periodic report (before ``Run finished``)."""


@dataclass(frozen=True, slots=True)
class Summary(Figures):
    """A line of the summary after ``Run finished``."""


@dataclass(frozen=True, slots=True)
class Property:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class Finished:
    took_s: float | None  # Go's duration string read, None if unreadable


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    again: bool


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str     # usage, panic, connect, forced
    message: str


@dataclass(frozen=True, slots=True)
class Ignored:
    kind: str


@dataclass(frozen=True, slots=True)
class Unparsed:
    text: str
    reason: str


def report_line(line: bytes) -> bool:
    """Whether a line has the shape of a report or summary line (the wrapper stamps the arrival of each)."""
    return _REPORT.match(line.rstrip(b"\r")) is not None


def recognises_line(line: bytes) -> bool:
    """A line only go-ycsb prints: its properties banner, or a report line with its microsecond columns."""
    line = line.rstrip(b"\r")
    return line == PROPERTIES_BEGIN or (report_line(line) and b", 99.99th(us): " in line)


def _go_duration_s(text: str) -> float | None:
    """Go's Duration.String() (``5.020631047s``, ``1m5.2s``, ``850.5ms``) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([0-9.]+)(h|ms|m|\u00b5s|us|ns|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    try:
        return sum(float(n) * units[u] for n, u in parts)
    except ValueError:
        return None


def _figures(op: str, rest: str) -> tuple[dict[str, float], str | None]:
    values: dict[str, float] = {}
    for part in rest.split(", "):
        name, sep, value = part.partition(": ")
        if not sep or name not in _FIELDS:
            return values, f"unknown column {name!r}"
        if not _NUMBER.match(value):
            return values, f"{name} is not a number ({value!r})"
        number = float(value)
        if not math.isfinite(number) or number < 0:
            return values, f"{name} is out of range ({value})"
        values[name] = number
    missing = [f for f in _FIELDS if f not in values]
    if missing:
        return values, f"cut line: no {', '.join(missing)}"
    return values, None


class GoycsbOutputParser:
    """Reads go-ycsb's lines in order; its state: in the properties, before or after ``Run finished``, after a panic."""

    def __init__(self) -> None:
        self.finished = False
        self.in_properties = False
        self.in_trace = False

    def flush(self) -> list[object]:
        return []

    def feed(self, line: bytes) -> list[object]:
        line = line.rstrip(b"\r\n")
        try:
            return self._feed(line)
        except Exception as exc:  # never raise on a line: it is kept in the raw output anyway
            return [Unparsed(line.decode("utf-8", "replace"), f"unreadable: {exc}")]

    def _feed(self, line: bytes) -> list[object]:
        if not line.strip():
            return [Ignored("blank")]
        if line == PROPERTIES_BEGIN:
            self.in_properties = True
            return [Ignored("properties")]
        if line == SEPARATOR:
            self.in_properties = False
            return [Ignored("separator")]
        m = _PROPERTY.match(line)
        if m and self.in_properties:
            return [Property(m.group(1).decode("utf-8", "replace"), m.group(2).decode("utf-8", "replace"))]
        m = _REPORT.match(line)
        if m:
            try:
                op, rest = m.group(1).decode("ascii"), m.group(2).decode("ascii")
            except UnicodeDecodeError:
                return [Unparsed(line.decode("utf-8", "replace"), "not ASCII")]
            values, problem = _figures(op, rest)
            if problem:
                return [Unparsed(line.decode(), problem)]
            error = op.endswith("_ERROR")
            figures = Summary if self.finished else Current
            return [figures(op, op.removesuffix("_ERROR") if error else op, error, values["Takes(s)"], int(values["Count"]),
                         values["OPS"], values["Avg(us)"] / 1e6,
                         tuple((q, values[name] / 1e6) for name, q in LATENCIES))]
        m = _FINISHED.match(line)
        if m:
            self.finished = True
            return [Finished(_go_duration_s(m.group(1).decode("ascii", "replace")))]
        m = _SIGNAL.match(line)
        if m:
            return [Signal(m.group(1).decode(), m.group(2).startswith(b"again"))]
        if line.startswith(b"Using request distribution "):  # the core workload's key range, before the properties
            return [Ignored("workload")]
        if line.startswith(b"operation err: "):
            return [Ignored("operation_error")]
        for pattern, kind in _FAILURES:
            m = pattern.match(line)
            if m:
                self.in_trace = self.in_trace or kind == "panic"  # its goroutine trace follows
                return [Failure(kind, m.group(1).decode("utf-8", "replace"))]
        if self.in_trace:
            return [Ignored("trace")]
        # cobra's usage (a bad flag: its run usage on stderr, the root's on stdout), indented lines included.
        if line.startswith((b"Usage:", b"Flags:", b"Global Flags:", b"Available Commands:", b"Use \"go-ycsb", b"  ")):
            return [Ignored("usage")]
        return [Unparsed(line.decode("utf-8", "replace"), "not a go-ycsb line benchwatch knows")]
