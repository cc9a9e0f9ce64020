"""Pure, line-oriented parser for the console output of ``pgbench``.

Feed it the lines pgbench writes (stdout, stderr, or both merged) one at a
time; it returns the events each line carries.  The module does no I/O and
never reads a clock: all it knows is the text it is given.

Formats understood (learnt from ``pgbench.c`` of each release, see the notes
below and ``tests/fixtures/pgbench/README.md``):

* progress lines (``-P``), on stderr:

  - 9.4:      ``progress: 5.0 s, 1185.2 tps, lat 13.498 ms stddev 2.124``
              plus ``, lag 0.123 ms`` under ``-R``;
  - 9.5-14:   the same, plus ``, 12 skipped`` under ``-R`` with ``-L``;
  - 15+:      ``..., lat 1.206 ms stddev 0.478, 0 failed`` then the optional
              ``, lag X ms``, ``, N skipped`` and, when ``--max-tries`` is not
              1, ``, N retried, N retries``.

  The time is ``%.1f s`` of elapsed time since the benchmark started or, with
  ``--progress-timestamp`` (9.6+), a Unix epoch with millisecond precision:
  ``%.03f s`` of the instr_time clock (gettimeofday) in 9.6, ``%ld.%03ld s``
  from gettimeofday() in 10-13 and ``%.3f s`` of ``now + epoch_shift`` in
  14+; all read like ``1795370176.604 s``.  A value above 1e8 is taken as
  absolute (``Progress.absolute``).

  Every counter on a progress line is a per-interval delta: pgbench prints
  ``cur.skipped - last.skipped`` (read in the 9.6-development, 10, 12, 15 and
  master sources; 9.5 introduced the field) and, since 15, the differences of
  the failure, retried and retry totals between two reports.  No version
  prints a running total, so no extra flag is needed.  ``tps`` and the
  latencies describe the interval too.
  When an interval completed no transaction, pgbench 9.4-10 compute 0/0 and
  print ``lat -nan ms stddev -nan`` (and ``lag -nan ms``); those become
  ``math.nan`` here.  12+ test for it and print ``0.000``.  9.4 also catches
  up after a stall with a burst of lines carrying the same elapsed time (the
  first covering the whole stall, the next ones empty): they are passed
  through as they are, the consumer decides what to do.
  The fork-emulation form ``progress 3: ...`` (9.4 built without threads,
  one line per thread) is reported as ``Ignored("progress_per_thread")``.
  The form ``progress: 5.0 s, 1185.2 tps, 13.498 ms lat`` could not be
  confirmed in any pgbench.c (9.3 has no -P; the 9.4 tree already prints
  ``lat X ms stddev Y``); it is accepted anyway, with ``stddev_s=None``.

* the header/summary on stdout (``Summary`` events), including both
  ``latency average: X ms`` (9.4/9.5, and 9.6 without -P/-R/-L) and
  ``latency average = X ms`` (9.6+), the pre-14 ``tps = ... (including
  connections establishing)``/``(excluding connections establishing)`` pair
  and the 14+ ``(without initial connection time)`` /
  ``(including reconnection times)`` forms;
* per-script sections (``SQL script N: ...``, 9.6+) and the ``-r`` statement
  latency tables of every version, with or without the failure/retry columns
  of 15+;
* client aborts, ``Run was aborted ...`` and error lines of every version.

Conventions:

* all latencies are converted from milliseconds to seconds;
* harmless known lines (blank lines, ``starting vacuum...end.``, the
  ``pgbench -i`` chatter, NOTICE lines, ...) produce ``Ignored(kind)`` rather
  than an empty list, so that a caller can tell "understood and irrelevant"
  from "not understood" (``Unparsed``);
* a ``SQL script N: <name>`` line returns ``[]``: its ``ScriptHeader`` is
  emitted with the next line, the `` - weight: W`` line pgbench prints with
  it (``flush()`` releases it at end of input if that line never came);
* anything else, including truncated or malformed lines and lines that are
  not valid UTF-8, gives ``Unparsed(text)``; only a line cut exactly at a
  field boundary can pass for a complete one;
* ``feed`` never raises.

``rate_limit_tps`` and ``sampling_rate`` are never printed by pgbench 9.4-17
(the -R rate and --sampling-rate only show up indirectly), so those keys are
never emitted by this parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "ClientAborted",
    "ErrorLine",
    "Event",
    "Ignored",
    "PgbenchOutputParser",
    "Progress",
    "RunAborted",
    "ScriptHeader",
    "ScriptStat",
    "ScriptSummary",
    "StatementLatency",
    "Summary",
    "Unparsed",
]


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``progress:`` line.

    ``time_s`` is the elapsed time since the start of the benchmark, or, when
    ``absolute`` is true (``--progress-timestamp``), a Unix epoch timestamp.
    ``tps``, the latencies and the four counters all describe the interval
    since the previous progress line (pgbench prints deltas, never running
    totals).  A field the line does not carry is ``None``: ``lag_s`` without
    ``-R``, ``skipped`` without ``-R``+``-L``, ``failed`` before 15,
    ``retried``/``retries`` unless ``--max-tries`` is not 1 (15+).  A latency
    pgbench printed as ``nan``/``-nan`` (interval without transactions,
    before 12) is ``math.nan``.
    """

    time_s: float
    absolute: bool
    tps: float
    latency_s: float | None
    stddev_s: float | None
    lag_s: float | None
    failed: int | None
    skipped: int | None
    retried: int | None
    retries: int | None


