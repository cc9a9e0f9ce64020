"""One process manager for the native stack and the agent: components started in order, each healthy
before the next, stopped in reverse order, every long-running one handed to a supervisor.

A component is a name in one state dir; what it takes to run it is the same for both sets:

  argv, env, user        given when it starts (:meth:`ProcessManager.spawn`), recorded for the supervisor
  logs/<name>.log        its output (:meth:`log_file`; a server may log elsewhere)
  pids/<name>.pid        written when we start it, or the pid file it writes itself (:meth:`pid_source`)
  health                 its HTTP endpoint (:meth:`health_url`) or a check of its own (:meth:`check`)
  stop signal            SIGTERM, or a server's own clean shutdown (:meth:`stop_signal`)
  supervisor/            components.json (what the supervisor restarts) and state.json (its restarts)

A subclass says which components it runs, in order (:meth:`components`, the supervisor last), and
how each starts (:meth:`start_component`); the rest is here. ``benchwatch.stack.native.Stack`` and
``benchwatch.stack.agent.Agent`` are the two subclasses.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from benchwatch.stack import supervisor
from benchwatch.stack.config import LISTEN_HOST
from benchwatch.util import net, processes
from benchwatch.util.errors import StackError

SUPERVISOR = "supervisor"
# How long a component may take to become healthy after its start, and one found running.
START_TIMEOUT_S = 60.0
RUNNING_TIMEOUT_S = 20.0
# How long a component has to exit after its stop signal before SIGKILL; a database server
# (one that writes its own pid file) gets longer, for its shutdown checkpoint.
STOP_TIMEOUT_S = 20.0
SERVER_STOP_TIMEOUT_S = 60.0
# The environment every component starts with (plus its own variables): nothing else of ours leaks in.
BASE_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "GOGC")
# The Go garbage collector's target for the daemons started with base_env (Alertmanager and the exporters;
# ignored by the others): their heaps are a few MB, and at Go's default (100) they collect after every few
# requests. 400 measured 0.3-0.45 ms of CPU a second less each at one request a second, for 5-9 MB more
# (docs/benchmarks.md, "The central stack, 2026-11-29"). A GOGC in benchwatch's own environment wins.
GO_GC_PERCENT = "400"


class Settings(Protocol):
    """What the manager reads of its owner's configuration (stack.json's Config, agent.json's AgentConfig)."""

    state_dir: str
    ports: dict[str, int]  # component -> its port on 127.0.0.1


