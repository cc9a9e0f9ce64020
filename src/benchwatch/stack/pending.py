"""What a runner has still to write to the stores it shares, before it may be deleted (``benchwatch flush``).

A store that buffers writes adds a *source* here: a function, registered with :func:`source`, that looks
at the stack and answers how much of it is still to write (:class:`Outstanding`), or None when that store
has nothing to do with this stack (not configured, not running). ``flush`` asks every source in turn
until each answers zero, twice in a row (:data:`SETTLE_S` apart: a run that just ended may not be read
yet when the first answer comes), or its time is up.

A source whose store lives in a room below this one (a results database, a long-term series store) is
registered here by a function that calls into that room: the registry stays in one place, the import
goes down the floors.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchwatch.util import net

if TYPE_CHECKING:
    from benchwatch.stack.native import Stack

SETTLE_S = 2.0   # two answers of zero this far apart mean nothing more is on its way
POLL_S = 0.5
SAY_EVERY_S = 5.0  # what is left, said at most this often (a queue draining changes its count at every poll)

EXPORTER = "benchwatch_exporter"
# benchwatch.exporter.self_metrics.RW_PENDING (the daemon's floor is above this one; a unit test keeps them equal)
EXPORTER_PENDING = "benchwatch_exporter_remote_write_pending_samples"
EXPORTER_FINISHING = "benchwatch_exporter_runs_finishing"  # self_metrics.RUNS_FINISHING


@dataclass(frozen=True)
class Outstanding:
    what: str             # "the exporter's remote-write queue"
    left: int | None      # items still to write; None: the source could not be read (``why`` says why)
    unit: str = "samples"
    why: str = ""

    @property
    def done(self) -> bool:
        return self.left == 0

    def __str__(self) -> str:
        if self.left is None:
            return f"{self.what}: unknown ({self.why})"
        return f"{self.what}: {self.left:,} {self.unit} left" + (f" ({self.why})" if self.why else "")


Source = Callable[["Stack"], "Outstanding | None"]
SOURCES: dict[str, Source] = {}


def source(name: str) -> Callable[[Source], Source]:
    """Decorator: ``@source("results database") def results_pending(stack): ...``."""
    def add(fn: Source) -> Source:
        if name in SOURCES:
            raise ValueError(f"pending-writes source {name!r} registered twice")
        SOURCES[name] = fn
        return fn
    return add


def outstanding(stack: Stack, sources: dict[str, Source] | None = None) -> list[Outstanding]:
    """Every source's answer now (the sources with nothing to do here left out)."""
    out = []
    for fn in (SOURCES if sources is None else sources).values():
        answer = fn(stack)
        if answer is not None:
            out.append(answer)
    return out


@dataclass
class Waited:
    flushed: bool
    last: list[Outstanding]
    seconds: float


def wait(stack: Stack, timeout_s: float, sources: dict[str, Source] | None = None,
         say: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> Waited:
    """Until every source answered zero twice, SETTLE_S apart, or ``timeout_s`` passed."""
    start = clock()
    zero_since: float | None = None
    said, said_at = "", -SAY_EVERY_S
    while True:
        now = clock()
        last = outstanding(stack, sources)
        if all(o.done for o in last):
            if zero_since is None:
                zero_since = now
            if now - zero_since >= SETTLE_S or not last:
                return Waited(True, last, now - start)
        else:
            zero_since = None
            text = "; ".join(str(o) for o in last if not o.done)
            if say is not None and text != said and now - said_at >= SAY_EVERY_S:
                say(f"waiting: {text}")
                said, said_at = text, now
        if now - start >= timeout_s:
            # out of time: zero now still counts (a --timeout shorter than SETTLE_S), anything else does not
            return Waited(all(o.done for o in last), last, now - start)
        sleep(POLL_S)


def metric_value(exposition: str, name: str) -> float | None:
    """The value of the unlabelled sample ``name`` in Prometheus' text exposition; None when absent."""
    for line in exposition.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == name:
            try:
                return float(words[1])
            except ValueError:
                return None
    return None


def exporter_gauge(stack: Stack, what: str, name: str, unit: str) -> Outstanding | None:
    """The count an exporter gauge says is left; None when the stack's exporter is not running."""
    if EXPORTER not in stack.components() or stack.pid(EXPORTER) is None:
        return None  # not running: it holds nothing (what it had not sent is resent from the run files on its start)
    try:
        status, body = net.http_get(stack.cfg.url(EXPORTER) + "/metrics", timeout=5.0)
    except OSError as e:
        return Outstanding(what, None, unit, why=f"its /metrics did not answer: {e}")
    if status != 200:
        return Outstanding(what, None, unit, why=f"its /metrics answered HTTP {status}")
    value = metric_value(body.decode("utf-8", "replace"), name)
    if value is None:
        return Outstanding(what, None, unit, why=f"its /metrics has no {name}")
    return Outstanding(what, int(value), unit)


@source("the exporter's remote-write queue")
def exporter_backlog(stack: Stack) -> Outstanding | None:
    """The samples the stack's exporter holds for Prometheus (its gauge EXPORTER_PENDING): in its memory
    only, so a runner deleted before they are delivered loses them."""
    return exporter_gauge(stack, "the exporter's remote-write queue", EXPORTER_PENDING, "samples")


@source("the exporter's finishing runs")
def exporter_finishing(stack: Stack) -> Outstanding | None:
    """Runs that ended and whose end the exporter is still writing (series archived, the results record, the
    long-term store's completion, retried while that store is away: its gauge EXPORTER_FINISHING). Until
    then neither the results database nor the long-term store has the whole run."""
    return exporter_gauge(stack, "the exporter's finishing runs", EXPORTER_FINISHING, "runs")


@source("the results database")
def results_backlog(stack: Stack) -> Outstanding | None:
    """Runs and sweeps written on this disk and not yet in the results database (their markers: the
    exporter writes them through every 15 s while it runs), so a runner deleted first would lose them."""
    from benchwatch.results.pending import Pending
    from benchwatch.results.sweeps import PendingSweeps

    if stack.cfg.results_target() is None:
        return None  # no results database: nothing is written to one
    runs = Pending(stack.cfg.runs_dir).summary()
    sweeps = PendingSweeps(stack.cfg.state_dir).summary()
    left = runs["pending_runs"] + sweeps["pending_sweeps"]
    error = runs["last_error"] or sweeps["sweeps_last_error"]
    return Outstanding("the results database", left, unit="runs and sweeps",
                       why=f"last error: {error}" if left and error else "")
