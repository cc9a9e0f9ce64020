"""``benchwatch run`` and ``benchwatch attach``: keep a run's raw output and describe the run.

pgbench's stdout and stderr reach the terminal byte for byte and are saved in
the run directory as they arrive; the exporter follows those files. Before the
first progress line is saved, the moment pgbench's clock started (arrival of
that line minus its elapsed time) is stamped into meta.json, so every progress
sample lands at pgbench's own time.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import BinaryIO

from benchwatch.engines.postgres import dsn
from benchwatch.parse.pgbench_args import ensure_progress, insert_options, parse_pgbench_args, sql_statements_per_transaction
from benchwatch.record import rundir
from benchwatch.record.host import host_facts

_PROGRESS_ELAPSED = re.compile(rb"^progress: ([0-9]+(?:\.[0-9]+)?) s")


class ClockStamper:
    """Writes clock_start_epoch into meta.json when the first progress line arrives."""

    def __init__(self, run: rundir.RunDir, clock: Callable[[], float] = time.time):
        self.run = run
        self.clock = clock
        self.stamped = False
        self.lock = threading.Lock()

    def see(self, line: bytes) -> None:
        if self.stamped:
            return
        m = _PROGRESS_ELAPSED.match(line)
        if not m:
            return
        with self.lock:
            if self.stamped:
                return
            elapsed = float(m.group(1))
            # With --progress-timestamp the line carries epoch seconds: it is its own clock.
            if elapsed <= 1e8:
                self.run.update_meta(clock_start_epoch=round(self.clock() - elapsed, 6))
            self.stamped = True


class LineSafeStream:
    """pgbench's stream to the terminal, with benchwatch's own lines put only between pgbench's lines.

    pgbench may write a progress line in several pieces; an alert printed in
    between would split it. Lines said mid-line wait for the next newline.
    """

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.lock = threading.Lock()
        self.at_line_start = True
        self.pending: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        with self.lock:
            self._out(chunk)
            self.at_line_start = chunk.endswith(b"\n")
            if self.at_line_start and self.pending:
                self._out(b"".join(self.pending))
                self.pending.clear()

    def flush(self) -> None:
        pass  # every write is flushed

    def say(self, line: str) -> None:
        data = line.rstrip("\n").encode() + b"\n"
        with self.lock:
            if self.at_line_start:
                self._out(data)
            else:
                self.pending.append(data)

    def close(self) -> None:
        with self.lock:
            if self.pending:
                self._out((b"" if self.at_line_start else b"\n") + b"".join(self.pending))
                self.pending.clear()

    def _out(self, data: bytes) -> None:
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the run


def pump(source_fd: int, sinks: list[BinaryIO], saved: BinaryIO, stamper: ClockStamper | None) -> None:
    """Copy a stream to the terminal unchanged and to its file in the run directory."""
    pending = b""  # while unstamped, hold a line starting with "progress:" until it is complete
    while True:
        try:
            chunk = os.read(source_fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        for sink in sinks:
            try:
                sink.write(chunk)
                sink.flush()
            except (OSError, ValueError):
                pass  # a closed terminal must not lose the saved copy
        if stamper is None or stamper.stamped:
            saved.write(chunk)
            saved.flush()
            continue
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        for line in lines:
            stamper.see(line)
            saved.write(line + b"\n")
        if stamper.stamped and pending:
            saved.write(pending)
            pending = b""
        saved.flush()
    if pending:
        saved.write(pending)
    saved.flush()


def _tool_version(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


# Settings that explain a TPS curve: checkpoint spacing, cache size, WAL volume.
SETTINGS = ("shared_buffers", "max_wal_size", "min_wal_size", "checkpoint_timeout", "checkpoint_completion_target",
            "wal_buffers", "full_page_writes", "synchronous_commit", "fsync", "wal_compression", "work_mem",
            "effective_io_concurrency", "bgwriter_lru_maxpages", "max_connections", "data_checksums")


def describe_server(env: dict[str, str]) -> dict:
    """Server version, pgbench scale and settings of the server ``env`` points at, best effort.

    One connection, a few ms; a server that does not answer costs at most the connect timeout."""
    # psycopg costs ~0.2 s to import: attach, which never connects, does not pay for it.
    import psycopg

    from benchwatch.engines.postgres import connect

    # env holds the user's PG* variables and the stack's: the server pgbench will reach.
    params = connect.params_from_env(env)
    out: dict = {}
    try:
        with connect.connect(params) as conn:
            conn.execute("SET statement_timeout = '5s'")  # a lock on pgbench_branches must not hold the run
            row = conn.execute("SELECT current_setting('server_version')").fetchone()
            out["server_version"] = row[0].split()[0]
            rows = conn.execute("SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings "
                                "WHERE name = ANY(%s) ORDER BY 1", (list(SETTINGS),)).fetchall()
            if rows:
                out["settings"] = dict(rows)
            try:
                scale = conn.execute("SELECT count(*) FROM pgbench_branches").fetchone()[0]
            except psycopg.errors.UndefinedTable:
                scale = None  # not initialised yet, or a custom script's own tables
            if scale is not None:
                out["scale"] = str(scale)
    except psycopg.Error:
        pass  # metadata is best effort: the run itself reports connection problems
    return out


def pgbench_version(pgbench: str, env: dict[str, str]) -> str | None:
    text = _tool_version([pgbench, "--version"], env)
    m = re.search(r"(\d+(?:\.\d+)+)", text or "")
    return m.group(1) if m else None


def place_transaction_log(args: list[str], run: rundir.RunDir, add: bool) -> tuple[list[str], str | None, list[str]]:
    """With -l (or when asked to add it), make pgbench write its per-transaction logs where the exporter reads them.

    Returns (args, log prefix, what was changed, for saying so)."""
    parsed = parse_pgbench_args(args)
    said = []
    if parsed.error:
        return args, None, said  # pgbench will refuse this argv; adding to it would only confuse
    if "log" not in parsed.flags:
        if not add:
            return args, None, said
        args = insert_options(args, ["-l"])
        said.append("-l")
    prefix = parsed.last("log-prefix")
    if prefix is None:
        prefix = run.file("pgbench_log")
        args = insert_options(args, [f"--log-prefix={prefix}"])
        said.append(f"--log-prefix={prefix}")
    return args, os.path.abspath(prefix), said


def run_pgbench(pgbench_argv: list[str], *, runs_dir: str, pg_env: dict[str, str],
                notice: Callable[[str], None], on_start: Callable[[rundir.RunDir], None] | None = None,
                latency_log: bool = False, stderr_sink: LineSafeStream | None = None) -> tuple[int, rundir.RunDir]:
    """Run pgbench with its output passed through and saved; returns (exit code, run directory)."""
    program, args = pgbench_argv[0], pgbench_argv[1:]
    unreadable = parse_pgbench_args(args).error
    if unreadable:
        notice(f"cannot read the pgbench arguments ({unreadable}); passing them unchanged")
    args, added = ensure_progress(args)
    if added:
        notice("added -P 1 to the pgbench arguments (no -P was given)")
    env = dict(os.environ)
    for key, value in pg_env.items():
        env.setdefault(key, value)  # the user's own PG* settings win
    resolved = shutil.which(program, path=env.get("PATH")) or program
    run = rundir.create_run_dir(runs_dir)
    args, txlog_prefix, said = place_transaction_log(args, run, latency_log)
    if said:
        notice("added " + " ".join(said) + " to the pgbench arguments (per-transaction latency log, for percentiles)")
    parsed = parse_pgbench_args(args)
    meta = {
        "run_id": run.run_id, "mode": "run", "state": rundir.RUNNING, "pid": os.getpid(),
        "argv": dsn.redact_argv([os.path.basename(program)] + args),
        "progress_interval": parsed.progress_interval, "hostname": socket.gethostname(),
        "pgbench_version": pgbench_version(resolved, env), "started_at": time.time(),
        "sql_statements_per_transaction": sql_statements_per_transaction(parsed),
        "stdout": "stdout.log", "stderr": "stderr.log", "txlog_prefix": txlog_prefix,
    }
    meta.update(describe_server(env))
    meta["host"] = host_facts()
    run.write_meta(meta)
    if on_start:
        on_start(run)
    stamper = ClockStamper(run)
    with open(run.file("stdout.log"), "wb") as out_file, open(run.file("stderr.log"), "wb") as err_file:
        try:
            proc = subprocess.Popen([resolved] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as e:
            notice(f"cannot start {program}: {e.strerror}")
            run.update_meta(state=rundir.FINISHED, exit_code=127, ended_at=time.time(), error=str(e))
            return 127, run
        # Ctrl-C reaches pgbench from the terminal; we stay to record the end.
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        old_term = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        threads = [
            threading.Thread(target=pump, args=(proc.stdout.fileno(), [sys.stdout.buffer], out_file, None)),
            threading.Thread(target=pump, args=(proc.stderr.fileno(), [stderr_sink or sys.stderr.buffer], err_file, stamper)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        code = proc.wait()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
    exit_code = code if code >= 0 else 128 - code  # killed by signal N: the shell's 128+N
    run.update_meta(state=rundir.FINISHED, exit_code=exit_code, ended_at=time.time())
    return exit_code, run


def attach_stream(source_fd: int, *, runs_dir: str, echo: BinaryIO | None, pgbench_args: list[str] | None,
                  interval: float | None) -> rundir.RunDir:
    """Follow a pgbench output stream from another process (e.g. stdin of a pipe)."""
    run = rundir.create_run_dir(runs_dir)
    parsed = parse_pgbench_args(pgbench_args or [])
    meta = {
        "run_id": run.run_id, "mode": "attach", "state": rundir.RUNNING, "pid": os.getpid(),
        "argv": dsn.redact_argv(["pgbench"] + list(pgbench_args)) if pgbench_args else None,
        "progress_interval": interval or parsed.progress_interval, "hostname": socket.gethostname(),
        "started_at": time.time(), "output": "output.log",
        "sql_statements_per_transaction": sql_statements_per_transaction(parsed) if pgbench_args else None,
        "host": host_facts(),
    }
    run.write_meta({k: v for k, v in meta.items() if v is not None})
    with open(run.file("output.log"), "wb") as saved:
        pump(source_fd, [echo] if echo else [], saved, ClockStamper(run))
    run.update_meta(state=rundir.FINISHED, ended_at=time.time())
    return run
