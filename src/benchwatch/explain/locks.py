"""lock: sessions waiting on locks in the dip, against the rest of the run. The waits are each engine's
(a contribution under "lock_waits": PostgreSQL's heavyweight locks, InnoDB's row locks, the processlist's
lock states), and so is what the evidence says of the waiter ("lock_detail": the statement, its blocker,
its time per call); the scoring is one. Registered by benchwatch.explain.causes."""

from __future__ import annotations

from typing import Any

from benchwatch.causes import (
    Candidate,
    Dip,
    Registry,
    Scorer,
    Signals,
    Timeline,
    active_seconds,
    sum_by_time,
    window_values,
)


def waits(signals: Signals) -> dict[str, Timeline]:
    """Sessions waiting, per wait event ("relation", "transactionid", "row lock", ...), every engine's."""
    out: dict[str, list[Timeline]] = {}
    for contribution in signals.contributions("lock_waits"):
        for event, timelines in contribution(signals).items():
            out.setdefault(event, []).extend(timelines)
    return {k: sum_by_time(v) for k, v in out.items()}


class Lock(Scorer):
    name = "lock"
    order = 40
    # needs: each engine's lock-wait series (its Engine.explain_selectors)

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        locks = signals.memo("locks", waits)
        if not locks:
            return None
        ctx, lo, start, end = signals.ctx, dip.lo, dip.start, dip.end
        # Sessions waiting on average, in the dip against the whole run (seconds without a
        # row count as 0), per client: a lock that holds every client scores near 1, the
        # odd row-lock wait of tpcb-like's updates near 0.
        total = sum_by_time(locks.values())
        outside = max(1.0, ctx.run_end - ctx.run_start - (end - lo))
        usual = max(0.0, sum(window_values(total, ctx.run_start, ctx.run_end))
                    - sum(window_values(total, lo, end))) / outside
        waiting = sum(window_values(total, start, end)) / max(1.0, end - start)
        peak = max(window_values(total, lo, end) or [0.0])
        clients = ctx.clients or max(1.0, peak)
        if not (waiting > usual and peak >= 1):
            return None
        events = sorted(((max(window_values(tl, lo, end) or [0.0]), ev) for ev, tl in locks.items()), reverse=True)
        top = ", ".join(f"{ev} {n:.0f}" for n, ev in events if n > 0)
        text = (f"up to {peak:.0f} sessions waiting on locks ({top}), {waiting:.1f} on average in the dip, "
                f"{usual:.2f} over the run")
        extra: dict[str, Any] = {}
        for detail in signals.contributions("lock_detail"):
            text, more = detail(dip, signals, text)
            extra.update(more)
        return self.candidate(dip, active_seconds(total, lambda v: v >= 1, lo, end),
                              min(1.0, (waiting - usual) / max(clients, 1)), text, peak_sessions=peak,
                              mean_sessions=round(waiting, 3), run_mean_sessions=round(usual, 3), **extra)


def register(registry: Registry) -> None:
    registry.add(Lock())
