"""PostgreSQL server log records, and the checkpoint events among them.

Three formats, as written by the server (``log_destination``):

* ``stderr``: ``<log_line_prefix>SEVERITY:  message``.  The prefix is whatever
  the administrator configured, so it is not parsed field by field: the record
  starts at the first ``SEVERITY:  `` (severity, colon, two spaces, as elog.c
  writes it) and its time is the first timestamp in the prefix (``%m``, ``%t``
  or ``%n``).  Lines starting with a tab continue the previous record.
* ``csvlog``: one CSV row per record; quoted fields may hold newlines, so a
  record can span lines.  Column 1 is the time, 12 the severity, 14 the
  message, 16 the hint, 24 (PostgreSQL 13+) the backend type.
* ``jsonlog`` (PostgreSQL 15+): one JSON object per line.

The checkpoint messages (xlog.c ``LogCheckpointStart``/``LogCheckpointEnd``,
checkpointer.c) across 9.4 to 17::

    checkpoint starting: immediate force wait        (flags as printed; 9.x says "xlog" for "wal")
    checkpoint complete: wrote N buffers (x%); N WAL file(s) added, N removed, N recycled;
        write=s s, sync=s s, total=s s; sync files=N, longest=s s, average=s s;
        distance=N kB, estimate=N kB; lsn=X/X, redo lsn=X/X
    checkpoints are occurring too frequently (N seconds apart)   (+ HINT)

"transaction log file(s)" before 10, no distance/estimate before 9.5, no lsn
before 17, ", wrote N SLRU buffers" after the percentage from 18; restartpoints
(standbys) print "restartpoint" in place of "checkpoint".  Each field is matched
on its own so that any of these versions parses.  Messages must be untranslated
(``lc_messages = 'C'`` or English).

Autovacuum's runs (``log_autovacuum_min_duration``; vacuumlazy.c ``heap_vacuum_rel``,
analyze.c ``do_analyze_rel``), logged by the worker when the run ends, 10 to 18::

    automatic [aggressive ]vacuum [to prevent wraparound ]of table "db.schema.table": index scans: N
    pages: N removed, N remain, ...          (one line per figure; which lines varies by version)
    tuples: N removed, N remain, ...
    ...
    system usage: CPU: user: x s, system: y s, elapsed: z s      (always the last line)
    automatic analyze of table "db.schema.table"\n...\nsystem usage: ...   (14+)
    automatic analyze of table "db.schema.table" system usage: ...          (before 14: one line)

In stderr the lines after the first start with a tab; such a record is kept open
until its ``system usage`` line (9.x wrote "CPU 0.00s/0.01u sec elapsed 0.12 sec").
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo

from benchwatch.util import bounds

__all__ = [
    "FORMATS",
    "AutovacuumRun",
    "CheckpointEvent",
    "LogRecord",
    "RecordReader",
    "Unparsed",
    "autovacuum_run",
    "classify",
    "detect_format",
    "find_timestamp",
    "mentions_autovacuum",
    "mentions_checkpoint",
    "parse_complete",
    "parse_csv_record",
    "parse_json_record",
    "parse_stderr_line",
    "parse_timestamp",
]

FORMATS = ("stderr", "csvlog", "jsonlog")

SEVERITIES = ("DEBUG", "DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", "INFO", "NOTICE", "WARNING",
              "ERROR", "LOG", "FATAL", "PANIC")
# Secondary lines of a record in stderr: each comes with its own prefix.
DETAIL_LABELS = ("DETAIL", "HINT", "QUERY", "CONTEXT", "LOCATION", "STATEMENT")

# "SEVERITY:  " not glued to a preceding word; elog.c writes exactly two spaces.
_SEVERITY_RE = re.compile(r"(?<![A-Za-z0-9_])(DEBUG[1-5]?|INFO|NOTICE|WARNING|ERROR|LOG|FATAL|PANIC|"
                          r"DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT):  ")
# %m "2026-11-22 18:00:08.920 UTC", %t "2026-11-22 18:00:08 CET", zone optional.
_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
                    r"(?: ?([A-Za-z][A-Za-z0-9]{0,5}|[+-]\d\d(?::?\d\d)?))?(?![0-9A-Za-z])")
# %n: Unix epoch with milliseconds.
_EPOCH_RE = re.compile(r"(?<![0-9.])(\d{9,11})\.(\d{3})(?![0-9])")
_CSV_START_RE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}(?: [A-Za-z0-9+:-]+)?,")

# Zone abbreviations, as in PostgreSQL's "Default" timezone_abbreviations set
# (so CST is US Central and IST is Israel).  Consulted only when the abbreviation
# is not the local zone's: log_timezone normally is the host's zone.
_ZONE_HOURS = {
    "UTC": 0, "UT": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2, "MET": 1, "MEST": 2,
    "EET": 2, "EEST": 3, "MSK": 3, "IST": 2, "IDT": 3, "SAST": 2, "PKT": 5, "WIB": 7, "HKT": 8, "AWST": 8,
    "JST": 9, "KST": 9, "ACST": 9.5, "ACDT": 10.5, "AEST": 10, "AEDT": 11, "NZST": 12, "NZDT": 13,
    "HST": -10, "AKST": -9, "AKDT": -8, "PST": -8, "PDT": -7, "MST": -7, "MDT": -6, "CST": -6, "CDT": -5,
    "EST": -5, "EDT": -4, "AST": -4, "ADT": -3, "NST": -3.5, "NDT": -2.5,
}


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One server log record (its first line, for stderr)."""

    timestamp: float | None  # Unix seconds from the record; None: the line carries no time
    severity: str  # as printed: LOG, WARNING, HINT (stderr secondary line), ...
    message: str
    hint: str = ""
    backend_type: str = ""  # csvlog 13+, jsonlog
    user: str = ""  # csvlog, jsonlog: set for messages of client sessions