@dataclass(frozen=True, slots=True)
class Summary:
    """One fact of the run header or end-of-run summary.

    Keys emitted (values in seconds where the key ends in ``_s``):
    ``pgbench_version``, ``server_version``, ``transaction_type``,
    ``scaling_factor``, ``partition_method``, ``partitions``, ``query_mode``,
    ``clients``, ``threads``, ``max_tries``, ``duration_s``,
    ``transactions_per_client``, ``transactions_processed``,
    ``transactions_planned``, ``failed_transactions``,
    ``serialization_failures``, ``deadlock_failures``, ``other_failures``,
    ``retried_transactions``, ``total_retries``, ``skipped_transactions``,
    ``latency_limit_s``, ``late_transactions``, ``latency_avg_s``,
    ``latency_avg_includes_failures`` (1, only when pgbench says so),
    ``latency_stddev_s``, ``lag_avg_s``, ``lag_max_s``,
    ``initial_connection_time_s``, ``average_connection_time_s``,
    ``tps_including_connections``, ``tps_excluding_connections``, ``tps``,
    ``random_seed``.

    ``tps`` is the figure a user quotes: the "excluding connections
    establishing" one before 14, the "without initial connection time" one in
    14+, the "including reconnection times" one under ``-C`` in 14+.
    """

    key: str
    value: float | int | str


@dataclass(frozen=True, slots=True)
class ScriptHeader:
    """``SQL script N: <name>`` (9.6+, several scripts); ``index`` is N
    (1-based, as printed) and ``weight`` the following ``- weight: W`` line
    (10+; ``None`` when pgbench printed no weight)."""

    index: int
    name: str
    weight: int | None


@dataclass(frozen=True, slots=True)
class ScriptSummary:
    """`` - N transactions (x% of total, tps = y)`` of script ``index``.

    ``tps`` is ``None`` for the newer form that prints it on a separate
    ``- number of transactions actually processed: N (tps = y)`` line (that
    line yields ``ScriptStat`` events ``transactions_processed`` and ``tps``).
    """

    index: int
    transactions: int
    percent_of_total: float
    tps: float | None


@dataclass(frozen=True, slots=True)
class ScriptStat:
    """Any other `` - key: value`` line of a script section, keyed like
    ``Summary`` (``failed_transactions``, ``skipped_transactions``,
    ``latency_avg_s``, ...).  ``index`` is 0 for the single-script
    ``script statistics:`` section of pgbench 10."""

    index: int
    key: str
    value: float | int | str


@dataclass(frozen=True, slots=True)
class StatementLatency:
    """One row of the ``-r`` table.  ``script_index`` is the number of the
    enclosing ``SQL script N`` (or ``file N`` in 9.4/9.5) section, 0 when
    there is a single script.  ``failures``/``retries`` are ``None`` when the
    table has no such column (before 15; retries only when --max-tries != 1).
    """

    script_index: int
    latency_s: float
    failures: int | None
    retries: int | None
    statement: str


@dataclass(frozen=True, slots=True)
class ClientAborted:
    """A ``client N ... aborted ...`` line of any version; ``message`` is the
    whole line without any ``pgbench: error:`` style prefix."""

    client: int
    message: str


