"""``benchwatch run`` and ``benchwatch attach``: keep a run's raw output and describe the run.

The load generator's stdout and stderr reach the terminal byte for byte and are
saved in the run directory as they arrive (benchwatch.record.stream); the
exporter follows those files. meta.json says what the run was: its argv, the
load generator (``tool``), versions, the server's settings and the host.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from benchwatch import engines, loadgens
from benchwatch.record import outcome, rundir
from benchwatch.record.host import host_facts
from benchwatch.record.host import name as host_name
from benchwatch.record.stream import ClockStamper, LineSafeStream, SavedCopy, SaveFailures, pump
from benchwatch.util import secrets


def _tool_version(argv: list[str], env: dict[str, str]) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=5, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def tool_version(generator: loadgens.LoadGenerator, program: str, env: dict[str, str]) -> str | None:
    text = _tool_version([program, *generator.version_argv], env)
    return (generator.parse_version(text) if text else None) or generator.binary_version(program)


# The exit code of a run ended by Ctrl-C before its tool started (the shell's 128 + SIGINT).
INTERRUPTED = 128 + signal.SIGINT


class CtrlC:
    """While a run is being set up, run or undone, Ctrl-C is noted instead of raised as KeyboardInterrupt.

    Ctrl-C reaches the whole foreground process group: the tool gets it from the terminal and ends its own
    way (go-tpc prints its summary), and benchwatch stays to record the end and undo what it set up (go-tpc's
    throwaway user). A KeyboardInterrupt raised at a random line could instead leave a user created but never
    dropped, or the tool started after the signal went out, never to see it. So the code asks ``seen`` where
    it matters: before starting the tool (then it does not start it), and right after (then it passes the
    signal on, as the terminal would have). Elsewhere (another thread) it notes nothing and changes nothing.
    """

    def __init__(self) -> None:
        self.seen = False
        self._old: Any = None
        self._installed = False

    def _note(self, signum: int, frame: Any) -> None:
        self.seen = True

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._note)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._old)
            self._installed = False


def run_benchmark(argv: list[str], *, runs_dir: str, client_env: dict[str, str],
                  notice: Callable[[str], None], on_start: Callable[[rundir.RunDir], None] | None = None,
                  latency_log: bool = False, stderr_sink: LineSafeStream | None = None,
                  server_facts: dict | None = None, info: dict[str, str] | None = None,
                  ctrl_c: CtrlC | None = None, stability: outcome.StabilityProfiler | None = None,
                  ) -> tuple[int, rundir.RunDir]:
    """Run a load generator with its output passed through and saved; returns (exit code, run directory).
    ``ctrl_c``: the caller's (when it set something up that must be undone, it noted Ctrl-C since then);
    a Ctrl-C before the tool started ends the run with INTERRUPTED and the tool not started.

    ``client_env``: the variables that take the tool to the stack's server (the user's own win).
    ``server_facts`` describes a server the engine cannot be asked about through ``client_env``
    (the caller knows how to reach it); else the engine asks it (Engine.describe_server).
    ``info`` becomes meta.json's "info", labels of the run's run_info series (the target a
    sysbench run drives, the experiment it belongs to); its "experiment" is also a meta key.
    ``stability``: what computes the run's stability profile for its summary.json
    (``benchwatch.stability.runs.stability_profiler``, from above this floor); without it summary.json has no
    stability profile (version 1) and its readers compute one."""
    if ctrl_c is None:
        with CtrlC() as own:
            return _run_benchmark(argv, runs_dir, client_env, notice, on_start, latency_log, stderr_sink, server_facts,
                                  info, own, stability)
    return _run_benchmark(argv, runs_dir, client_env, notice, on_start, latency_log, stderr_sink, server_facts, info,
                          ctrl_c, stability)


def _run_benchmark(argv: list[str], runs_dir: str, client_env: dict[str, str], notice: Callable[[str], None],
                   on_start: Callable[[rundir.RunDir], None] | None, latency_log: bool, stderr_sink: LineSafeStream | None,
                   server_facts: dict | None, info: dict[str, str] | None, ctrl_c: CtrlC,
                   stability: outcome.StabilityProfiler | None) -> tuple[int, rundir.RunDir]:
    program, args = argv[0], argv[1:]
    generator = loadgens.for_program(program)
    tool = generator.name
    unreadable = generator.read_argv(args).error
    if unreadable:
        notice(f"cannot read the {tool} arguments ({unreadable}); passing them unchanged")
    args, added = generator.ensure_progress(args)
    if added:
        notice(f"added {' '.join(added)} to the {tool} arguments (no progress report was asked for)")
    env = dict(os.environ)
    for key, value in client_env.items():
        env.setdefault(key, value)  # the user's own settings (PG*) win
    resolved = shutil.which(program, path=env.get("PATH")) or generator.locate(program, env) or program
    run = rundir.create_run_dir(runs_dir)
    txlog_prefix = None
    if generator.latency_log is not None:
        args, txlog_prefix, said = generator.latency_log(args, run.file(f"{tool}_log"), latency_log)
        if said:
            notice("added " + " ".join(said) + f" to the {tool} arguments (per-transaction latency log, for percentiles)")
    facts = generator.read_argv(args)
    meta = {
        "run_id": run.run_id, "mode": "run", "tool": tool, "state": rundir.RUNNING, "pid": os.getpid(),
        "argv": secrets.redact_argv([os.path.basename(program)] + generator.redact_argv(args)),
        "progress_interval": facts.progress_interval, "hostname": host_name(),
        generator.version_key: tool_version(generator, resolved, env), "started_at": time.time(),
        "sql_statements_per_transaction": facts.statements_per_transaction,
        "stdout": "stdout.log", "stderr": "stderr.log", "txlog_prefix": txlog_prefix,
    }
    engine = engines.get(generator.engine_of(args))
    meta["engine"] = engine.name
    meta.update(server_facts if server_facts is not None else engine.describe_server(env))
    meta["host"] = host_facts()
    if info:
        meta["info"] = dict(info)
        if info.get("experiment"):
            meta["experiment"] = info["experiment"]
    failures = SaveFailures(notice)
    try:
        run.write_meta(meta)
    except OSError as e:
        failures.failure(run.file(rundir.META), e)
    stamper = ClockStamper(run, generator.progress_elapsed, failures=failures, interval=facts.progress_interval,
                           arrivals=generator.progress_line if generator.progress_clock == "arrival" else None)
    # Unbuffered: nothing is left in a buffer for close() to fail on when the disk is full.
    with open(run.file("stdout.log"), "wb", buffering=0) as out_raw, \
            open(run.file("stderr.log"), "wb", buffering=0) as err_raw:
        out_file = SavedCopy(out_raw, out_raw.name, failures)
        err_file = SavedCopy(err_raw, err_raw.name, failures)
        if on_start:
            on_start(run)  # after the files exist: it announces where the output is saved
        if ctrl_c.seen:
            notice(f"interrupted (Ctrl-C) before {program} started: not starting it")
            _not_started(run, failures, INTERRUPTED, f"interrupted (Ctrl-C) before {tool} started")
            return INTERRUPTED, run
        try:
            proc = subprocess.Popen([resolved] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        except OSError as e:
            notice(f"cannot start {program}: {e.strerror}")
            _not_started(run, failures, 127, str(e))
            return 127, run
        if ctrl_c.seen:
            # Ctrl-C came while the tool was being started: the process group's signal may have gone out
            # before the tool existed. Passed on, as the terminal would have (a second one is harmless:
            # the tools end at the first).
            proc.send_signal(signal.SIGINT)
        # Ctrl-C reaches the tool from the terminal; we stay to record the end (ctrl_c notes it, no more).
        old_term = signal.signal(signal.SIGTERM, lambda *_: proc.send_signal(signal.SIGTERM))
        # The clock is stamped from the stream the progress lines come on.
        stamps = {generator.progress_stream: stamper}
        redact = generator.output_redactor(args)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        threads = [
            threading.Thread(target=pump, args=(proc.stdout.fileno(), [sys.stdout.buffer], out_file, stamps.get("stdout"),
                                                redact)),
            threading.Thread(target=pump, args=(proc.stderr.fileno(), [stderr_sink or sys.stderr.buffer], err_file,
                                                stamps.get("stderr"), redact)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        code = proc.wait()
        stamper.close()
        signal.signal(signal.SIGTERM, old_term)
    exit_code = code if code >= 0 else 128 - code  # killed by signal N: the shell's 128+N
    ended: dict = {}
    if exit_code == 0:
        failed = generator.judge(args, _read(run.file("stdout.log")), _read(run.file("stderr.log")), exit_code)
        if failed:  # a tool whose exit code is unreliable: its output says it failed
            notice(f"{tool} exited 0 but failed: {failed}; exit code 1")
            ended = {"tool_exit_code": exit_code, "failure": failed}
            exit_code = 1
    try:
        run.update_meta(state=rundir.FINISHED, exit_code=exit_code, ended_at=time.time(), **ended)
    except OSError as e:  # the exporter then ends the run when this process is gone
        failures.failure(run.file(rundir.META), e)
    summary = outcome.save(run, notice=notice, stability=stability)  # what the run achieved, for history and sweeps
    for note in outcome.unread_notes(summary):
        notice(note)
    return exit_code, run


def _not_started(run: rundir.RunDir, failures: SaveFailures, exit_code: int, error: str) -> None:
    try:
        run.update_meta(state=rundir.FINISHED, exit_code=exit_code, ended_at=time.time(), error=error)
    except OSError as meta_error:
        failures.failure(run.file(rundir.META), meta_error)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def attach_stream(source_fd: int, *, runs_dir: str, echo: BinaryIO | None, tool_args: list[str] | None,
                  interval: float | None, tool: str | None = None,
                  stability: outcome.StabilityProfiler | None = None,
                  on_start: Callable[[rundir.RunDir], None] | None = None) -> rundir.RunDir:
    """Follow a load generator's output stream from another process (e.g. stdin of a pipe): ``tool``'s
    (a registered tool's name; None: the default tool's). ``tool_args`` are that tool's arguments, for
    the run's metadata; ``on_start``: called once the run directory exists, before the stream is read."""
    run = rundir.create_run_dir(runs_dir)
    generator = loadgens.by_name(tool)
    facts = generator.read_argv(tool_args or [])
    meta = {
        "run_id": run.run_id, "mode": "attach", "tool": generator.name, "state": rundir.RUNNING, "pid": os.getpid(),
        "argv": secrets.redact_argv([generator.name] + generator.redact_argv(list(tool_args))) if tool_args else None,
        "progress_interval": interval or facts.progress_interval, "hostname": host_name(),
        "started_at": time.time(), "output": "output.log",
        "sql_statements_per_transaction": facts.statements_per_transaction if tool_args else None,
        "host": host_facts(),
    }
    run.write_meta({k: v for k, v in meta.items() if v is not None})
    if on_start:
        on_start(run)
    with open(run.file("output.log"), "wb") as saved:
        stamper = ClockStamper(run, generator.progress_elapsed, interval=interval or facts.progress_interval,
                               arrivals=generator.progress_line if generator.progress_clock == "arrival" else None)
        pump(source_fd, [echo] if echo else [], saved, stamper, generator.output_redactor(list(tool_args or [])))
        stamper.close()
    run.update_meta(state=rundir.FINISHED, ended_at=time.time())
    outcome.save(run, stability=stability)  # what the run achieved, for history and sweeps
    return run