@dataclass(frozen=True, slots=True)
class CheckpointEvent:
    """``event`` is start, complete, too_frequent or server_restart."""

    event: str
    kind: str = "checkpoint"  # checkpoint | restartpoint
    reason: str = ""  # start: the flags as printed, e.g. "immediate force wait"
    fields: dict = field(default_factory=dict)  # complete: see parse_complete; too_frequent: apart_seconds


# -- timestamps --------------------------------------------------------------------


def _zone_epoch(naive: datetime, zone: str | None, local_tz: tzinfo | None) -> float | None:
    if zone:
        m = re.fullmatch(r"([+-])(\d\d)(?::?(\d\d))?", zone)
        if m:  # tzdata's numeric abbreviations ("+03", "-0330") use the ISO sign
            sign = 1 if m.group(1) == "+" else -1
            offset = timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0)) * sign
            return naive.replace(tzinfo=timezone(offset)).timestamp()
    # The local zone first: it also gets daylight saving right for this date.
    for fold in (0, 1):
        if local_tz is None:
            local = naive.replace(fold=fold).astimezone()  # a naive datetime is read as local time
        else:
            local = naive.replace(tzinfo=local_tz, fold=fold)
        if zone is None or local.tzname() == zone:
            return local.timestamp()
    hours = _ZONE_HOURS.get(zone.upper()) if zone is not None else None  # None returned in the loop
    if hours is not None:
        return naive.replace(tzinfo=timezone(timedelta(hours=hours))).timestamp()
    return None


# ((text to the second, zone, tz), epoch) of the last conversion: many lines share a second.
_last_second: tuple = (None, None)


def _match_epoch(m: re.Match, local_tz: tzinfo | None) -> float | None:
    global _last_second
    y, mo, d, h, mi, s, frac, zone = m.groups()
    key = (m.group(0)[:19], zone, local_tz)
    cached = _last_second  # one read: another thread may replace it
    if cached[0] == key:
        epoch = cached[1]
    else:
        try:
            naive = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
        except ValueError:
            return None
        epoch = _zone_epoch(naive, zone, local_tz)
        _last_second = (key, epoch)
    if epoch is None:
        return None
    return epoch + (int(frac) / 10 ** len(frac) if frac else 0.0)


def parse_timestamp(text: str, local_tz: tzinfo | None = None) -> float | None:
    """Unix seconds of a PostgreSQL log time ("2026-11-22 18:00:08.920 UTC"), None if not one.

    A zone that is neither numeric, nor the local zone's abbreviation, nor a
    common abbreviation gives None rather than a guess hours off.
    """
    m = _TS_RE.match(text.strip())
    return bounds.epoch_or_none(_match_epoch(m, local_tz)) if m else None  # the year 9999 places no sample


