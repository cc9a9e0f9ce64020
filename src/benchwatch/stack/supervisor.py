"""A small process supervisor: restarts components that die, with backoff, and counts the restarts.

Started by ``up`` as one more component (``supervisor``); works like systemd's
``Restart=always`` or compose's ``restart: unless-stopped`` on a machine
without either. It knows nothing of PostgreSQL or Prometheus: its directory
holds a list of components, each with what it takes to start one again:

  <dir>/components.json  name -> {argv, env, cwd, user, log_file, pid_file, pid_source}
                         (0600: env may hold a Grafana admin password); written by
                         whoever starts the components (:func:`register`), re-read
                         when it changes, so components may come and go
  <dir>/state.json       name -> {restarts, last_restart, last_exit, ...}; kept
                         across supervisor restarts, read by ``status``

Whether a component runs is whether the process in its pid file (or
``pid_source``, e.g. PostgreSQL's postmaster.pid) is alive. A dead one is
started again at once; one that dies again within :data:`STABLE_S` waits
1, 2, 4 ... :data:`MAX_BACKOFF_S` seconds first. ``/metrics`` shows
``benchwatch_component_restarts_total{component}`` and
``benchwatch_component_running{component}``.

It does not look every second: it sleeps until something it must act on
happens, so an idle second costs it nothing. It holds a pidfd (Linux >= 5.3)
of each component's process and of the process holding ``paused.pid``, which
becomes readable the moment that process ends, whoever its parent or user;
inotify tells it when components.json is replaced, paused.pid comes or goes or
a pid file is rewritten (a component started again by someone else); a pipe
wakes it to stop; and the timeout is only as long as the next backoff attempt
needs. After any wake it re-reads everything, as one tick, and opens pidfds
for pids that changed. Every :data:`SAFETY_S` it looks anyway. Where pidfds or
inotify are missing it looks every :data:`TICK_S`, as it always did.

SIGTERM stops the supervisor alone: the components keep running, and ``down``
stops them in order. ``down`` stops the supervisor first, so nothing comes back.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from benchwatch.util import processes
from benchwatch.util.private import write_private
from benchwatch.util.wake import Waker

log = logging.getLogger("benchwatch.supervisor")

SPECS = "components.json"
STATE = "state.json"
# Holds the pid of a process (``up``) that is starting components itself: no restarts while it lives.
PAUSE = "paused.pid"
# Without pidfds or inotify, one look a second: a dead component is back within about a second,
# and watching ten pid files costs a fraction of a millisecond per look (part of the watching budget).
TICK_S = 1.0
# With them, a look anyway this often, for what no event reports: a pid file in a directory that
# did not exist when watched, an inotify queue or watch lost, a pidfd that could not be opened
# for a pid that has since changed. Rare enough to cost nothing, soon enough that nothing stays
# unnoticed for long.
SAFETY_S = 10.0
# A component that ran this long before dying is restarted at once; one that dies sooner backs off.
STABLE_S = 10.0
MAX_BACKOFF_S = 30.0

RESTARTS = "benchwatch_component_restarts_total"
RUNNING = "benchwatch_component_running"


@dataclass
class ComponentSpec:
    """How to start one component again: what ``Popen`` needs, and where its pid is."""

    name: str
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: str | None = None
    user: str | None = None
    log_file: str | None = None
    pid_file: str | None = None  # written by whoever starts it
    pid_source: str | None = None  # read instead when the program writes its own (first word is the pid)

    @property
    def pid_path(self) -> str | None:
        return self.pid_source or self.pid_file


def _write_private(path: str, data: dict) -> None:
    write_private(path, json.dumps(data, indent=2, sort_keys=True))


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def register(directory: str, spec: ComponentSpec) -> None:
    """Add or replace a component in a supervisor's list (the supervisor sees the file replaced at once)."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, SPECS)
    specs = _read_json(path)
    specs[spec.name] = {k: v for k, v in spec.__dict__.items() if k != "name"}
    _write_private(path, specs)


def retain(directory: str, names: list[str]) -> None:
    """Drop every component not in ``names`` from a supervisor's list: what an earlier configuration ran
    (another engine, an agent's instance since removed) is not started again."""
    path = os.path.join(directory, SPECS)
    specs = _read_json(path)
    kept = {name: spec for name, spec in specs.items() if name in names}
    if kept != specs:
        _write_private(path, kept)


