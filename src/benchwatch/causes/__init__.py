"""What a cause of a TPS dip is, below the plug-in folders: the scorer interface, its registry and the
toolkit scorers share (timelines from raw series, base rates, a dip's window).

explain (``benchwatch.explain.causes``) registers its own scorers (the client's and the host's: client_stall,
clients_aborted, target_down, lock, disk, cpu_contention, database_cpu_bound, io_pressure) and each
engine's (``Engine.cause_modules``: modules of its folder with a ``register(registry)``), then scores every
weighed scorer for each dip. This room sits below the engine folders so they can write scorers; it names
no engine and no tool.

score = weight x lift(overlap, usual) x strength (docs/explain.md):

- overlap: the seconds the signal was active within the dip and the LEAD_S seconds before it, over the
  dip's length (capped at 1);
- strength: how far the signal left its own baseline, or a fixed figure for a state without one;
- usual: the share of the rest of the run the signal was on (its base rate): a state on as often
  outside the dip as in it explains nothing.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from benchwatch.model.samples import is_stale_marker
from benchwatch.query.frames import prefer_pushed
from benchwatch.query.series import Series

LEAD_S = 3.0          # a cause may start this long before the TPS falls
MIN_SCORE = 0.2       # below it a candidate is not named; a dip whose best is below has no cause found

Timeline = list[tuple[float, float]]  # (Unix seconds, value), time order


@dataclass
class Candidate:
    cause: str
    score: float
    overlap: float
    strength: float
    evidence: str
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"cause": self.cause, "score": round(self.score, 3), "overlap": round(self.overlap, 3),
                "strength": round(self.strength, 3), "evidence": self.evidence, "details": self.details}


@dataclass
class Context:
    """What the scorers need to know about the run."""
    run_id: str
    interval_s: float
    run_start: float
    run_end: float
    clients: int | None = None
    # The run's tool holds progress lines back while its first thread's clients are all blocked (pgbench
    # before 10): a silence is then weaker evidence that the client itself stalled.
    progress_held_back: bool = False
    # The scorers weighed for this run (None: every one) and the series saying whether its server's
    # exporter reaches it (target_down; none: the scorer reads nothing).
    weighed: frozenset[str] | None = None
    up_metrics: tuple[str, ...] = ()
    # The series the run's engine's scorers read (its Engine.explain_selectors; None: engine not known,
    # every engine's): a cause two engines share (lock) reads only the run's engine's series.
    engine_series: frozenset[str] | None = None
    # The run's tool as people write it (its load generator's title), for the evidence.
    tool: str = "the load generator"


# -- timelines ------------------------------------------------------------------------------------

def clean(s: Series) -> Timeline:
    return [(ts / 1000, v) for ts, v in s.samples if not is_stale_marker(v) and v == v]


def named(series: list[Series], name: str) -> list[Series]:
    return [s for s in prefer_pushed(series) if s.name == name]


def rates(s: Series) -> Timeline:
    """Per-second rate between consecutive samples of a counter (a reset restarts it), at the later sample."""
    out: Timeline = []
    pts = clean(s)
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t1 > t0:
            out.append((t1, (v1 - v0 if v1 >= v0 else v1) / (t1 - t0)))
    return out


def sum_by_time(timelines: Iterable[Timeline]) -> Timeline:
    acc: dict[float, float] = {}
    for tl in timelines:
        for t, v in tl:
            key = round(t)  # scrapes of one job land within the same second
            acc[key] = acc.get(key, 0.0) + v
    return sorted(acc.items())


def active_seconds(tl: Timeline, active: Callable[[float], bool], lo: float, hi: float, step: float = 1.0) -> float:
    """Seconds within [lo, hi] where the timeline is active; each sample stands for the second before it."""
    total = 0.0
    for t, v in tl:
        if active(v):
            a, b = max(lo, t - step), min(hi, t)
            total += max(0.0, b - a)
    return total


def window_values(tl: Timeline, lo: float, hi: float) -> list[float]:
    return [v for t, v in tl if lo <= t <= hi + 1.0]


def lift(overlap: float, usual: float) -> float:
    """How much more the signal was on in the dip's window than usual (both shares of time, 0..1):
    1 for a state never seen elsewhere, 0 for one on at least as often outside the dip."""
    if usual >= 1.0:
        return 0.0
    return max(0.0, overlap - usual) / (1.0 - usual)


def chance(events: int, rest_s: float, width_s: float) -> float:
    """The chance that a window of ``width_s`` seconds holds at least one of events that happen
    ``events`` times in ``rest_s`` seconds elsewhere (as if at random: Poisson)."""
    if events <= 0 or rest_s <= 0:
        return 0.0
    return 1.0 - math.exp(-events / rest_s * width_s)


def host_of(s: Series) -> str:
    return s.labels.get("host") or s.labels.get("target") or s.labels.get("instance") or ""


def spacing(tl: Timeline) -> float:
    """The usual time between samples (the processes collector scans every 2 s; node_exporter every 1 s)."""
    gaps = [b[0] - a[0] for a, b in zip(tl, tl[1:]) if b[0] > a[0]]
    return statistics.median(gaps) if gaps else 1.0


def deviation(tl: Timeline, run_start: float, run_end: float, lo: float, hi: float,
              floor: float) -> tuple[float, float, float, float, float] | None:
    """(active seconds, strength, peak, baseline, threshold) of a measure that rose well above the run's median:
    at least twice it and by more than ``floor``; strength 1 - baseline/peak."""
    base = statistics.median(window_values(tl, run_start, run_end) or [0.0])
    peak = max(window_values(tl, lo, hi) or [0.0])
    if peak < 2 * base or peak - base < floor:
        return None
    # Active wherever it is as far above the median as a candidate must peak: a burst
    # that stays high but below its first spike still counts.
    threshold = max(2 * base, base + floor)
    return active_seconds(tl, lambda v: v >= threshold, lo, hi), 1 - base / peak, peak, base, threshold


# -- a run's signals and a dip's window -------------------------------------------------------------

class Dip:
    """One dip's window as the scorers see it: [lo, end], lo LEAD_S before the TPS fell; ``memo`` keeps what
    several scorers of one dip read (the statements' times in it, whether the disk surged)."""

    def __init__(self, start: float, end: float, interval_s: float):
        self.start, self.end = start, end
        self.lo = start - LEAD_S
        self.length = max(end - start, interval_s)
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


class Signals:
    """A run's series (those not ended a minute before it) and its context, read once per run by every
    scorer: ``memo`` keeps what a scorer derives from them (timelines, regions) for the next dip."""

    def __init__(self, series: list[Series], ctx: Context, registry: Registry):
        self.ctx = ctx
        self.registry = registry
        in_run = ctx.run_start - 60
        self.series = [s for s in series if s.samples and s.samples[-1][0] / 1000 >= in_run]
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[Signals], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    def named(self, name: str) -> list[Series]:
        return named(self.series, name)

    def of_engine(self, name: str) -> list[Series]:
        """The series ``name`` if the run's engine reads it (every engine's when the engine is not known)."""
        own = self.ctx.engine_series
        return self.named(name) if own is None or name in own else []

    def contributions(self, topic: str) -> list[Callable[..., Any]]:
        return self.registry.contributions(topic)

    # -- base rates: how often a signal is on over the rest of the run --------------------------

    def rest(self, lo: float, end: float) -> float:
        """Seconds of the run outside the dip's window [lo, end]."""
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        return max(0.0, (r1 - r0) - max(0.0, min(end, r1) - max(lo, r0)))

    def usual(self, tl: Timeline, active: Callable[[float], bool], lo: float, end: float, step: float = 1.0) -> float:
        """The share of the rest of the run where the timeline is active (0 when the rest is too short to say);
        ``step``: the seconds each sample stands for."""
        rest = self.rest(lo, end)
        if rest < 2 * self.ctx.interval_s:
            return 0.0
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        on = active_seconds(tl, active, r0, r1, step) - active_seconds(tl, active, max(lo, r0), min(end, r1), step)
        return min(1.0, max(0.0, on / rest))

    def usual_spans(self, spans: Iterable[tuple[float, float]], lo: float, end: float) -> float:
        """The same for (start, end) stretches."""
        rest = self.rest(lo, end)
        if rest < 2 * self.ctx.interval_s:
            return 0.0
        r0, r1 = self.ctx.run_start, self.ctx.run_end
        on = 0.0
        for a, b in spans:
            a, b = max(a, r0), min(b, r1)
            if b > a:
                on += (b - a) - max(0.0, min(b, end) - max(a, lo))
        return min(1.0, max(0.0, on / rest))


# -- the interface --------------------------------------------------------------------------------

class Scorer:
    """One cause of a dip: its name (the cause explain reports, an Engine.explain_signals entry for an
    engine's), the raw series it reads, its weight, and ``score`` for one dip.

    ``order``: scorers run (and candidates of equal score rank) in this order. ``settle`` runs after every
    scorer of a dip, for one cause to yield to a more specific one (a lock's waits to the deadlock they
    were); a ``symptom`` settles after the others."""

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    weight: ClassVar[float] = 1.0
    order: ClassVar[int] = 500
    symptom: ClassVar[bool] = False

    def score(self, dip: Dip, signals: Signals) -> Candidate | list[Candidate] | None:
        """The cause's candidate for the dip (a list: one per target it was seen on), None without one."""
        raise NotImplementedError

    def settle(self, dip: Dip, signals: Signals, found: list[Candidate]) -> None:
        return None

    def candidate(self, dip: Dip, active_s: float, strength: float, evidence: str, usual: float = 0.0,
                  **details: Any) -> Candidate | None:
        """The candidate of ``active_s`` seconds in the dip's window at ``strength``, held against ``usual``
        (its share of the rest of the run); None when it scores nothing."""
        overlap = min(1.0, active_s / dip.length)
        if usual > 0:
            details["usual"] = round(usual, 3)
            if usual >= 0.05:
                evidence += f" (on {usual * 100:.0f}% of the rest of the run)"
        score = self.weight * lift(overlap, usual) * strength
        return Candidate(self.name, score, overlap, strength, evidence, details) if score > 0 else None


class DuplicateScorer(ValueError):
    """A second scorer under a cause name one already has."""


class Registry:
    """The scorers of a dip's causes by name, refusing a name twice (two folders scoring one cause would
    silently hide one of them); and contributions, functions one module offers another's scorer under a
    topic (an engine's lock waits to the lock scorer, the disk's surge to the checkpoint's)."""

    def __init__(self) -> None:
        self._scorers: dict[str, tuple[Scorer, str]] = {}
        self._topics: dict[str, list[Callable[..., Any]]] = {}

    def add(self, scorer: Scorer) -> None:
        where = type(scorer).__module__
        if scorer.name in self._scorers:
            raise DuplicateScorer(f"cause {scorer.name!r} is scored twice: by {self._scorers[scorer.name][1]} "
                                  f"and by {where}")
        self._scorers[scorer.name] = (scorer, where)

    def contribute(self, topic: str, fn: Callable[..., Any]) -> None:
        self._topics.setdefault(topic, []).append(fn)

    def contributions(self, topic: str) -> list[Callable[..., Any]]:
        return list(self._topics.get(topic, ()))

    def __iter__(self) -> Iterator[Scorer]:
        """In ``order`` (then as added)."""
        return iter(sorted((s for s, _ in self._scorers.values()), key=lambda s: s.order))

    def __contains__(self, name: object) -> bool:
        return name in self._scorers

    def __getitem__(self, name: str) -> Scorer:
        return self._scorers[name][0]

    def names(self) -> list[str]:
        return [s.name for s in self]

    def candidates(self, signals: Signals, start: float, end: float) -> list[Candidate]:
        """The weighed scorers' candidates of the dip [start, end], strongest first, those below half
        MIN_SCORE left out."""
        dip = Dip(start, end, signals.ctx.interval_s)
        weighed = signals.ctx.weighed
        found: list[Candidate] = []
        scorers = list(self)
        for scorer in scorers:
            if weighed is None or scorer.name in weighed:
                got = scorer.score(dip, signals)
                found += [got] if isinstance(got, Candidate) else got or []
        for scorer in sorted(scorers, key=lambda s: s.symptom):
            scorer.settle(dip, signals, found)
        found.sort(key=lambda c: -c.score)
        return [c for c in found if c.score >= MIN_SCORE / 2]