def find_timestamp(prefix: str, local_tz: tzinfo | None = None) -> float | None:
    """The first timestamp (%m, %t or %n) in a stderr line prefix."""
    m = _TS_RE.search(prefix)
    e = _EPOCH_RE.search(prefix)
    if e and (m is None or e.start() < m.start()):
        # %n: any number of digits, bounded before it becomes a sample's int64 timestamp.
        return bounds.epoch_or_none(int(e.group(1)) + int(e.group(2)) / 1000)
    return bounds.epoch_or_none(_match_epoch(m, local_tz)) if m else None


# -- records -----------------------------------------------------------------------


class Unparsed(Exception):
    """A record that could not be read (counted by the caller, never fatal)."""


def parse_stderr_line(line: str, local_tz: tzinfo | None = None) -> LogRecord | None:
    """The record a stderr line starts, or None for a continuation or foreign line."""
    m = _SEVERITY_RE.search(line)
    if m is None:
        return None
    prefix = line[:m.start()]
    return LogRecord(find_timestamp(prefix, local_tz), m.group(1), line[m.end():])


# csvlog columns (0-based), stable since 9.0; backend_type added in 13.
_CSV_TIME, _CSV_USER, _CSV_SEVERITY, _CSV_MESSAGE, _CSV_HINT, _CSV_BACKEND_TYPE = 0, 1, 11, 13, 15, 23


def parse_csv_record(text: str, local_tz: tzinfo | None = None) -> LogRecord:
    """One complete csvlog record (possibly several lines)."""
    try:
        rows = list(csv.reader([text] if "\n" not in text else text.splitlines(keepends=True), strict=True))
    except csv.Error as e:
        raise Unparsed(f"csv: {e}") from None
    if len(rows) != 1 or len(rows[0]) < 14:
        raise Unparsed(f"csv: {len(rows)} rows, {len(rows[0]) if rows else 0} columns")
    row = rows[0]
    ts = parse_timestamp(row[_CSV_TIME], local_tz)
    if ts is None:
        raise Unparsed(f"csv: bad log_time {row[_CSV_TIME]!r}")
    return LogRecord(ts, row[_CSV_SEVERITY], row[_CSV_MESSAGE],
                     hint=row[_CSV_HINT] if len(row) > _CSV_HINT else "",
                     backend_type=row[_CSV_BACKEND_TYPE] if len(row) > _CSV_BACKEND_TYPE else "",
                     user=row[_CSV_USER])


def parse_json_record(text: str, local_tz: tzinfo | None = None) -> LogRecord:
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise Unparsed(f"json: {e}") from None
    if not isinstance(obj, dict) or "message" not in obj or "timestamp" not in obj:
        raise Unparsed("json: not a jsonlog record")
    ts = parse_timestamp(str(obj["timestamp"]), local_tz)
    if ts is None:
        raise Unparsed(f"json: bad timestamp {obj['timestamp']!r}")
    return LogRecord(ts, str(obj.get("error_severity", "")), str(obj["message"]), hint=str(obj.get("hint", "")),
                     backend_type=str(obj.get("backend_type", "")), user=str(obj.get("user", "")))


def detect_format(first_line: str, path: str = "") -> str:
    """csvlog/jsonlog by file name (PostgreSQL writes .csv/.json), else by the first line."""
    if path.endswith(".csv"):
        return "csvlog"
    if path.endswith(".json"):
        return "jsonlog"
    if first_line.startswith("{"):
        return "jsonlog"
    if _CSV_START_RE.match(first_line):
        return "csvlog"
    return "stderr"


# A csv record must close its quotes within this much text; a stray quote would
# otherwise swallow the rest of the log.
MAX_CSV_RECORD_CHARS = 4 << 20
# An autovacuum record has about 15 lines (one per index more); a record still open after this
# many is not one (a foreign line pattern): it is closed as it is.
MAX_OPEN_LINES = 200