@dataclass(frozen=True, slots=True)
class RunAborted:
    """``Run was aborted; the above results are incomplete.``"""

    message: str


@dataclass(frozen=True, slots=True)
class ErrorLine:
    """An error line (``pgbench: error: ...``, ``pgbench: fatal: ...``,
    ``ERROR: ...``, ...).  ``continuation`` is true for the detail lines
    (``CONTEXT:``, ``DETAIL:``, ``pgbench: detail:``, indented libpq text)
    that follow an error or an abort."""

    message: str
    continuation: bool = False


@dataclass(frozen=True, slots=True)
class Ignored:
    """A line that was recognised and carries nothing of interest."""

    kind: str


@dataclass(frozen=True, slots=True)
class Unparsed:
    """A line that was not understood (malformed, truncated, not UTF-8...)."""

    text: str


Event = (
    Progress
    | Summary
    | ScriptHeader
    | ScriptSummary
    | ScriptStat
    | StatementLatency
    | ClientAborted
    | RunAborted
    | ErrorLine
    | Ignored
    | Unparsed
)


# --------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------

# A printf'd double: digits, or what C libraries / PostgreSQL's own snprintf
# (12+) print for non-finite values.
_NUM = r"[-+]?(?:\d+(?:\.\d+)?|nan|NaN|inf|Infinity)"
_NAN = r"-?(?:nan|NaN)"

# The hot path.  Fixed printf precisions (%.1f time or %.3f epoch, %.1f tps,
# %.3f latencies) so that a line cut inside a number does not parse.
_PROGRESS_RE = re.compile(
    r"progress: (\d+\.\d|\d+\.\d{3}) s, (\d+\.\d|" + _NAN + r"|inf|Infinity) tps, "
    r"lat (\d+\.\d{3}|" + _NAN + r"|inf|Infinity) ms stddev (\d+\.\d{3}|" + _NAN + r"|inf|Infinity)"
    r"(?:, (\d+) failed)?"
    r"(?:, lag (\d+\.\d{3}|" + _NAN + r"|inf|Infinity) ms)?"
    r"(?:, (\d+) skipped)?"
    r"(?:, (\d+) retried, (\d+) retries)?"
)
# "X ms lat" form: not found in any pgbench.c read, accepted leniently.
_PROGRESS_OLD_RE = re.compile(
    r"progress: (\d+\.\d) s, (\d+\.\d|" + _NAN + r") tps, (\d+\.\d{3}|" + _NAN + r") ms lat"
    r"(?:, lag (\d+\.\d{3}|" + _NAN + r") ms)?"
)
_PROGRESS_THREAD_RE = re.compile(r"progress \d+: \d+\.\d s, .* tps, ")

_BANNER_RE = re.compile(
    r"pgbench \((\d+(?:\.\d+)*(?:devel|(?:alpha|beta|rc)\d*)?)"
    r"(?: \([^()]*\))?"
    r"(?:, server (\d+(?:\.\d+)*(?:devel|(?:alpha|beta|rc)\d*)?)(?: \([^()]*\))?)?\)"
)
_VERSION_RE = re.compile(r"pgbench \(PostgreSQL\) (\d+(?:\.\d+)*(?:devel|(?:alpha|beta|rc)\d*)?)(?: .*)?")

_PCT = r" \((?:" + _NUM + r") ?%\)"  # " (4.557%)", " (4.557 %)" (9.5-13), " (NaN%)"

# Summary lines (also used, after stripping " - ", for per-script lines):
# pattern, then (key, group number, converter) for each fact it yields; a
# fact whose group did not participate in the match is left out.


def _ms(text: str) -> float:
    return float(text) / 1000.0


def _flag(_text: str) -> int:
    return 1


_Fact = tuple[str, int, Callable[[str], "float | int | str"]]

