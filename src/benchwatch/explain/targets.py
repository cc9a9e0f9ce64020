"""target_down: the run's server's exporter could not reach it (each engine's Engine.up_metric at 0).
Engine-neutral code for a cause engines list (Engine.explain_signals); registered by benchwatch.explain.causes."""

from __future__ import annotations

from benchwatch.causes import Candidate, Dip, Registry, Scorer, Signals, Timeline, active_seconds, clean


def down(signals: Signals) -> dict[tuple[str, str], Timeline]:
    """(target, the up series) -> its samples."""
    return {((s.labels.get("target") or s.labels.get("instance") or up), up): clean(s)
            for up in signals.ctx.up_metrics for s in signals.named(up)}


def down_lines(signals: Signals, lo: float, hi: float) -> list[str]:
    """What the up series say of the server going away in [lo, hi] (how a run ended: explain/ending.py)."""
    said = []
    for (target, up), tl in signals.memo("down", down).items():
        at = [t for t, v in tl if v == 0 and lo <= t <= hi]
        if at:
            said.append(f"target {target} was down ({up} 0) {at[0] - signals.ctx.run_start:.1f} s into the run")
    return said


class TargetDown(Scorer):
    name = "target_down"
    order = 30
    # needs: the run's engine's up_metric (Context.up_metrics), named by each engine

    def score(self, dip: Dip, signals: Signals) -> list[Candidate]:
        out = []
        for (target, up_series), tl in signals.memo("down", down).items():
            seconds = active_seconds(tl, lambda v: v == 0, dip.lo, dip.end)
            if seconds:
                got = self.candidate(dip, seconds, 1.0, f"target {target} down ({up_series} 0) for {seconds:.0f} s",
                                     usual=signals.usual(tl, lambda v: v == 0, dip.lo, dip.end), target=target)
                out += [got] if got else []
        return out


def register(registry: Registry) -> None:
    registry.add(TargetDown())