class RecordReader:
    """Turns log lines (in order, without newlines) into records, as they come.

    Records are returned as soon as their last line is in: a stderr record at
    its first line (continuations only extend statement text), a csv record
    when its quotes balance.  ``malformed`` counts records that could not be
    read; ``foreign`` counts stderr lines that are not PostgreSQL records.
    """

    def __init__(self, log_format: str = "auto", *, path: str = "", local_tz: tzinfo | None = None,
                 keep: Callable[[str], bool] | None = None):
        if log_format not in ("auto",) + FORMATS:
            raise ValueError(f"log format must be auto, stderr, csvlog or jsonlog, not {log_format!r}")
        self.requested = log_format
        self.path = path
        self.local_tz = local_tz
        self.format: str | None = None if log_format == "auto" else log_format
        # keep(text) false: the record is counted but neither parsed nor returned
        # (most of a busy log is statements; parsing their times costs the most).
        self.keep = keep
        self._pending: list[str] = []
        self._pending_chars = 0
        # stderr: a record whose continuation lines are still coming (autovacuum's figures)
        self._open: LogRecord | None = None
        self._open_lines: list[str] = []
        self.records = 0
        self.malformed = 0
        self.foreign = 0

    def reset(self) -> None:
        """A new file (rotation): forget the unfinished record, detect the format again."""
        self._pending, self._pending_chars = [], 0
        self._open, self._open_lines = None, []
        if self.requested == "auto":
            self.format = None

    def _close_open(self) -> list[LogRecord]:
        """The open stderr record with its continuation lines joined as csvlog has them (newlines)."""
        rec, lines = self._open, self._open_lines
        if rec is None:
            return []
        self._open, self._open_lines = None, []
        return [LogRecord(rec.timestamp, rec.severity, "\n".join(lines))]

    def feed(self, line: str) -> list[LogRecord]:
        if line.endswith("\r"):
            line = line[:-1]
        if self.format is None:
            if not line.strip():
                return []
            self.format = detect_format(line, self.path)
        if self.format == "stderr":
            if line.startswith("\t") or not line.strip():
                # Continuation of a multi-line message: kept only for a record that needs its
                # other lines (autovacuum's figures), which ends at its "system usage" line.
                if self._open is not None and line.strip():
                    self._open_lines.append(line[1:])
                    if line.lstrip().startswith("system usage:") or len(self._open_lines) > MAX_OPEN_LINES:
                        return self._close_open()
                return []
            m = _SEVERITY_RE.search(line)
            if m is None:
                self.foreign += 1
                return []
            out = self._close_open()
            self.records += 1
            message = line[m.end():]
            if self.keep is not None and not self.keep(message):
                return out
            rec = LogRecord(find_timestamp(line[:m.start()], self.local_tz), m.group(1), message)
            if m.group(1) == "LOG" and _AUTOVACUUM_RE.match(message) and "system usage:" not in message:
                self._open, self._open_lines = rec, [message]
                return out
            return out + [rec]
        if self.format == "jsonlog":
            if not line.strip():
                return []
            return self._parse(parse_json_record, line)
        return self._feed_csv(line)

    def _feed_csv(self, line: str) -> list[LogRecord]:
        if not self._pending and not line:
            return []
        self._pending.append(line)
        self._pending_chars += len(line) + 1
        text = "\n".join(self._pending)
        if text.count('"') % 2:  # inside a quoted field: the record goes on
            if self._pending_chars > MAX_CSV_RECORD_CHARS:
                self._pending, self._pending_chars = [], 0
                self.malformed += 1
            return []
        self._pending, self._pending_chars = [], 0
        return self._parse(parse_csv_record, text)

    def _parse(self, parse, text: str) -> list[LogRecord]:
        if self.keep is not None and not self.keep(text):
            self.records += 1
            return []
        try:
            rec = parse(text, self.local_tz)
        except Unparsed:
            self.malformed += 1
            return []
        self.records += 1
        return [rec]


# -- checkpoint events -------------------------------------------------------------

_START_RE = re.compile(r"(checkpoint|restartpoint) starting:(.*)\Z", re.S)
_COMPLETE_RE = re.compile(r"(checkpoint|restartpoint) complete:(.*)\Z", re.S)
_TOO_FREQUENT_RE = re.compile(r"checkpoints are occurring too frequently \((\d+) seconds? apart\)")
# Messages that mean the server (re)started: an unfinished checkpoint is abandoned.
_RESTART_MESSAGES = ("starting PostgreSQL ", "database system was interrupted", "database system was not properly shut down",
                     "database system was shut down", "all server processes terminated; reinitializing",
                     "database system is shut down")
