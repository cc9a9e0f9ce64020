"""``benchwatch run`` and ``benchwatch attach``: keep a run's raw output and describe the run.

The load generator's stdout and stderr reach the terminal byte for byte and are
saved in the run directory as they arrive (benchwatch.record.stream); the
exporter follows those files. meta.json says what the run was: its argv, the
load generator (``tool``), versions, the server's settings and the host.
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
from benchwatch.engines.postgres.settings import describe_server
from benchwatch.parse import loadgen
from benchwatch.parse.pgbench_args import insert_options, parse_pgbench_args, sql_statements_per_transaction
from benchwatch.record import rundir
from benchwatch.record.host import host_facts
from benchwatch.record.stream import ClockStamper, LineSafeStream, pump


def _tool_version(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def pgbench_version(pgbench: str, env: dict[str, str]) -> str | None:
    text = _tool_version([pgbench, "--version"], env)
    m = re.search(r"(\d+(?:\.\d+)+)", text or "")
    return m.group(1) if m else None


def place_transaction_log(args: list[str], run: rundir.RunDir, add: bool) -> tuple[list[str], str | None, list[str]]:
    """With -l (or when asked to add it), make pgbench write its per-transaction logs where the exporter reads them.

    Returns (args, log prefix, what was changed, for saying so)."""
    parsed = parse_pgbench_args(args)
    said: list[str] = []
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
    generator = loadgen.for_program(program)
    unreadable = parse_pgbench_args(args).error
    if unreadable:
        notice(f"cannot read the pgbench arguments ({unreadable}); passing them unchanged")
    args, added = generator.ensure_progress(args)
    if added:
        notice(f"added {' '.join(added)} to the {generator.name} arguments (no progress report was asked for)")
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
        "run_id": run.run_id, "mode": "run", "tool": generator.name, "state": rundir.RUNNING, "pid": os.getpid(),
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
    stamper = ClockStamper(run, generator.progress_elapsed)
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
        # The clock is stamped from the stream the progress lines come on.
        stamps = {generator.progress_stream: stamper}
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        threads = [
            threading.Thread(target=pump, args=(proc.stdout.fileno(), [sys.stdout.buffer], out_file, stamps.get("stdout"))),
            threading.Thread(target=pump, args=(proc.stderr.fileno(), [stderr_sink or sys.stderr.buffer], err_file,
                                                stamps.get("stderr"))),
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
    generator = loadgen.PGBENCH
    parsed = parse_pgbench_args(pgbench_args or [])
    meta = {
        "run_id": run.run_id, "mode": "attach", "tool": generator.name, "state": rundir.RUNNING, "pid": os.getpid(),
        "argv": dsn.redact_argv(["pgbench"] + list(pgbench_args)) if pgbench_args else None,
        "progress_interval": interval or parsed.progress_interval, "hostname": socket.gethostname(),
        "started_at": time.time(), "output": "output.log",
        "sql_statements_per_transaction": sql_statements_per_transaction(parsed) if pgbench_args else None,
        "host": host_facts(),
    }
    run.write_meta({k: v for k, v in meta.items() if v is not None})
    with open(run.file("output.log"), "wb") as saved:
        pump(source_fd, [echo] if echo else [], saved, ClockStamper(run, generator.progress_elapsed))
    run.update_meta(state=rundir.FINISHED, ended_at=time.time())
    return run
