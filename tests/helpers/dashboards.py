"""What a dashboard query is about, for tests that run every query against a live stack."""

from __future__ import annotations

import datetime
import functools
import os
import re
import subprocess
import time

from benchwatch import engines

# Annotations of what other commands record: a plain run has none of them in its range, so there they must
# come back empty (test_sweep and test_history see them drawn).
OTHER_COMMANDS_ANNOTATIONS = ("experiment runs (benchwatch sweep)", "events (benchwatch annotate)")


def other_commands_annotation(source: str) -> bool:
    """True for an annotation that draws what ``benchwatch sweep`` or ``annotate`` recorded."""
    return source.startswith("annotation ") and source.removeprefix("annotation ").strip("'\"") in OTHER_COMMANDS_ANNOTATIONS


@functools.cache
def _annotation_engines() -> dict[str, str]:
    """Annotation name -> the engine family whose regions it draws (each engine brings its own)."""
    return {a.build().name: e.name for e in engines.load_engines().values() for a in e.annotations()}


def other_engines_annotation(source: str, engine: str) -> bool:
    """True for the annotation of an engine other than ``engine`` (e.g. InnoDB's flushing pressure on a
    PostgreSQL stack): the dashboards draw every engine's regions, and a stack of one engine has none of
    the other's, so such a query must come back empty."""
    if not source.startswith("annotation "):
        return False
    name = source.removeprefix("annotation ").strip("'\"")
    owner = _annotation_engines().get(name)
    return owner is not None and owner != engines.get(engine).name


AUTOVACUUM_ANNOTATION = "Autovacuum (server log)"
_LOG_TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \w+ \[\d+\] "
_AUTOVACUUM_LINE = re.compile(_LOG_TIME + r'LOG:  automatic (?:aggressive )?(vacuum|analyze)(?: to prevent wraparound)? '
                              r'of table "([^"]*)"')
_ELAPSED = re.compile(r"elapsed: (\d+(?:\.\d+)?) s")


def autovacuum_annotation(source: str) -> bool:
    """True for the annotation of the server log's autovacuum runs: it has data exactly when a log has such a
    run in the range (the embedded server logs every one; whether autovacuum comes during a run is its own)."""
    return source.removeprefix("annotation ").strip("'\"") == AUTOVACUUM_ANNOTATION


def logged_autovacuums(log_file: str, start: float, end: float) -> list[tuple[str, str, float, float]]:
    """(kind, table, began, ended) of the autovacuum runs a '%m [%p] ' stderr log shows overlapping [start, end]:
    each ends at its record's time and began its "elapsed" before (on its "system usage" line)."""
    out, open_ = [], None
    with open(log_file, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _AUTOVACUUM_LINE.match(line)
            if m:
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.UTC).timestamp()
                open_ = (m.group(2), m.group(3), t)
            elif not line.startswith("\t"):
                open_ = None
            e = _ELAPSED.search(line) if open_ else None
            if open_ and e:
                kind, table, t1 = open_
                open_ = None
                if t1 - float(e.group(1)) <= end and t1 >= start:
                    out.append((kind, table, t1 - float(e.group(1)), t1))
    return out


def read_from_disk(data_dir: str, after_s: float = 5.0, times: int = 10) -> None:
    """Reads that reach the disk (O_DIRECT, past the page cache) for the r_await panels, once a second from
    ``after_s`` on: with 24 GiB of cache, a short run may read nothing from the device at all. Reads the
    largest file under ``data_dir`` (a database's data files), 4 MiB at a time."""
    time.sleep(after_s)
    files = (os.path.join(root, n) for root, _, names in os.walk(data_dir) for n in names)
    big = max((p for p in files if os.path.isfile(p)), key=os.path.getsize, default=None)
    if big:
        for _ in range(times):
            subprocess.run(["dd", f"if={big}", "of=/dev/null", "bs=1M", "count=4", "iflag=direct"], capture_output=True)
            time.sleep(1)
