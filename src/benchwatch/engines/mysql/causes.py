"""MySQL's and MariaDB's causes of a dip (benchwatch.causes scorers, registered by explain through
Engine.cause_modules): InnoDB's flushing pressure, and its lock waits for explain's lock cause."""

from __future__ import annotations

from benchwatch.causes import Candidate, Dip, Registry, Scorer, Signals, Timeline, active_seconds, clean

PRESSURE = "instance:mysql_innodb_flushing_pressure:bool"


class InnodbFlushing(Scorer):
    """InnoDB's flushing pressure is its checkpoint: dirty pages at their limit, or the redo log close to
    full, make InnoDB flush harder and commits wait (docs/innodb.md)."""
    name = "innodb_flushing"
    needs = (PRESSURE,)
    order = 90

    def score(self, dip: Dip, signals: Signals) -> list[Candidate]:
        out = []
        for target, tl in signals.memo("innodb", lambda sig: {(s.labels.get("target") or s.labels.get("instance")
                                                                or "mysql"): clean(s) for s in sig.named(PRESSURE)}).items():
            pressed = active_seconds(tl, lambda v: v >= 1, dip.lo, dip.end)
            if pressed:
                got = self.candidate(dip, pressed, 1.0,
                                     f"InnoDB flushing pressure on {target} for {pressed:.0f} s (dirty pages at their "
                                     "flush point or checkpoint age past 7/8 of its maximum)",
                                     usual=signals.usual(tl, lambda v: v >= 1, dip.lo, dip.end), target=target)
                out += [got] if got else []
        return out


def lock_waits(signals: Signals) -> dict[str, list[Timeline]]:
    """InnoDB's row lock waits ("row lock") and the processlist's threads in a lock state
    ("waiting_for_table_metadata_lock", ...)."""
    out: dict[str, list[Timeline]] = {}
    for s in signals.of_engine("mysql_global_status_innodb_row_lock_current_waits"):
        out.setdefault("row lock", []).append(clean(s))
    for s in signals.of_engine("mysql_info_schema_processlist_threads"):
        state = s.labels.get("state", "")
        if "lock" in state and state.startswith("waiting"):
            out.setdefault(state, []).append(clean(s))
    return out


def register(registry: Registry) -> None:
    registry.add(InnodbFlushing())
    registry.contribute("lock_waits", lock_waits)