class paused:
    """``with supervisor.paused(dir):`` no restarts meanwhile (or until this process dies): up starts what is down."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, PAUSE)

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
        with open(self.path, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
        return self

    def __exit__(self, *exc):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def read_state(directory: str) -> dict[str, dict]:
    """What the supervisor last recorded per component (restarts and when); {} before it ever ran."""
    return _read_json(os.path.join(directory, STATE))


def spawn(spec: ComponentSpec) -> subprocess.Popen:
    """Start a component as its spec says: own session, output appended to its log, pid file written."""
    log_f = open(spec.log_file, "ab") if spec.log_file else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(spec.argv, stdin=subprocess.DEVNULL, stdout=log_f, stderr=log_f, env=spec.env,
                                start_new_session=True, cwd=spec.cwd, user=spec.user, group=spec.user,
                                extra_groups=[] if spec.user else None)
    finally:
        if spec.log_file:
            log_f.close()  # type: ignore[union-attr]
    if spec.pid_file:
        # Replaced at once, never truncated then written: a supervisor that looks in between would
        # read no pid, take the component for dead and start a second one.
        tmp = f"{spec.pid_file}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{proc.pid}\n")
        os.replace(tmp, spec.pid_file)
    return proc


def _empty(path: str) -> bool:
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return False


@dataclass
class _Watch:
    restarts: int = 0
    streak: int = 0  # deaths in a row that came within STABLE_S of a start
    started: float | None = None  # when we last started it (monotonic)
    next_attempt: float = 0.0  # monotonic time before which it is not started again
    down_since: float | None = None
    last_restart: float | None = None  # wall clock, for status
    last_exit: str | None = None
    last_error: str | None = None
    child: subprocess.Popen | None = field(default=None, repr=False)
    pid: int | None = None  # the live process last seen, whose pidfd is held


class Supervisor:
    def __init__(self, directory: str, clock: Callable[[], float] = time.monotonic, *,
                 use_pidfd: bool = True, use_inotify: bool = True):
        self.directory = directory
        self.clock = clock
        self.use_pidfd = use_pidfd and hasattr(os, "pidfd_open")
        self.use_inotify = use_inotify
        self.waker: Waker | None = None  # run()'s: an inotify instance is a scarce thing to hold idle
        self.paused_by: int | None = None  # the live process holding paused.pid, last seen
        self.pidfds: dict[str, tuple[int, int]] = {}  # component (or PAUSE) -> (pid, pidfd)
        self._unheld: set[tuple[str, int]] = set()  # pidfds that could not be opened, warned of
        # Why the loop woke: exit (a watched process ended), files, wake (stop), http, backoff,
        # safety, tick (a look for want of events); for the tests and for anyone asking why it ran.
        self.wakes: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.specs: dict[str, ComponentSpec] = {}
        self._specs_mtime: float | None = None
        self.watches: dict[str, _Watch] = {}
        for name, saved in read_state(directory).items():
            self.watches[name] = _Watch(restarts=int(saved.get("restarts", 0)), last_restart=saved.get("last_restart"),
                                        last_exit=saved.get("last_exit"))

    def _load_specs(self) -> None:
        path = os.path.join(self.directory, SPECS)
        try:
            mtime = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._specs_mtime:
            return
        self._specs_mtime = mtime
        specs = {}
        for name, raw in _read_json(path).items():
            try:
                specs[name] = ComponentSpec(name=name, **raw)
            except TypeError:
                log.error("component %s: unreadable entry in %s, not supervised", name, path)
        with self.lock:
            self.specs = specs
            for name in specs:
                self.watches.setdefault(name, _Watch())

    def pid(self, spec: ComponentSpec) -> int | None:
        watch = self.watches.get(spec.name)
        if watch and watch.child is not None and watch.child.poll() is None:
            return watch.child.pid  # our own child: poll() reaps it when it dies
        path = spec.pid_path
        pid = processes.read_pid(path) if path else None
        if pid is None and path and watch and processes.process_alive(watch.pid) and _empty(path):
            return watch.pid  # a pid file being written by another starter (truncated, not yet written)
        return pid if processes.process_alive(pid) else None

    def tick(self) -> None:
        self._load_specs()
        holder = processes.read_pid(os.path.join(self.directory, PAUSE))
        self.paused_by = holder if processes.process_alive(holder) else None
        if self.paused_by is not None:
            return  # up is at work
        now = self.clock()
        changed = False
        for name, spec in list(self.specs.items()):
            watch = self.watches[name]
            watch.pid = self.pid(spec)
            if watch.pid is not None:
                watch.down_since = None
                continue
            if watch.down_since is None:
                watch.down_since = now
                if watch.child is not None and watch.child.returncode is not None:
                    code = watch.child.returncode
                    watch.last_exit = f"signal {-code}" if code < 0 else f"exit code {code}"
                else:
                    watch.last_exit = "died"  # not our child: its status went to whoever started it
                quick = watch.started is not None and now - watch.started < STABLE_S
                watch.streak = watch.streak + 1 if quick else 0
                delay = 0.0 if watch.streak == 0 else min(2.0 ** (watch.streak - 1), MAX_BACKOFF_S)
                watch.next_attempt = now + delay
                log.warning("%s is not running (%s); starting it again in %.0f s", name, watch.last_exit, delay)
            if now < watch.next_attempt:
                continue
            try:
                watch.child = spawn(spec)
                watch.pid = watch.child.pid
                watch.last_error = None
            except OSError as e:
                watch.last_error = str(e)
                log.error("could not start %s: %s", name, e)
            watch.started = now
            watch.down_since = None
            watch.restarts += 1
            watch.last_restart = time.time()
            changed = True
            log.warning("restarted %s (restart %d)", name, watch.restarts)
        if changed:
            self.save_state()

    def save_state(self) -> None:
        with self.lock:
            state = {name: {"restarts": w.restarts, "last_restart": w.last_restart, "last_exit": w.last_exit,
                            "last_error": w.last_error} for name, w in self.watches.items()}
        try:
            _write_private(os.path.join(self.directory, STATE), state)
        except OSError as e:  # a full disk must not stop the restarts themselves
            log.error("could not save %s: %s", STATE, e)

    def metrics_text(self) -> bytes:
        lines = [f"# HELP {RESTARTS} Times the supervisor started a component again after it died.",
                 f"# TYPE {RESTARTS} counter"]
        with self.lock:
            items = sorted(self.watches.items())
            specs = dict(self.specs)
        for name, w in items:
            lines.append(f'{RESTARTS}{{component="{name}"}} {w.restarts}')
        lines += [f"# HELP {RUNNING} 1 if the component's process is alive, as the supervisor last saw it.",
                  f"# TYPE {RUNNING} gauge"]
        for name, w in items:
            if name in specs:
                lines.append(f'{RUNNING}{{component="{name}"}} {0 if w.down_since is not None else 1}')
        return ("\n".join(lines) + "\n").encode()

    def run(self, host: str, port: int, stop: threading.Event) -> None:
        supervisor = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = supervisor.metrics_text() if self.path.startswith("/metrics") else b"benchwatch supervisor: /metrics\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                pass

        httpd = ThreadingHTTPServer((host, port), Handler)
        httpd.daemon_threads = True
        # Accepted by the loop below when the socket is readable (each request then has its own
        # thread): serve_forever would wake twice a second to look for a shutdown.
        httpd.timeout = 0
        listener = httpd.fileno()
        self.waker = waker = Waker(use_inotify=self.use_inotify)
        log.info("supervising %s; metrics on http://%s:%d/metrics", os.path.join(self.directory, SPECS), host, port)
        try:
            look, ended = True, False
            while not stop.is_set():
                if look:
                    self.tick()
                    ended = self._follow()
                timeout, why = (0.0, "exit") if ended else self._timeout()
                woke = waker.wait(timeout, [listener, *(fd for _, fd in self.pidfds.values())])
                causes = [why] if not woke else []
                causes += ["wake"] * woke.woken + ["files"] * woke.changed
                ended_fds = [fd for fd in woke.fds if fd != listener]
                if ended_fds:
                    # Done with: a pid the next look still finds alive is another process (the pid
                    # reused), and a readable pidfd kept in the wait would wake it without end.
                    self._close_pidfds({}, only=ended_fds)
                    causes.append("exit")
                if listener in woke.fds:
                    httpd.handle_request()
                    causes.append("http")
                self.wakes.update(causes)
                look = causes != ["http"]  # a scrape alone changes nothing to look at
                ended = False
        finally:
            self.save_state()
            self._close_pidfds({})
            httpd.server_close()
            self.waker = None
            waker.close()
            log.info("stopped (components keep running)")

    def wake(self) -> None:
        """End run()'s current wait now, e.g. after setting its stop event (safe from a signal handler)."""
        waker = self.waker
        if waker is None:
            return  # not waiting yet: run() looks at its stop event before it waits
        try:
            waker.wake()
        except OSError:
            pass  # stopped and closed meanwhile

    def _follow(self) -> bool:
        """After a look: hold a pidfd of each process to wait on, and watch the files to wait on.

        Returns True when a process ended before its pidfd could be opened: look again now.
        """
        paths = [os.path.join(self.directory, SPECS), os.path.join(self.directory, PAUSE)]
        with self.lock:
            specs = list(self.specs.values())
        paths += [spec.pid_path for spec in specs if spec.pid_path]
        assert self.waker is not None  # called by run()
        self.waker.watch(paths)
        if self.paused_by is not None:
            # Only the end of the pause matters: a component that dies meanwhile is up's to start,
            # and its pidfd, readable from then on, would wake this loop again and again.
            wanted = {PAUSE: self.paused_by}
        else:
            pids = {s.name: self.watches[s.name].pid for s in specs}
            wanted = {name: pid for name, pid in pids.items() if pid is not None}
        self._close_pidfds(wanted)
        ended = False
        for key, pid in wanted.items():
            if key in self.pidfds or not self.use_pidfd:
                continue
            try:
                self.pidfds[key] = (pid, os.pidfd_open(pid))
            except OSError as e:
                if e.errno == errno.ESRCH and not processes.process_alive(pid):
                    ended = True  # gone (and reaped) since the look
                elif e.errno == errno.ENOSYS:
                    self.use_pidfd = False
                    log.info("pidfd_open is not available (Linux < 5.3): looking every %.0f s instead", TICK_S)
                elif (key, pid) not in self._unheld:  # once, not at every look
                    self._unheld.add((key, pid))
                    log.warning("cannot hold a pidfd of %s (pid %d): %s; looking every %.0f s at it", key, pid, e, TICK_S)
        return ended

    def _close_pidfds(self, wanted: dict[str, int], only: list[int] | None = None) -> None:
        """Close the pidfds of processes no longer wanted (ended, or a pid file now names another)."""
        for key, (pid, fd) in list(self.pidfds.items()):
            if wanted.get(key) != pid and (only is None or fd in only):
                del self.pidfds[key]
                os.close(fd)

    def _timeout(self) -> tuple[float, str]:
        """How long the loop may sleep if nothing happens, and what for."""
        if self.waker is None or not self.waker.active:
            return TICK_S, "tick"  # components.json and paused.pid are seen only by looking
        if self.paused_by is not None:
            return (SAFETY_S, "safety") if PAUSE in self.pidfds else (TICK_S, "tick")
        timeout, why = SAFETY_S, "safety"
        now = self.clock()
        with self.lock:
            names = list(self.specs)
        for name in names:
            watch = self.watches[name]
            if name in self.pidfds:
                continue
            if watch.down_since is not None:  # waiting out its backoff
                if watch.next_attempt - now < timeout:
                    timeout, why = max(0.0, watch.next_attempt - now), "backoff"
            elif TICK_S < timeout:
                timeout, why = TICK_S, "tick"  # alive but without a pidfd, or a start that failed
        return timeout, why


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="benchwatch supervise",
                                     description="Restart the components listed in DIR/components.json when they die (started by up).")
    parser.add_argument("--dir", required=True, help="the supervisor's directory (components.json, state.json)")
    from benchwatch.stack.config import DEFAULT_PORTS, LISTEN_HOST

    parser.add_argument("--listen", default=f"{LISTEN_HOST}:{DEFAULT_PORTS['supervisor']}", help="address of /metrics")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, _, port = args.listen.rpartition(":")
    stop = threading.Event()
    sup = Supervisor(args.dir)

    def stopping(*_):
        stop.set()
        sup.wake()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stopping)
    sup.run(host or "127.0.0.1", int(port), stop)
    return 0