_SUMMARY_PATTERNS: tuple[tuple[re.Pattern[str], tuple[_Fact, ...]], ...] = tuple(
    (re.compile(pattern), facts)
    for pattern, facts in (
        (r"transaction type: (.+)", (("transaction_type", 1, str),)),
        (r"scaling factor: (\d+)", (("scaling_factor", 1, int),)),
        (r"partition method: (\S+)", (("partition_method", 1, str),)),
        (r"partitions: (\d+)", (("partitions", 1, int),)),
        (r"query mode: (\S+)", (("query_mode", 1, str),)),
        (r"number of clients: (\d+)", (("clients", 1, int),)),
        (r"number of threads: (\d+)", (("threads", 1, int),)),
        (r"maximum number of tries: (\d+)", (("max_tries", 1, int),)),
        (r"duration: (\d+) s", (("duration_s", 1, int),)),
        (r"number of transactions per client: (\d+)", (("transactions_per_client", 1, int),)),
        (
            r"number of transactions actually processed: (\d+)(?:/(\d+))?",
            (("transactions_processed", 1, int), ("transactions_planned", 2, int)),
        ),
        (r"number of failed transactions: (\d+)" + _PCT, (("failed_transactions", 1, int),)),
        (r"number of serialization failures: (\d+)" + _PCT, (("serialization_failures", 1, int),)),
        (r"number of deadlock failures: (\d+)" + _PCT, (("deadlock_failures", 1, int),)),
        (r"number of other failures: (\d+)" + _PCT, (("other_failures", 1, int),)),
        (r"number of transactions retried: (\d+)" + _PCT, (("retried_transactions", 1, int),)),
        (r"total number of retries: (\d+)", (("total_retries", 1, int),)),
        (r"number of transactions skipped: (\d+)" + _PCT, (("skipped_transactions", 1, int),)),
        (
            r"number of transactions above the (" + _NUM + r") ms latency limit: (\d+)(?:/\d+)?" + _PCT,
            (("latency_limit_s", 1, _ms), ("late_transactions", 2, int)),
        ),
        (
            r"latency average(?::| =) (" + _NUM + r") ms( \(including failures\))?",
            (("latency_avg_s", 1, _ms), ("latency_avg_includes_failures", 2, _flag)),
        ),
        (r"latency stddev(?::| =) (" + _NUM + r") ms", (("latency_stddev_s", 1, _ms),)),
        (
            r"rate limit schedule lag: avg (" + _NUM + r") \(max (" + _NUM + r")\) ms",
            (("lag_avg_s", 1, _ms), ("lag_max_s", 2, _ms)),
        ),
        (r"initial connection time = (" + _NUM + r") ms", (("initial_connection_time_s", 1, _ms),)),
        (r"average connection time = (" + _NUM + r") ms", (("average_connection_time_s", 1, _ms),)),
        (
            r"tps = (" + _NUM + r") \(including connections establishing\)",
            (("tps_including_connections", 1, float),),
        ),
        (
            r"tps = (" + _NUM + r") \(excluding connections establishing\)",
            (("tps_excluding_connections", 1, float), ("tps", 1, float)),
        ),
        (r"tps = (" + _NUM + r") \(without initial connection time\)", (("tps", 1, float),)),
        (r"tps = (" + _NUM + r") \(including reconnection times\)", (("tps", 1, float),)),
        (r"setting random seed to (\d+)", (("random_seed", 1, int),)),
    )
)

_SCRIPT_HEADER_RE = re.compile(r"SQL script (\d+): (.*)")
_SCRIPT_WEIGHT_RE = re.compile(r" - weight: (\d+) \(targets " + _NUM + r"% of total\)")
_SCRIPT_TX_RE = re.compile(
    r" - (\d+) transactions \((" + _NUM + r")% of total(?:, tps = (" + _NUM + r"))?\)"
)
_SCRIPT_PROCESSED_RE = re.compile(
    r" - number of transactions actually processed: (\d+) \(tps = (" + _NUM + r")\)"
)
_TABLE_HEADER_RE = re.compile(
    r"(?: - )?statement latencies in milliseconds"
    r"(?:, file (\d+)|( and failures)|(, failures and retries))?:"
)

_LOG_PREFIX_RE = re.compile(r"pgbench: (?:(error|fatal|warning|detail|hint|info|debug|log): )?")
_CLIENT_ABORT_RE = re.compile(r"[Cc]lient (\d+) (?:script \d+ )?aborted\b")
_SERVER_MSG_RE = re.compile(
    r"(ERROR|FATAL|PANIC|WARNING|NOTICE|INFO|LOG|DEBUG|DETAIL|HINT|CONTEXT|QUERY|STATEMENT|LOCATION"
    r"|LINE \d+):\s"
)
_INIT_RE = re.compile(
    r"(?:dropping old tables\.\.\.|creating tables\.\.\.|creating tables \(with primary keys\)\.\.\."
    r"|generating data(?: \((?:client|server)-side\))?\.\.\.|vacuuming\.\.\.|vacuum\.\.\."
    r"|creating primary keys\.\.\.|set primary keys\.\.\.|creating foreign keys\.\.\."
    r"|set foreign keys\.\.\.|done\.|done in \d+\.\d+ s.*"
    r"|\d+ of \d+ tuples \(\d+%\) (?:done|of pgbench_accounts done).*)"
)