# The processes that log checkpoints: the checkpointer, the startup process
# (end-of-recovery checkpoint before 15), a single-user backend.
_CHECKPOINTING_BACKENDS = ("", "checkpointer", "startup", "standalone backend", "background writer")
_RESTARTING_BACKENDS = ("", "postmaster", "startup")

_S = r"(\d+(?:\.\d+)?) s"
_FIELD_RES = (
    (re.compile(r"wrote (\d+) buffers \((\d+(?:\.\d+)?)%\)"), ("buffers_written", "buffers_written_ratio")),
    (re.compile(r"wrote (\d+) SLRU buffers"), ("slru_buffers_written",)),
    (re.compile(r"(\d+) (?:WAL|transaction log) file\(s\) added, (\d+) removed, (\d+) recycled"),
     ("wal_files_added", "wal_files_removed", "wal_files_recycled")),
    (re.compile(rf"write={_S}, sync={_S}, total={_S}"), ("write_seconds", "sync_seconds", "total_seconds")),
    (re.compile(rf"sync files=(\d+), longest={_S}, average={_S}"),
     ("sync_files", "sync_longest_seconds", "sync_average_seconds")),
    (re.compile(r"distance=(\d+) kB, estimate=(\d+) kB"), ("distance_bytes", "estimate_bytes")),
    (re.compile(r"lsn=([0-9A-Fa-f]+)/([0-9A-Fa-f]+), redo lsn=([0-9A-Fa-f]+)/([0-9A-Fa-f]+)"), ("lsn", "redo_lsn")),
)


def _lsn(hi: str, lo: str) -> float:
    return float((int(hi, 16) << 32) | int(lo, 16))


def parse_complete(text: str) -> dict[str, float]:
    """The numbers of a "complete" message, in base units: seconds, bytes, ratio 0..1, LSN as a byte position."""
    out: dict[str, float] = {}
    for regex, names in _FIELD_RES:
        m = regex.search(text)
        if not m:
            continue
        if names == ("lsn", "redo_lsn"):
            out["lsn"] = _lsn(m.group(1), m.group(2))
            out["redo_lsn"] = _lsn(m.group(3), m.group(4))
            continue
        for name, value in zip(names, m.groups()):
            v = float(value)
            if name == "buffers_written_ratio":
                v /= 100.0
            elif name in ("distance_bytes", "estimate_bytes"):
                v *= 1024.0  # PostgreSQL's kB: bytes / 1024
            out[name] = v
    return out


_MENTIONS_RE = re.compile("|".join(re.escape(m) for m in (
    "checkpoint starting:", "checkpoint complete:", "restartpoint starting:", "restartpoint complete:",
    "checkpoints are occurring too frequently") + _RESTART_MESSAGES))


def mentions_checkpoint(text: str) -> bool:
    """Cheap test: could this record's text be one :func:`classify` recognises?"""
    return _MENTIONS_RE.search(text) is not None


def classify(rec: LogRecord) -> CheckpointEvent | None:
    """The checkpoint event a record reports, if any."""
    if rec.severity not in ("LOG", "WARNING"):
        return None
    msg = rec.message
    if not msg or msg[0] not in "crsda":
        return None
    if rec.user:
        # A client's RAISE LOG 'checkpoint starting: ...' is not a checkpoint
        # (only csvlog and jsonlog tell who logged; stderr cannot).
        return None
    if msg.startswith(_RESTART_MESSAGES):
        return CheckpointEvent("server_restart") if rec.backend_type in _RESTARTING_BACKENDS else None
    if rec.backend_type not in _CHECKPOINTING_BACKENDS:
        return None
    m = _START_RE.match(msg)
    if m:
        reason = " ".join(m.group(2).split()) or "none"
        return CheckpointEvent("start", m.group(1), reason)
    m = _COMPLETE_RE.match(msg)
    if m:
        return CheckpointEvent("complete", m.group(1), fields=parse_complete(m.group(2)))
    m = _TOO_FREQUENT_RE.match(msg)
    if m:
        return CheckpointEvent("too_frequent", fields={"apart_seconds": float(m.group(1))})
    return None


