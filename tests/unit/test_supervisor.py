"""The supervisor (issue 12): restarts dead components at once, backs off when they keep dying, counts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from benchwatch.stack import supervisor
from benchwatch.stack.supervisor import ComponentSpec, Supervisor
from benchwatch.util import net, processes


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


# -- waiting on events (issue 13): pidfds of the processes, inotify on the files, no 1 s tick ----------


def sleeper(tmp_path, name="sleeper") -> ComponentSpec:
    return ComponentSpec(name=name, argv=["sleep", "60"], log_file=str(tmp_path / f"{name}.log"),
                         pid_file=str(tmp_path / f"{name}.pid"))


class Running:
    """A supervisor's run() loop in a thread, stopped (and everything it started) on exit."""

    def __init__(self, sup: Supervisor, *others: subprocess.Popen):
        self.sup, self.others = sup, list(others)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=sup.run, args=("127.0.0.1", net.free_port(), self.stop))

    def __enter__(self) -> Supervisor:
        self.thread.start()
        return self.sup

    def __exit__(self, *exc):
        self.stop.set()
        self.sup.wake()
        self.thread.join(10)
        assert not self.thread.is_alive(), "run() ends when woken after stop is set"
        for w in self.sup.watches.values():
            if w.child is not None:
                processes.stop_pid(w.child.pid)
        for p in self.others:
            processes.stop_pid(p.pid)


def watching(sup: Supervisor, name: str, pid: int) -> bool:
    return processes.wait_until(lambda: sup.pidfds.get(name, (None, None))[0] == pid, 10, 0.01)


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()  # the test is its parent: reaped, so it is gone, not a zombie


def test_a_killed_component_wakes_the_supervisor_at_once_and_an_idle_stretch_wakes_it_not_at_all(tmp_path):
    d = str(tmp_path / "sup")
    spec = sleeper(tmp_path)
    supervisor.register(d, spec)
    first = supervisor.spawn(spec)  # started by up, not by the supervisor
    sup = Supervisor(d)
    with Running(sup, first):
        assert watching(sup, "sleeper", first.pid)
        before = dict(sup.wakes)
        time.sleep(3)  # the idle stretch being measured, not a wait for readiness
        assert dict(sup.wakes) == before, "an idle supervisor sleeps: no tick, no look"
        assert supervisor.SAFETY_S > 3
        t0 = time.monotonic()
        kill(first)
        assert processes.wait_until(lambda: sup.watches["sleeper"].restarts == 1, 10, 0.005)
        delay = time.monotonic() - t0
        assert sup.wakes["exit"] == before.get("exit", 0) + 1  # woken by the pidfd, not by a tick
        assert delay < 0.9, f"restarted {delay:.3f} s after the kill"  # a 1 s tick is 0.5 s on average
        assert sup.wakes["tick"] == 0 and sup.wakes["safety"] == 0
        second = sup.watches["sleeper"].child
        assert watching(sup, "sleeper", second.pid)  # the new process is watched
        # Dead again within STABLE_S: it backs off 1 s, and the loop sleeps just that long.
        kill(second)
        assert processes.wait_until(lambda: sup.watches["sleeper"].restarts == 2, 10, 0.01)
        assert sup.wakes["backoff"] == 1
        assert sup.wakes["tick"] == 0 and sup.wakes["safety"] == 0
        # A component registered while it runs is started at once: components.json was replaced.
        supervisor.register(d, sleeper(tmp_path, "another"))
        assert processes.wait_until(lambda: sup.watches.get("another") and sup.watches["another"].restarts == 1, 10, 0.01)
        assert sup.wakes["files"] >= 1 and sup.wakes["tick"] == 0
    assert supervisor.read_state(d)["sleeper"]["restarts"] == 2


