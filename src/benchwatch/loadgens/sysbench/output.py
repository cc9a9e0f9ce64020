"""Pure, line-oriented parser for the console output of ``sysbench`` (OLTP Lua tests).

Feed it the lines sysbench writes (stdout; stderr holds nothing in a normal
run) one at a time; it returns the events each line carries. No I/O, no clock.

Formats understood:

* sysbench 1.0 progress lines (``--report-interval=N``), one per interval::

    [ 1s ] thds: 2 tps: 465.97 qps: 9342.44 (r/w/o: 6542.60/1865.89/933.94) lat (ms,95%): 18.28 err/s: 0.00 reconn/s: 0.00

  ``lat (ms,P%)`` is the P-th percentile (``--percentile``, 95 by default) of
  the interval's latencies; ``--percentile=0`` prints ``lat (ms,0%): 0.00``,
  which is read as no latency. During a table lock sysbench keeps printing
  ``tps: 0.00`` lines. Every figure is a per-second rate over the interval.
  Under ``--rate`` a second line ``[ 1s ] queue length: 0, concurrency: 1``
  follows each progress line (``Queue`` event).
* sysbench 0.5 progress lines::

    [  10s] threads: 8, tps: 1021.93, reads: 14306.98, writes: 4087.72, response time: 12.35ms (95%), errors: 0.00, reconnects:  0.00

  (early 0.5 builds wrote ``reads/s:``/``writes/s:``, no comma before ``response time`` and no
  errors/reconnects: ``[  10s] threads: 64, tps: 5285.34, reads/s: 74050.07, writes/s: 21144.26
  response time: 95.50ms (99%)``, and ``[1000s]`` once the elapsed time has four digits;
  0.5 has no "other" queries).
* sysbench 0.4 prints no progress line; its summary is 0.5's with ``Test execution summary:`` and a
  ``per-request statistics:`` block (min/avg/max/``approx.  95 percentile``) for the latencies.
* the header (``Number of threads``, ``Report intermediate results every``),
  the end summary of 1.0 (``SQL statistics``, ``General statistics``,
  ``Latency (ms)``, ``Threads fairness``) and of 0.5 (``OLTP test statistics``,
  ``response time:`` block), as ``Summary`` events in seconds;
* the ``--histogram`` table (``HistogramBucket`` per row, value in seconds);
* ``FATAL:``/``WARNING:``/``ALERT:`` lines (``ErrorLine``).

Known harmless lines give ``Ignored(kind)``; anything else, including cut or
malformed lines and lines that are not UTF-8, gives ``Unparsed(text)``.
``feed`` never raises. Latencies are converted from milliseconds to seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["ErrorLine", "HistogramBucket", "Ignored", "Progress", "Queue", "Summary",
           "SysbenchOutputParser", "Unparsed"]


@dataclass(frozen=True, slots=True)
class Progress:
    """One progress line; every rate is per second over the interval it ends.

    ``qps`` is the total (1.0), or reads + writes (0.5, which prints no total);
    ``other_qps`` is None in 0.5. ``latency_s`` is the ``percentile``-th
    percentile of the interval's latencies (None with ``--percentile=0``).
    ``errors_ps``/``reconnects_ps`` are None where the line has none (early 0.5).
    """

    time_s: float
    threads: int
    tps: float
    qps: float
    read_qps: float
    write_qps: float
    other_qps: float | None
    latency_s: float | None
    percentile: float | None
    errors_ps: float | None
    reconnects_ps: float | None
    version: str  # "1.0" or "0.5": the line's format


@dataclass(frozen=True, slots=True)
class Queue:
    """``[ 1s ] queue length: N, concurrency: M`` (under ``--rate``)."""

    time_s: float
    queue_length: int
    concurrency: int


@dataclass(frozen=True, slots=True)
class Summary:
    """One fact of the header or the end summary.

    Keys: ``sysbench_version``, ``threads``, ``report_interval_s``,
    ``rate_limit_tps``, ``queries_read``, ``queries_write``, ``queries_other``,
    ``queries_total``, ``transactions``, ``tps``, ``queries``, ``qps``,
    ``read_write_requests``, ``other_operations`` (0.5), ``ignored_errors``,
    ``reconnects``, ``total_time_s``, ``events``, ``event_execution_time_s``
    (0.5), ``latency_min_s``, ``latency_avg_s``, ``latency_max_s``,
    ``latency_percentile_s`` with ``percentile``, ``latency_sum_s``,
    ``events_per_thread_avg``, ``events_per_thread_stddev``,
    ``execution_time_per_thread_avg_s``, ``execution_time_per_thread_stddev_s``.
    """

    key: str
    value: float | int | str


@dataclass(frozen=True, slots=True)
class HistogramBucket:
    """A row of the ``--histogram`` table: ``count`` events of about ``value_s`` latency."""

    value_s: float
    count: int


@dataclass(frozen=True, slots=True)
class ErrorLine:
    severity: str  # FATAL, ALERT, WARNING
    message: str


@dataclass(frozen=True, slots=True)
class Ignored:
    kind: str


@dataclass(frozen=True, slots=True)
class Unparsed:
    text: str


Event = Progress | Queue | Summary | HistogramBucket | ErrorLine | Ignored | Unparsed

_F = r"(-?(?:\d+(?:\.\d+)?|nan|inf))"  # %4.2f of a double, nan/inf included
_TIME10 = r"^\[ *(\d+(?:\.\d+)?)s \] "
_TIME05 = r"^\[ *(\d+(?:\.\d+)?)s\] "

_PROGRESS10 = re.compile(
    _TIME10 + r"thds: (\d+) tps: " + _F + r" qps: " + _F + r" \(r/w/o: " + _F + "/" + _F + "/" + _F
    + r"\) lat \(ms,(\d+(?:\.\d+)?)%\): " + _F + r" err/s: " + _F + r" reconn/s: " + _F + r"$")
_QUEUE = re.compile(r"^\[ *(\d+(?:\.\d+)?)s ?\] queue length: (\d+), concurrency: (\d+)$")
_PROGRESS05 = re.compile(
    _TIME05 + r"threads: (\d+), tps: " + _F + r", reads(?:/s)?: " + _F + r", writes(?:/s)?: " + _F
    + r",? response time: " + _F + r" ?ms \((\d+(?:\.\d+)?)%\)"
    + r"(?:, errors(?:/s)?: +" + _F + r", reconnects(?:/s)?: +" + _F + r")?$")

_VERSION = re.compile(r"^sysbench (\d+\.\d+(?:\.\d+)?)\b")
_ERROR = re.compile(r"^(FATAL|ALERT|WARNING): ?(.*)$")
_HIST_ROW = re.compile(r"^ *(\d+(?:\.\d+)?) \|\**\s+(\d+)$")
# "name:   N  (X per sec.)" of the SQL statistics.
_PER_SEC = re.compile(r"^ *(transactions|queries|ignored errors|reconnects|read/write requests|other operations"
                      r"|deadlocks):"
                      r" +(\d+) +\((\d+(?:\.\d+)?) per sec\.\)$")
_KV = re.compile(r"^ *([A-Za-z0-9][A-Za-z0-9 ./()-]*?): +(\S.*?) *$")
_MS = re.compile(r"^(\d+(?:\.\d+)?)(ms)?$")
_PERCENTILE_KEY = re.compile(r"^(?:approx\. +)?(\d+(?:\.\d+)?)(?:th|st|nd|rd)? percentile$")
_AVG_STDDEV = re.compile(r"^(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)$")

# Lines sysbench prints that carry nothing for the curve.
_IGNORED = (
    (re.compile(r"^\s*$"), "blank"),
    (re.compile(r"^Running the test with following options:$"), "header"),
    (re.compile(r"^Initializing (random number generator|worker threads).*$"), "header"),
    (re.compile(r"^Random number generator seed is .*$"), "header"),
    (re.compile(r"^Threads started!$"), "header"),
    (re.compile(r"^(Done|Prepare|Cleaning up|Creating|Inserting|Dropping|Creating a secondary index)\b.*$"), "prepare"),
    (re.compile(r"^\s*(SQL statistics|OLTP test statistics|General statistics|Latency \(ms\)|Threads fairness"
                r"|Test execution summary|queries performed|response time|per-request statistics):$", re.I), "section"),
    (re.compile(r"^ *percentile stats: +disabled$"), "summary"),
    (re.compile(r"^ *value +-+ distribution -+ count$"), "histogram"),
    (re.compile(r"^Latency histogram \(values are in milliseconds\)$"), "histogram"),
    (re.compile(r"^(Additional options|Using .* (generator|mode)|Doing .* test|Number of .* (records|tables)).*$"), "header"),
    # 0.4's header and end chatter
    (re.compile(r"^(No DB drivers specified, using \w+|Running (simple|complex|nontrx) OLTP test|Using \w+ distribution"
                r"|Skipping BEGIN/COMMIT|Using auto_inc on the id column|Using .* to \w+ locks.*"
                r"|Time limit exceeded, exiting\.\.\.|\(last message repeated \d+ times\))$"), "header"),
)

# "key:" in the summary -> Summary key; values in ms become seconds where the key ends in _s.
_SUMMARY_KEYS = {
    "read": "queries_read", "write": "queries_write", "other": "queries_other", "total": "queries_total",
    "total time": "total_time_s", "total number of events": "events",
    "total time taken by event execution": "event_execution_time_s",
    "min": "latency_min_s", "avg": "latency_avg_s", "max": "latency_max_s", "sum": "latency_sum_s",
}
_PER_SEC_KEYS = {
    "transactions": ("transactions", "tps"), "queries": ("queries", "qps"),
    "ignored errors": ("ignored_errors", None), "reconnects": ("reconnects", None),
    "read/write requests": ("read_write_requests", None), "other operations": ("other_operations", None),
    "deadlocks": ("deadlocks", None),  # 0.4, 0.5
}


def _num(text: str) -> float:
    return float(text)  # float() reads nan, -nan, inf


def _ms(text: str) -> float:
    return _num(text) / 1000.0


class SysbenchOutputParser:
    """Stateless but for the section it is in (the summary's key: value lines mean different things)."""

    def __init__(self) -> None:
        self.section = ""

    def feed(self, line: bytes | str) -> list[Event]:
        try:
            return self._feed(line)
        except Exception:  # never fatal: a line we fail on is a line we did not understand
            return [Unparsed(line.decode("utf-8", "replace") if isinstance(line, bytes) else line)]

    def flush(self) -> list[Event]:
        return []

    def _feed(self, line: bytes | str) -> list[Event]:
        if isinstance(line, bytes):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                return [Unparsed(line.decode("utf-8", "replace"))]
        else:
            text = line
        text = text.rstrip("\r\n")
        m = _PROGRESS10.match(text)
        if m:
            g = m.groups()
            percentile = float(g[7])
            return [Progress(time_s=float(g[0]), threads=int(g[1]), tps=_num(g[2]), qps=_num(g[3]),
                             read_qps=_num(g[4]), write_qps=_num(g[5]), other_qps=_num(g[6]),
                             latency_s=_ms(g[8]) if percentile > 0 else None,
                             percentile=percentile if percentile > 0 else None,
                             errors_ps=_num(g[9]), reconnects_ps=_num(g[10]), version="1.0")]
        m = _PROGRESS05.match(text)
        if m:
            g = m.groups()
            reads, writes = _num(g[3]), _num(g[4])
            return [Progress(time_s=float(g[0]), threads=int(g[1]), tps=_num(g[2]), qps=reads + writes,
                             read_qps=reads, write_qps=writes, other_qps=None, latency_s=_ms(g[5]),
                             percentile=float(g[6]),
                             errors_ps=_num(g[7]) if g[7] is not None else None,
                             reconnects_ps=_num(g[8]) if g[8] is not None else None, version="0.5")]
        m = _QUEUE.match(text)
        if m:
            return [Queue(float(m.group(1)), int(m.group(2)), int(m.group(3)))]
        if text.startswith("["):
            return [Unparsed(text)]  # a cut or unknown progress line: counted, never guessed
        m = _ERROR.match(text)
        if m:
            return [ErrorLine(m.group(1), m.group(2))]
        m = _VERSION.match(text)
        if m:
            return [Summary("sysbench_version", m.group(1))]
        m = re.match(r"^Number of threads: (\d+)$", text)
        if m:
            return [Summary("threads", int(m.group(1)))]
        m = re.match(r"^Report intermediate results every (\d+(?:\.\d+)?) second\(s\)$", text)
        if m:
            return [Summary("report_interval_s", float(m.group(1)))]
        m = re.match(r"^Target transaction rate: (\d+(?:\.\d+)?)/sec$", text)
        if m:
            return [Summary("rate_limit_tps", float(m.group(1)))]
        m = _HIST_ROW.match(text)
        if m and self.section == "histogram":
            return [HistogramBucket(_ms(m.group(1)), int(m.group(2)))]
        for pattern, kind in _IGNORED:
            if pattern.match(text):
                self._enter(text, kind)
                return [Ignored(kind)]
        return self._summary(text)

    def _enter(self, text: str, kind: str) -> None:
        if kind == "histogram":
            self.section = "histogram"
        elif kind == "section":
            name = text.strip().rstrip(":").lower()
            self.section = "latency" if name in ("latency (ms)", "response time", "per-request statistics") else name

    def _summary(self, text: str) -> list[Event]:
        m = _PER_SEC.match(text)
        if m:
            count_key, rate_key = _PER_SEC_KEYS[m.group(1)]
            out: list[Event] = [Summary(count_key, int(m.group(2)))]
            if rate_key:
                out.append(Summary(rate_key, float(m.group(3))))
            return out
        m = _KV.match(text)
        if not m:
            return [Unparsed(text)]
        key, value = m.group(1).strip(), m.group(2).strip()
        pm = _PERCENTILE_KEY.match(key)
        if pm and self.section == "latency":
            vm = _MS.match(value)
            if not vm:
                return [Unparsed(text)]
            return [Summary("percentile", float(pm.group(1))), Summary("latency_percentile_s", _ms(vm.group(1)))]
        am = _AVG_STDDEV.match(value)
        if am and key in ("events (avg/stddev)", "execution time (avg/stddev)"):
            if key.startswith("events"):
                return [Summary("events_per_thread_avg", float(am.group(1))),
                        Summary("events_per_thread_stddev", float(am.group(2)))]
            return [Summary("execution_time_per_thread_avg_s", float(am.group(1))),
                    Summary("execution_time_per_thread_stddev_s", float(am.group(2)))]
        name = _SUMMARY_KEYS.get(key)
        if name is None:
            return [Unparsed(text)]
        if name.startswith("latency_"):
            if self.section != "latency":
                return [Unparsed(text)]
            vm = _MS.match(value)
            return [Summary(name, _ms(vm.group(1)))] if vm else [Unparsed(text)]
        if name.endswith("_s"):  # "5.0024s"
            vm = re.fullmatch(r"(\d+(?:\.\d+)?)s?", value)  # 0.4 prints the event execution time without s
            return [Summary(name, float(vm.group(1)))] if vm else [Unparsed(text)]
        if not re.fullmatch(r"\d+", value):
            return [Unparsed(text)]
        return [Summary(name, int(value))]


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
