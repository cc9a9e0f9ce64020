"""The supervisor (issue 12): restarts dead components at once, backs off when they keep dying, counts."""

from __future__ import annotations

import os
import sys

from benchwatch.stack import supervisor
from benchwatch.stack.supervisor import ComponentSpec, Supervisor
from benchwatch.util import processes


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def crasher(tmp_path, name="crasher") -> ComponentSpec:
    return ComponentSpec(name=name, argv=[sys.executable, "-c", "import sys; sys.exit(3)"],
                         log_file=str(tmp_path / f"{name}.log"), pid_file=str(tmp_path / f"{name}.pid"))


def dead(sup: Supervisor, name: str) -> bool:
    w = sup.watches[name]
    return w.child is not None and processes.wait_until(lambda: w.child.poll() is not None, 10, 0.01)


def test_restarts_at_once_then_backs_off(tmp_path):
    d = str(tmp_path / "sup")
    supervisor.register(d, crasher(tmp_path))
    assert oct(os.stat(os.path.join(d, supervisor.SPECS)).st_mode & 0o777) == "0o600"
    clock = Clock()
    sup = Supervisor(d, clock=clock)
    sup.tick()  # never started: started at once
    assert sup.watches["crasher"].restarts == 1
    delays = []
    for _ in range(7):
        assert dead(sup, "crasher")
        sup.tick()  # notices the death, schedules the next start
        w = sup.watches["crasher"]
        assert w.last_exit == "exit code 3"
        delays.append(w.next_attempt - clock.now)
        clock.now = w.next_attempt
        sup.tick()
    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert sup.watches["crasher"].restarts == 8
    assert supervisor.read_state(d)["crasher"]["restarts"] == 8  # kept for status and the next supervisor
    assert b'benchwatch_component_restarts_total{component="crasher"} 8' in sup.metrics_text()


def test_a_component_that_ran_long_enough_comes_back_at_once(tmp_path):
    d = str(tmp_path / "sup")
    supervisor.register(d, crasher(tmp_path))
    clock = Clock()
    sup = Supervisor(d, clock=clock)
    sup.tick()
    assert dead(sup, "crasher")
    clock.now += supervisor.STABLE_S + 1
    sup.tick()
    assert sup.watches["crasher"].restarts == 2


def test_live_components_are_left_alone_and_counts_survive_a_new_supervisor(tmp_path):
    d = str(tmp_path / "sup")
    spec = ComponentSpec(name="sleeper", argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                         pid_file=str(tmp_path / "sleeper.pid"))
    proc = supervisor.spawn(spec)  # started by someone else (up): found by its pid file
    try:
        supervisor.register(d, spec)
        sup = Supervisor(d)
        sup.tick()
        assert sup.watches["sleeper"].restarts == 0
        assert b'benchwatch_component_running{component="sleeper"} 1' in sup.metrics_text()
    finally:
        processes.stop_pid(proc.pid)
    sup.tick()
    assert sup.watches["sleeper"].restarts == 1
    again = Supervisor(d)
    assert again.watches["sleeper"].restarts == 1
    processes.stop_pid(sup.watches["sleeper"].child.pid)
