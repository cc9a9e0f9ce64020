"""A run's profile recorded: ``perf record`` over every CPU while the run runs, folded once it ended.

Why these choices (measured on the bench VMs, docs/benchmarks.md "CPU profiles"):
- ``-e cpu-clock``: the VMs have no hardware PMU; the software clock event samples on-CPU time.
- ``-a``: every process of the host, so that a dip's profile shows who took the CPUs, not only the
  database's share falling.
- ``--call-graph dwarf``: Debian's postgres and mariadbd are built without frame pointers, so a
  frame-pointer chain stops after the leaf; DWARF unwinding from .eh_frame names the callers.
- ``-F 49`` and an 8 KiB stack copy: the profiler's cost and its disk, against callers resolved.
- ``--no-buildid``: perf script runs right after, on the same binaries, so their build ids are not needed;
  collecting them at the end read all of perf.data again and doubled perf's CPU.
- ``-k CLOCK_MONOTONIC``: sample times on the clock Python's time.monotonic() reads, so that a sample
  is placed on the run's (epoch) time axis by one offset taken at the start.

The database's processes are told apart by kind (every PostgreSQL process is ``postgres`` to the
kernel): a thread reads the process title (/proc/PID/cmdline) of each server process every second
while the run runs, and the engine says what kind it is (``Engine.process_kind``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from benchwatch import engines, loadgens
from benchwatch.profile import fold as folding

FREQUENCY = int(os.environ.get("BENCHWATCH_PROFILE_FREQUENCY", "49"))
STACK_BYTES = int(os.environ.get("BENCHWATCH_PROFILE_STACK_BYTES", "8192"))
KINDS_EVERY_S = 1.0
DIR = "profile"
SLICES = "slices.tsv.gz"
SUMMARY = "profile.json"
PERF_DATA = "perf.data"


def perf_argv(perf: str, data: str, frequency: int = FREQUENCY, stack_bytes: int = STACK_BYTES) -> list[str]:
    return [perf, "record", "-e", "cpu-clock", "-F", str(frequency), "-a", "-k", "CLOCK_MONOTONIC",
            "--call-graph", f"dwarf,{stack_bytes}", "--no-buildid", "-o", data]


def script_argv(perf: str, data: str) -> list[str]:
    # --no-inline: naming inlined frames runs addr2line per address (minutes); the functions are named without it.
    return [perf, "script", "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso", "--no-inline"]


def _parent(root: str, pid: str) -> int | None:
    try:
        with open(os.path.join(root, pid, "stat"), "rb") as f:
            data = f.read()
        return int(data[data.rfind(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


class KindSampler:
    """pid -> kind of the database's processes, read every second from /proc while the run runs.

    ``server_pid``: the run's server (its postmaster, its mariadbd); then only it and its children are the
    database, and another server's processes on the host (another engineer's test, say) are "other"."""

    def __init__(self, root: str = "/proc", server_pid: int | None = None):
        self.root = root
        self.server_pid = server_pid
        self.others: set[int] = set()
        self.seen: set[int] = set()   # every pid looked at once: a process keeps its name and kind
        self.by_comm: dict[str, list[engines.Engine]] = {}
        for engine in engines.load_engines().values():
            for comm in engine.server_processes:
                self.by_comm.setdefault(comm, []).append(engine)
        self.kinds: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scan(self) -> None:
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if not name.isdigit() or int(name) in self.seen:
                continue  # a process keeps its kind; a pid reused within a run is rare enough
            self.seen.add(int(name))
            try:
                with open(os.path.join(self.root, name, "comm"), encoding="utf-8", errors="replace") as f:
                    comm = f.read().strip()
                if comm not in self.by_comm:
                    continue
                with open(os.path.join(self.root, name, "cmdline"), "rb") as f:
                    cmdline = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            if self.server_pid is not None and int(name) != self.server_pid \
                    and _parent(self.root, name) != self.server_pid:
                self.others.add(int(name))
                continue
            kind = next((k for e in self.by_comm[comm] if (k := e.process_kind(cmdline))), None)
            self.kinds[int(name)] = kind or "server"

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            self._stop.wait(KINDS_EVERY_S)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="profile-kinds", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.scan()


def load_generator_comms() -> frozenset[str]:
    return frozenset(os.path.basename(p)[:15] for g in loadgens.load_generators().values() for p in g.programs)


def server_comms() -> frozenset[str]:
    return frozenset(c for e in engines.load_engines().values() for c in e.server_processes)


class Profiler:
    """``perf record`` beside one run: start() before the tool starts, finish() after it ended."""

    def __init__(self, run_path: str, say: Callable[[str], None], perf: str | None = None,
                 server_pid: int | None = None):
        self.dir = os.path.join(run_path, DIR)
        self.say = say
        # BENCHWATCH_PERF: another perf than PATH's (a build of its own; a stand-in that refuses, in the tests).
        self.perf = perf or os.environ.get("BENCHWATCH_PERF") or shutil.which("perf")
        self.proc: subprocess.Popen | None = None
        self.kinds = KindSampler(server_pid=server_pid)
        self.offset = 0.0
        self.started = 0.0
        self.reason = ""

    @property
    def data(self) -> str:
        return os.path.join(self.dir, PERF_DATA)

    def start(self) -> bool:
        """perf record started: True; else False, and one line said why (the run goes on unprofiled)."""
        if not self.perf:
            return self._off("perf is not installed (Debian: apt-get install linux-perf)")
        os.makedirs(self.dir, exist_ok=True)
        self.log = open(os.path.join(self.dir, "perf.log"), "wb")  # closed in finish
        self.offset = time.time() - time.monotonic()
        self.started = time.time()
        try:
            self.proc = subprocess.Popen(perf_argv(self.perf, self.data), stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            self.log.close()
            return self._off(f"perf record cannot start: {e.strerror or e}")
        # Refused (perf_event_paranoid, no permission, no such event): perf ends at once with its reason.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                return self._off(f"perf record refused (exit {self.proc.returncode}): {self._perf_said()}")
            if os.path.exists(self.data) and os.path.getsize(self.data) > 0:
                break
            time.sleep(0.05)
        self.kinds.start()
        return True

    def _perf_said(self) -> str:
        try:
            with open(os.path.join(self.dir, "perf.log"), encoding="utf-8", errors="replace") as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            return "no reason given"
        return next((line for line in lines if "paranoid" in line or "ermission" in line or "rror" in line),
                    lines[0] if lines else "no reason given")

    def _off(self, reason: str) -> bool:
        self.reason = reason
        self.say(f"profiling off, the run goes on unprofiled: {reason}")
        return False

    def finish(self) -> dict:
        """perf stopped and its data folded into the run directory; returns what profile.json says."""
        assert self.proc is not None and self.perf is not None
        ended = time.time()
        self.kinds.stop()
        self.proc.send_signal(signal.SIGINT)
        try:
            _pid, status, usage = os.wait4(self.proc.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            usage = None
        self.log.close()
        record_cpu = (usage.ru_utime + usage.ru_stime) if usage else None
        summary: dict = {
            "tool": "perf", "event": "cpu-clock", "frequency": FREQUENCY, "call_graph": f"dwarf,{STACK_BYTES}",
            "argv": perf_argv("perf", PERF_DATA), "start": self.started, "end": ended,
            "record_cpu_seconds": round(record_cpu, 3) if record_cpu is not None else None,
            "kinds": {str(pid): kind for pid, kind in sorted(self.kinds.kinds.items())},
            "server_pid": self.kinds.server_pid,
            "database": (f"the run's server (pid {self.kinds.server_pid}) and its children"
                         if self.kinds.server_pid is not None else "every server process of the host (the run's "
                         "server not known)"),
            "other_servers": len(self.kinds.others),
        }
        try:
            summary["perf_data_bytes"] = os.path.getsize(self.data)
        except OSError:
            summary["error"] = f"perf record wrote no data ({self._perf_said()})"
            self._write(summary)
            return summary
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        kinds = folding.Kinds(server_comms(), load_generator_comms(), self.kinds.kinds, frozenset(self.kinds.others))
        script = subprocess.Popen(script_argv(self.perf, self.data), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, errors="replace")
        out, err = script.stdout, script.stderr
        assert out is not None and err is not None
        errors: list[str] = []
        reader = threading.Thread(target=lambda: errors.extend(err), daemon=True)
        reader.start()
        offset = self.offset
        folded = folding.fold(out, kinds, self.started, lambda t: t + offset)
        code = script.wait()
        reader.join(5)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        path = os.path.join(self.dir, SLICES)
        folded.write(path)
        summary.update({
            "fold_seconds": round(time.monotonic() - t0, 3),
            "fold_cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
            "slice_s": folded.slice_s, "samples": folded.samples, "unknown_leaf": folded.unknown_leaf,
            "frames": folded.frames, "unknown_frames": folded.unknown_frames, "slices_bytes": os.path.getsize(path),
            "by_group": by_group(folded),
        })
        if code != 0:
            summary["error"] = f"perf script exited {code}: " + " ".join(e.strip() for e in errors[-3:])
        lost = [e.strip() for e in errors if "lost" in e.lower()]
        if lost:
            summary["perf_lost"] = lost[:3]
        os.unlink(self.data)  # the folded slices are what is kept: perf.data is ~1 MB per second of run
        self._write(summary)
        return summary

    def _write(self, summary: dict) -> None:
        with open(os.path.join(self.dir, SUMMARY), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)


def by_group(folded: folding.Folded) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_index, group, _kind), stacks in folded.slices.items():
        out[group] = out.get(group, 0) + sum(stacks.values())
    return out


def read_summary(run_path: str) -> dict | None:
    try:
        with open(os.path.join(run_path, DIR, SUMMARY), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