@dataclass
class ProcessManager:
    """Components of one state dir, started, watched and stopped by PID; see the module's docstring."""

    if TYPE_CHECKING:
        cfg: Settings  # a subclass's own field

    # The pid of each server we started whose pid file it writes itself, a moment after it starts.
    _popen_pid: dict[str, int] = field(init=False, default_factory=dict, repr=False)

    # -- what a subclass says ----------------------------------------------------------------

    @property
    def state_dir(self) -> str:
        return self.cfg.state_dir

    @property
    def ports(self) -> dict[str, int]:
        return self.cfg.ports

    def components(self) -> list[str]:
        """What runs, in start order; the supervisor last (it starts watching once all is up)."""
        raise NotImplementedError

    def start_component(self, component: str) -> None:
        """Start one component (through :meth:`spawn`)."""
        raise NotImplementedError

    def after_start(self, component: str) -> None:
        """Once the component is healthy."""

    def after_up(self) -> None:
        """Once every component is healthy (still undone if this fails)."""

    def health_url(self, component: str) -> str | None:
        """The URL that answers 200 when the component is healthy; None: it has none."""
        return None

    def check(self, component: str) -> bool | None:
        """Whether a running component answers, for one not judged by a URL (a database server)."""
        return None

    def pid_source(self, component: str) -> str | None:
        """The pid file the component writes itself (a database server); None: we write pids/<name>.pid."""
        return None

    def log_file(self, component: str) -> str:
        return self.path("logs", f"{component}.log")

    def stop_signal(self, component: str) -> signal.Signals:
        return signal.SIGTERM

    # -- where things are --------------------------------------------------------------------

    def path(self, *parts: str) -> str:
        return os.path.join(self.state_dir, *parts)

    def pid_file(self, component: str) -> str:
        return self.path("pids", f"{component}.pid")

    def address(self, component: str) -> str:
        return f"{LISTEN_HOST}:{self.ports[component]}"

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in BASE_ENV}
        env.setdefault("GOGC", GO_GC_PERCENT)
        return env

    # -- state -------------------------------------------------------------------------------

    def pid(self, component: str) -> int | None:
        pid = processes.read_pid(self.pid_source(component) or self.pid_file(component))
        return pid if processes.process_alive(pid) else None

    def healthy(self, component: str) -> bool:
        answer = self.check(component)
        if answer is not None:
            return answer
        url = self.health_url(component)
        return self.pid(component) is not None and url is not None and net.http_ok(url)

    def restarts(self) -> dict[str, dict]:
        """The supervisor's record per component: {"restarts": n, "last_restart": epoch, "last_exit": "..."}."""
        return supervisor.read_state(self.path(SUPERVISOR))

    def component_status(self, component: str, restarts: Mapping[str, Mapping]) -> dict:
        """A component's entry of ``status --json``."""
        return {"port": self.ports.get(component), "pid": self.pid(component), "healthy": self.healthy(component),
                "log_file": self.log_file(component),
                "restarts": restarts.get(component, {}).get("restarts", 0),
                "last_restart": restarts.get(component, {}).get("last_restart")}

    # -- starting ----------------------------------------------------------------------------

    def component_spec(self, component: str, argv: list[str], env: dict[str, str] | None = None,
                       user: str | None = None) -> supervisor.ComponentSpec:
        """How the component is started, the same way by us and by the supervisor."""
        own = self.pid_source(component)
        return supervisor.ComponentSpec(
            name=component, argv=argv, env=env, cwd=self.state_dir, user=user, log_file=self.log_file(component),
            pid_file=None if own else self.pid_file(component), pid_source=own)

    def spawn(self, component: str, argv: list[str], env: dict[str, str] | None = None,
              user: str | None = None) -> int:
        spec = self.component_spec(component, argv, env, user)
        if component != SUPERVISOR:
            # Recorded before the start: a component that dies at once is still restarted.
            supervisor.register(self.path(SUPERVISOR), spec)
        pid = supervisor.spawn(spec).pid
        if spec.pid_source:
            self._popen_pid[component] = pid
        return pid

    def start_supervisor(self) -> None:
        self.spawn(SUPERVISOR, [sys.executable, "-m", "benchwatch", "supervise", f"--dir={self.path(SUPERVISOR)}",
                                f"--listen={self.address(SUPERVISOR)}"], env=self.base_env())

    def start_all(self) -> None:
        """Start every component that is not running, in order, each healthy before the next; on failure
        stop what this call started and raise. The supervisor pauses meanwhile (it would race us)."""
        for d in ("logs", "pids"):
            os.makedirs(self.path(d), exist_ok=True)
        components = self.components()
        with supervisor.paused(self.path(SUPERVISOR)):
            # What an earlier configuration ran (another engine, an instance since removed) is not restarted.
            supervisor.retain(self.path(SUPERVISOR), [c for c in components if c != SUPERVISOR])
            started: list[str] = []
            try:
                for component in components:
                    if self.pid(component) is not None:
                        if not self.wait_healthy(component, RUNNING_TIMEOUT_S):
                            raise StackError(f"{component} is running (pid {self.pid(component)}) but not healthy: "
                                             f"see {self.log_file(component)}")
                        continue
                    started.append(component)
                    self._start_healthy(component, "start")
                self.after_up()
            except BaseException:
                for component in reversed(started):
                    self.stop(component)
                raise

    def restart(self, component: str) -> None:
        """Stop and start one component, the supervisor paused meanwhile (it would race us): a server whose
        new settings need a restart (benchwatch sweep)."""
        with supervisor.paused(self.path(SUPERVISOR)):
            if self.pid(component) is not None:
                self.stop(component)
            self._start_healthy(component, "restart")

    def _start_healthy(self, component: str, what: str) -> None:
        """Start one component and wait until it is healthy (then its after_start), or say why not."""
        self.start_component(component)
        if not self.wait_healthy(component, START_TIMEOUT_S):
            raise StackError(f"{component} failed to {what}: {self.log_tail(component)} "
                             f"(log: {self.log_file(component)})")
        self.after_start(component)

    def wait_healthy(self, component: str, timeout: float) -> bool:
        return processes.wait_until(lambda: self.healthy(component), timeout, interval=0.1,
                                    abort=lambda: self.pid(component) is None and not self._starting(component))

    def _starting(self, component: str) -> bool:
        # A server writes its pid file (postmaster.pid, mariadbd.pid) a moment after it starts.
        return self.pid_source(component) is not None and processes.process_alive(self._popen_pid.get(component))

    def log_tail(self, component: str, lines: int = 3) -> str:
        """The most telling lines of a component's log: its errors if it logged any, else the last lines."""
        try:
            with open(self.log_file(component), encoding="utf-8", errors="replace") as f:
                tail = [line.strip() for line in f.readlines()[-200:] if line.strip()]
        except FileNotFoundError:
            return "no log"
        markers = ("level=error", "ERROR", "Error", "FATAL")
        errors = [line for line in tail if any(m in line for m in markers)]
        return " | ".join((errors or tail)[-lines:]) or "no output"

    # -- stopping ----------------------------------------------------------------------------

    def stop_all(self, components: list[str] | None = None) -> list[str]:
        """Stop what runs of ``components`` (default: all), in reverse start order: the supervisor first."""
        stopped = []
        for component in reversed(self.components() if components is None else components):
            if self.pid(component) is not None:
                self.stop(component)
                stopped.append(component)
        return stopped

    def stop(self, component: str) -> None:
        pid = self.pid(component)
        if self.pid_source(component):
            # A database server: its own clean shutdown, which removes its pid file.
            processes.stop_pid(pid, self.stop_signal(component), timeout=SERVER_STOP_TIMEOUT_S)
            return
        processes.stop_pid(pid, self.stop_signal(component), timeout=STOP_TIMEOUT_S)
        try:
            os.unlink(self.pid_file(component))
        except FileNotFoundError:
            pass