def test_no_restart_while_paused_and_one_at_once_when_the_pause_ends(tmp_path):
    d = str(tmp_path / "sup")
    spec = sleeper(tmp_path)
    supervisor.register(d, spec)
    first = supervisor.spawn(spec)
    sup = Supervisor(d)
    with Running(sup, first):
        assert watching(sup, "sleeper", first.pid)
        with supervisor.paused(d):
            assert watching(sup, supervisor.PAUSE, os.getpid())
            assert "sleeper" not in sup.pidfds  # a death while paused is up's business: it must not wake us
            kill(first)
            time.sleep(0.5)  # the stretch in which nothing may happen
            assert sup.watches["sleeper"].restarts == 0
            files = sup.wakes["files"]
        assert processes.wait_until(lambda: sup.watches["sleeper"].restarts == 1, 10, 0.005)
        assert sup.wakes["files"] > files  # paused.pid deleted: seen by inotify, not by a tick
        assert sup.wakes["tick"] == 0 and sup.wakes["safety"] == 0
        # A pause whose holder dies without ending it (SIGKILL) ends when the holder's pidfd says so.
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                                   "from benchwatch.stack import supervisor\n"
                                   "with supervisor.paused(sys.argv[1]):\n    print('paused', flush=True); time.sleep(60)", d],
                                  stdout=subprocess.PIPE)
        assert holder.stdout.readline() == b"paused\n"
        assert watching(sup, supervisor.PAUSE, holder.pid)
        child = sup.watches["sleeper"].child
        # Read before the kill: one turn of the loop that woke for the child's exit can also take the holder's
        # (a busy machine), and a count read between the two kills then never grows.
        exits = sup.wakes["exit"]
        child.kill()
        kill(holder)
        holder.stdout.close()
        assert os.path.exists(os.path.join(d, supervisor.PAUSE))
        assert processes.wait_until(lambda: sup.watches["sleeper"].restarts == 2, 10, 0.005)
        assert sup.wakes["exit"] > exits
        assert sup.wakes["tick"] == 0 and sup.wakes["safety"] == 0


def test_a_component_started_again_by_someone_else_is_followed_to_its_new_pid(tmp_path):
    d = str(tmp_path / "sup")
    spec = sleeper(tmp_path)
    supervisor.register(d, spec)
    old = supervisor.spawn(spec)
    running = Running(Supervisor(d), old)
    with running as sup:
        assert watching(sup, "sleeper", old.pid)
        new = supervisor.spawn(spec)  # rewrites the pid file; the old process lives on
        running.others.append(new)
        assert watching(sup, "sleeper", new.pid), "the pid file's change is seen and the new process watched"
        kill(old)
        kill(new)
        assert processes.wait_until(lambda: sup.watches["sleeper"].restarts == 1, 10, 0.005)
        assert sup.wakes["exit"] >= 1
        assert sup.wakes["tick"] == 0 and sup.wakes["safety"] == 0


def test_without_pidfds_or_inotify_it_looks_every_second_as_before(tmp_path):
    for i, kwargs in enumerate(({"use_pidfd": False}, {"use_pidfd": False, "use_inotify": False})):
        d = str(tmp_path / f"sup{i}")
        spec = sleeper(tmp_path, f"sleeper{i}")
        supervisor.register(d, spec)
        first = supervisor.spawn(spec)
        with Running(Supervisor(d, **kwargs), first) as sup:
            assert processes.wait_until(lambda: sup.wakes["tick"] >= 1, 10, 0.01)
            assert not sup.pidfds
            kill(first)
            assert processes.wait_until(lambda: sup.watches[spec.name].restarts == 1, 10, 0.01)
            assert sup.wakes["exit"] == 0
            supervisor.register(d, sleeper(tmp_path, f"another{i}"))
            assert processes.wait_until(lambda: f"another{i}" in sup.watches and sup.watches[f"another{i}"].restarts == 1,
                                        10, 0.01)
            assert sup.wakes["safety"] == 0


def test_sigterm_stops_the_supervisor_at_once_and_metrics_are_served_meanwhile(tmp_path):
    d = str(tmp_path / "sup")
    spec = sleeper(tmp_path)
    supervisor.register(d, spec)
    port = net.free_port()
    proc = subprocess.Popen([sys.executable, "-m", "benchwatch", "supervise", f"--dir={d}", f"--listen=127.0.0.1:{port}"],
                            stderr=subprocess.DEVNULL)
    try:
        def scraped() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    return b'benchwatch_component_running{component="sleeper"} 1' in r.read()
            except OSError:
                return False

        assert processes.wait_until(scraped, 20, 0.05)
        assert scraped()  # and again: the loop accepts each scrape
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert time.monotonic() - t0 < supervisor.SAFETY_S / 2, "woken by the signal, not at the next look"
    finally:
        processes.stop_pid(proc.pid)
        processes.stop_pid(processes.read_pid(spec.pid_file))
    assert supervisor.read_state(d)["sleeper"]["restarts"] == 1


def test_retain_drops_what_the_configuration_no_longer_runs(tmp_path):
    # up --engine mariadb, down, up: the MariaDB server of the first stack must not be started again.
    d = str(tmp_path / "sup")
    for name in ("mariadb", "prometheus", "postgres"):
        supervisor.register(d, crasher(tmp_path, name))
    supervisor.retain(d, ["postgres", "prometheus", "node_exporter"])
    sup = Supervisor(d, clock=Clock())
    sup._load_specs()
    assert sorted(sup.specs) == ["postgres", "prometheus"]
    assert oct(os.stat(os.path.join(d, supervisor.SPECS)).st_mode & 0o777) == "0o600"