# A client abort whose prefix other threads' writes cut into (pgbench writes each message in pieces).
_GARBLED_ABORT_RE = re.compile(r"\s*(?:pgbench: ?|error: ?)+(?<![^ :])([Cc]lient (\d+) (?:script \d+ )?aborted\b.*)")
# Harmless lines around a run: libpq's password prompt, 9.3-9.6's note on -s with a built-in script.
_HARMLESS_RE = re.compile(r"Password(?: for user \S+)?: ?|Scale option ignored, using \w+ table count = \d+")

_DETAIL_SEVERITIES = frozenset(("DETAIL", "HINT", "CONTEXT", "QUERY", "STATEMENT", "LOCATION"))
_ERRORISH = (ClientAborted, ErrorLine, RunAborted)


# --------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------


def _ms_or_none(text: str | None) -> float | None:
    return None if text is None else _ms(text)


def _count(text: str | None) -> int | None:
    return None if text is None else int(text)


def _progress(t: str, tps: str, lat: str, sd: str | None, lag: str | None, failed: str | None = None,
              skipped: str | None = None, retried: str | None = None, retries: str | None = None) -> Progress:
    """A progress line's fields as matched, milliseconds converted to seconds."""
    time_s = float(t)
    return Progress(time_s, time_s > 1e8, float(tps), _ms(lat), _ms_or_none(sd), _ms_or_none(lag),
                    _count(failed), _count(skipped), _count(retried), _count(retries))


def _progress_from_match(m: re.Match[str]) -> Progress:
    """A modern progress line (_PROGRESS_RE)."""
    t, tps, lat, sd, failed, lag, skipped, retried, retries = m.groups()
    return _progress(t, tps, lat, sd, lag, failed, skipped, retried, retries)