# -- other server events that can explain a dip (benchwatch explain) ---------------------------
# event -> (severities, message prefix). Each is a cause of its own in explain (causes.py here: the
# event's name is the cause's): the server resolved a deadlock by cancelling a transaction after
# deadlock_timeout of waiting, a statement gave up on lock_timeout, a session was terminated
# (pg_terminate_backend, a shutdown), memory or a write failed.
SERVER_EVENTS: dict[str, tuple[tuple[str, ...], str]] = {
    "deadlock": (("ERROR",), "deadlock detected"),
    "lock_timeout": (("ERROR",), "canceling statement due to lock timeout"),
    "connection_terminated": (("FATAL",), "terminating connection due to administrator command"),
    "out_of_memory": (("ERROR", "FATAL", "PANIC", "LOG"), "out of memory"),
    "write_error": (("ERROR", "FATAL", "PANIC", "WARNING", "LOG"), "could not write"),
}
_EVENTS_RE = re.compile("|".join(re.escape(prefix) for _, prefix in SERVER_EVENTS.values()))


def mentions_event(text: str) -> bool:
    """Cheap test: could this record's text be one :func:`server_event` recognises?"""
    return _EVENTS_RE.search(text) is not None


def server_event(rec: LogRecord) -> str | None:
    """The SERVER_EVENTS name of a record, if it reports one."""
    for event, (severities, prefix) in SERVER_EVENTS.items():
        if rec.severity in severities and rec.message.startswith(prefix):
            return event
    return None


# -- autovacuum and autoanalyze runs -----------------------------------------------------------

_AUTOVACUUM_RE = re.compile(r'automatic (aggressive )?(vacuum|analyze)( to prevent wraparound)? of table "')
_AV_MENTION_RE = re.compile(r"automatic (?:aggressive )?(?:vacuum|analyze)")
_AV_TABLE_RE = re.compile(r'of table "(.*?)"(?=:| system usage|\n|$)', re.M)
# pg_rusage_show: "CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.10 s" (10+); 9.x "CPU 0.00s/0.01u sec elapsed 0.12 sec"
_AV_ELAPSED_RE = re.compile(r"elapsed:? (\d+(?:\.\d+)?) s")
_AV_FIGURES = (
    (re.compile(r"^pages: (\d+) removed, (\d+) remain", re.M), ("pages_removed", "pages_remaining")),
    (re.compile(r"^tuples: (\d+) removed, (\d+) remain", re.M), ("tuples_removed", "tuples_remaining")),
    (re.compile(r"index scans: (\d+)"), ("index_scans",)),
)


@dataclass(frozen=True, slots=True)
class AutovacuumRun:
    """One autovacuum or autoanalyze run, logged when it ended (its record's time)."""

    kind: str  # vacuum | analyze
    database: str
    table: str  # schema.table
    elapsed_seconds: float | None  # None: the record was cut before its "system usage" line
    aggressive: bool = False
    wraparound: bool = False
    fields: dict = field(default_factory=dict)  # index_scans, pages_removed/remaining, tuples_removed/remaining


def mentions_autovacuum(text: str) -> bool:
    """Cheap test: could this record's text be one :func:`autovacuum_run` recognises?"""
    return "automatic " in text and _AV_MENTION_RE.search(text) is not None  # raw jsonlog text has \" for "


def autovacuum_run(rec: LogRecord) -> AutovacuumRun | None:
    """The autovacuum or autoanalyze run a record reports, if any (LOG from an autovacuum worker:
    a client's ``RAISE LOG`` of the same text is not one, where csvlog/jsonlog say who logged)."""
    if rec.severity != "LOG" or rec.user or rec.backend_type not in ("", "autovacuum worker"):
        return None
    m = _AUTOVACUUM_RE.match(rec.message)
    if m is None:
        return None
    name = _AV_TABLE_RE.search(rec.message, m.end() - len('of table "'))
    if name is None:
        return None
    database, _, table = name.group(1).partition(".")  # %s.%s.%s: a database name with a dot is read wrong
    got = _AV_ELAPSED_RE.search(rec.message)
    elapsed = float(got.group(1)) if got else None
    if elapsed is not None and not math.isfinite(elapsed):
        elapsed = None  # a garbled record's hundred digits
    fields: dict[str, float] = {}
    for regex, names in _AV_FIGURES:
        got = regex.search(rec.message)
        if got:
            for key, value in zip(names, got.groups()):
                if math.isfinite(float(value)):
                    fields.setdefault(key, float(value))
    return AutovacuumRun(m.group(2), database, table, elapsed,
                         aggressive=bool(m.group(1)), wraparound=bool(m.group(3)), fields=fields)