class PgbenchOutputParser:
    """Stateful line parser; one instance per pgbench run (per stream or for
    the merged streams).

    State kept between lines: whether a ``-r`` statement table is being
    printed (and how many count columns it has), the current script number,
    a ``SQL script N:`` header waiting for its ``- weight:`` line, and
    whether the previous line was an error (for its detail lines).
    """

    __slots__ = ("_after_error", "_pending_header", "_script", "_table_cols")

    def __init__(self) -> None:
        self._table_cols: int | None = None  # None: not inside a -r table
        self._script = 0
        self._pending_header: tuple[int, str] | None = None
        self._after_error = False

    # -- public -------------------------------------------------------------

    def feed(self, line: bytes | str) -> list[Event]:
        """Parse one line (with or without its trailing newline)."""
        if isinstance(line, (bytes, bytearray, memoryview)):
            raw = bytes(line)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return [Unparsed(raw.decode("utf-8", errors="replace").rstrip("\r\n"))]
        elif isinstance(line, str):
            text = line
        else:
            return [Unparsed(repr(line))]

        # Hot path: one complete progress line.
        if text.startswith("progress: "):
            m = _PROGRESS_RE.fullmatch(text.rstrip("\r\n"))
            if m is not None and self._pending_header is None:
                self._table_cols = None
                self._after_error = False
                return [_progress_from_match(m)]

        try:
            text = text.rstrip("\n")
            if "\n" in text:  # several lines handed over at once
                events: list[Event] = []
                for part in text.split("\n"):
                    events.extend(self._feed_one(part))
                return events
            return self._feed_one(text)
        except Exception:  # pragma: no cover - safety net, never expected
            self._table_cols = None
            self._pending_header = None
            return [Unparsed(text)]

    def flush(self) -> list[Event]:
        """Events still held back at end of input (a ``SQL script N:`` line
        whose weight line never came).  Optional; ``feed`` alone loses
        nothing for complete pgbench output."""
        pending = self._pending_header
        self._pending_header = None
        if pending is None:
            return []
        return [ScriptHeader(pending[0], pending[1], None)]

    # -- internals ------------------------------------------------------------

    def _feed_one(self, text: str) -> list[Event]:
        if text.endswith("\r"):
            text = text[:-1]
        if "\r" in text:
            # Terminal-style progress (pgbench -i on a tty) overwrites itself
            # with carriage returns: keep the last, complete, rendition.
            parts = [p for p in text.split("\r") if p]
            text = parts[-1] if parts else ""

        pending = self._pending_header
        if pending is not None:
            self._pending_header = None
            m = _SCRIPT_WEIGHT_RE.fullmatch(text)
            if m is not None:
                return [ScriptHeader(pending[0], pending[1], int(m.group(1)))]
            head: list[Event] = [ScriptHeader(pending[0], pending[1], None)]
            head.extend(self._dispatch(text))
            return head
        return self._dispatch(text)

    def _dispatch(self, text: str) -> list[Event]:
        events = self._classify(text)
        if events:
            last = events[-1]
            self._after_error = isinstance(last, _ERRORISH)
        return events

    def _classify(self, text: str) -> list[Event]:
        # Rows of a -r table are indented; anything else ends the table.
        cols = self._table_cols
        if cols is not None:
            if text[:1] in (" ", "\t") and not text.startswith(" - "):
                return [self._statement_row(text, cols)]
            self._table_cols = None

        if not text.strip():
            return [Ignored("blank")]

        if "aborted" in text:
            m = _GARBLED_ABORT_RE.match(text)
            if m is not None:  # threads' writes interleaved: "pgbench: pgbench:pgbench: error: client 114 ... aborted"
                return [ClientAborted(int(m.group(2)), m.group(1))]
        if _HARMLESS_RE.fullmatch(text):
            return [Ignored("notice")]

        first = text[0]

        if first == "p":
            if text.startswith("progress"):
                return [self._progress_slow(text)]
            if text.startswith("pgbench"):
                return self._pgbench_line(text)
        elif first == " ":
            if text.startswith(" - "):
                return self._script_line(text)
        elif first == "S":
            m = _SCRIPT_HEADER_RE.fullmatch(text)
            if m is not None:
                self._script = int(m.group(1))
                self._pending_header = (self._script, m.group(2))
                return []
        elif first == "s":
            m = _TABLE_HEADER_RE.fullmatch(text)
            if m is not None:
                return self._table_header(m)
            if text.startswith("starting vacuum"):
                if "ERROR:" in text:
                    return [ErrorLine(text)]
                return [Ignored("vacuum")]
            if text == "script statistics:":
                self._script = 0
                return [Ignored("script_statistics")]
        elif first in "cC":
            m = _CLIENT_ABORT_RE.match(text)
            if m is not None:
                return [ClientAborted(int(m.group(1)), text)]
        elif first == "R" and text.startswith("Run was aborted"):
            return [RunAborted(text)]
        elif first == "(" and text == "(ignoring this error and continuing anyway)":
            return [Ignored("vacuum")]
        elif first == "e" and text == "end.":  # "starting vacuum..." after errors
            return [Ignored("vacuum")]

        summary = _match_summary(text)
        if summary is not None:
            return [Summary(key, value) for key, value in summary]

        if _INIT_RE.fullmatch(text):
            return [Ignored("init")]

        m = _SERVER_MSG_RE.match(text)
        if m is not None:
            return [self._server_message(m.group(1), text)]

        if text.startswith(("server closed the connection unexpectedly", "connection to server ")):
            return [ErrorLine(text)]
        if self._after_error:
            # Server messages can span lines (a deadlock DETAIL names one
            # process per line, libpq indents its own explanations): what
            # follows an error and is nothing else belongs to it.
            return [ErrorLine(text, continuation=True)]

        return [Unparsed(text)]

    # -- line families --------------------------------------------------------

    def _progress_slow(self, text: str) -> Event:
        m = _PROGRESS_RE.fullmatch(text)
        if m is not None:
            return _progress_from_match(m)
        m = _PROGRESS_OLD_RE.fullmatch(text)
        if m is not None:
            t, tps, lat, lag = m.groups()
            return _progress(t, tps, lat, None, lag)
        if _PROGRESS_THREAD_RE.match(text):
            return Ignored("progress_per_thread")
        return Unparsed(text)

    def _pgbench_line(self, text: str) -> list[Event]:
        m = _BANNER_RE.fullmatch(text)
        if m is not None:
            out: list[Event] = [Summary("pgbench_version", m.group(1))]
            if m.group(2):
                out.append(Summary("server_version", m.group(2)))
            return out
        m = _VERSION_RE.fullmatch(text)
        if m is not None:
            return [Summary("pgbench_version", m.group(1))]
        m = _LOG_PREFIX_RE.match(text)
        if m is None:
            return [Unparsed(text)]
        level = m.group(1)
        body = text[m.end():]
        if not body:
            return [Unparsed(text)]
        am = _CLIENT_ABORT_RE.match(body)
        if am is not None:
            return [ClientAborted(int(am.group(1)), body)]
        if body.startswith("Run was aborted"):
            return [RunAborted(body)]
        if level is None and body.startswith("client "):
            # --verbose-errors (15+), info level: "client N got an error in
            # command ..." then "client N repeats the transaction after the
            # error (try 1/5)" or "client N ends the failed transaction ...".
            return [ErrorLine(body, continuation=" got an error " not in body)]
        if level in ("detail", "hint") or (level is None and self._after_error):
            return [ErrorLine(body, continuation=True)]
        if level in ("error", "fatal"):
            return [ErrorLine(body)]
        if level == "warning":
            return [Ignored("warning")]
        summary = _match_summary(body)
        if summary is not None:
            return [Summary(key, value) for key, value in summary]
        return [Ignored("log_" + (level or "info"))]

    def _script_line(self, text: str) -> list[Event]:
        index = self._script
        m = _SCRIPT_TX_RE.fullmatch(text)
        if m is not None:
            tps = m.group(3)
            return [ScriptSummary(index, int(m.group(1)), float(m.group(2)), None if tps is None else float(tps))]
        m = _TABLE_HEADER_RE.fullmatch(text)
        if m is not None:
            return self._table_header(m)
        m = _SCRIPT_PROCESSED_RE.fullmatch(text)
        if m is not None:
            return [
                ScriptStat(index, "transactions_processed", int(m.group(1))),
                ScriptStat(index, "tps", float(m.group(2))),
            ]
        m = _SCRIPT_WEIGHT_RE.fullmatch(text)
        if m is not None:  # weight line that did not follow its header
            return [ScriptStat(index, "weight", int(m.group(1)))]
        summary = _match_summary(text[3:])
        if summary is not None:
            return [ScriptStat(index, key, value) for key, value in summary]
        return [Unparsed(text)]

    def _table_header(self, m: re.Match[str]) -> list[Event]:
        if m.group(1) is not None:  # 9.4/9.5 "..., file N:" with several -f
            self._script = int(m.group(1))
            self._table_cols = 0
        elif m.group(2) is not None:
            self._table_cols = 1
        elif m.group(3) is not None:
            self._table_cols = 2
        else:
            self._table_cols = 0
        return [Ignored("statement_table_header")]

    def _statement_row(self, text: str, cols: int) -> Event:
        parts = text.split(None, cols + 1)
        if len(parts) != cols + 2:
            return Unparsed(text)
        try:
            latency = float(parts[0])
            failures = int(parts[1]) if cols >= 1 else None
            retries = int(parts[2]) if cols >= 2 else None
        except ValueError:
            return Unparsed(text)
        if not math.isnan(latency) and "." not in parts[0]:
            return Unparsed(text)  # a latency is always printed with decimals
        return StatementLatency(self._script, latency / 1000.0, failures, retries, parts[-1])

    def _server_message(self, severity: str, text: str) -> Event:
        if severity in ("ERROR", "FATAL", "PANIC"):
            return ErrorLine(text)
        if self._after_error and (severity in _DETAIL_SEVERITIES or severity.startswith("LINE ")):
            return ErrorLine(text, continuation=True)
        return Ignored(severity.split()[0].lower())


def _match_summary(text: str) -> list[tuple[str, float | int | str]] | None:
    """The facts of one summary line, or None if it is not one."""
    for pattern, facts in _SUMMARY_PATTERNS:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        out: list[tuple[str, float | int | str]] = []
        for key, group, convert in facts:
            raw = m.group(group)
            if raw is not None:
                out.append((key, convert(raw)))
        return out
    return None
