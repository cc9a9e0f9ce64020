"""PostgreSQL's causes of a dip from the server log and its statistics views (benchwatch.causes scorers,
registered by explain through Engine.cause_modules): checkpoint, wal_fpi, autovacuum and the server log's
events (deadlock, lock_timeout, connection_terminated, out_of_memory, write_error). The statements'
(statement, and what the lock's evidence says of its waiter) are in statement_causes.py."""

from __future__ import annotations

from typing import Any

from benchwatch.causes import (
    MIN_SCORE,
    Candidate,
    Dip,
    Registry,
    Scorer,
    Signals,
    Timeline,
    active_seconds,
    chance,
    clean,
    deviation,
    lift,
    rates,
    sum_by_time,
    window_values,
)
from benchwatch.query.frames import boolean_regions

AFTERMATH_S = 5.0     # a checkpoint still costs this long after it ends (full-page images)
# What each server log event says, for the evidence (the events: server_log.SERVER_EVENTS).
LOG_EVENTS = {
    "deadlock": "deadlock(s) detected by the server (each after deadlock_timeout of waiting)",
    "lock_timeout": "statement(s) cancelled on lock_timeout",
    "connection_terminated": "session(s) terminated by an administrator command",
    "out_of_memory": "out-of-memory error(s) in the server log",
    "write_error": "\"could not write\" error(s) in the server log",
}
# A deadlock is found deadlock_timeout (default 1 s) after its transactions began to wait.
EVENT_LEAD_S = 1.0


# -- the run's timelines --------------------------------------------------------------------------

def checkpoints(signals: Signals) -> list[dict]:
    """The server log's checkpoints (the checkpoints collector): span, reason, kind and figures."""
    info = [(s.labels, boolean_regions(s)) for s in signals.named("pg_checkpoint_info")]
    out = []
    for s in signals.named("pg_checkpoint_in_progress"):
        for a, b in boolean_regions(s):
            row = {"start": a / 1000, "end": b / 1000, "reason": s.labels.get("reason", "unknown"),
                   "kind": s.labels.get("kind", "checkpoint")}
            for labels, regions in info:
                if labels.get("reason") == row["reason"] and any(abs(ia - a) <= 1500 for ia, _ in regions):
                    row.update({k: labels[k] for k in ("buffers", "write_seconds", "sync_seconds", "total_seconds")
                                if k in labels})
                    break
            out.append(row)
    return sorted(out, key=lambda r: r["start"])


def autovacuum_runs(signals: Signals) -> list[dict]:
    """Each logged autovacuum/autoanalyze run: its span, table and kind, and what a vacuum removed
    (the pg_autovacuum_last_* samples at its end)."""
    removed: dict[tuple, dict[str, float]] = {}
    for name, key in (("pg_autovacuum_last_tuples_removed", "tuples_removed"),
                      ("pg_autovacuum_last_pages_removed", "pages_removed")):
        for s in signals.named(name):
            for t, v in clean(s):
                where = (s.labels.get("database", ""), s.labels.get("table", "?"), round(t * 1000))
                removed.setdefault(where, {})[key] = v
    out = []
    for s in signals.named("pg_autovacuum_in_progress"):
        database, table, kind = s.labels.get("database", ""), s.labels.get("table", "?"), s.labels.get("kind", "vacuum")
        for a, b in boolean_regions(s):
            row: dict[str, Any] = {"start": a / 1000, "end": b / 1000, "database": database, "table": table, "kind": kind}
            if kind == "vacuum":
                row.update(removed.get((database, table, b), {}))
            out.append(row)
    return sorted(out, key=lambda r: r["start"])


def uncovered(tl: Timeline, spans: list[tuple[float, float]]) -> Timeline:
    """The timeline with 0 wherever spans cover most of the second a sample stands for (the second
    before it): a worker a logged run accounts for; a 10 ms run does not account for a whole second."""
    if not spans:
        return tl
    out: Timeline = []
    for t, v in tl:
        covered = sum(max(0.0, min(b, t) - max(a, t - 1.0)) for a, b in spans if a < t and b > t - 1.0)
        out.append((t, 0.0 if covered >= 0.5 else v))
    return out


def autovacuum_workers(signals: Signals) -> Timeline:
    """postgres_exporter's worker count where no logged run accounts for it (a run stored before, a log
    not followed, a run still going)."""
    runs = signals.memo("autovacuum_runs", autovacuum_runs)
    return uncovered(sum_by_time(clean(s) for s in signals.named("pg_autovacuum_workers")),
                     [(r["start"], r["end"]) for r in runs])


def log_events(signals: Signals) -> dict[str, list[float]]:
    """event -> the times the server logged one (each rise of its counter, one time per record)."""
    out: dict[str, list[float]] = {}
    for s in signals.named("pg_server_log_events_total"):
        prev = None
        for t, v in clean(s):
            if prev is None or v > prev:
                n = int(v - (prev or 0)) if prev is not None else 1
                out.setdefault(s.labels.get("event", "?"), []).extend([t] * max(1, n))
            prev = v
    return out


def _forced(checkpoint: dict) -> bool:
    return any(w in checkpoint["reason"] for w in ("immediate", "force"))


# -- the scorers ----------------------------------------------------------------------------------

class Checkpoint(Scorer):
    name = "checkpoint"
    needs = ("pg_checkpoint_in_progress", "pg_checkpoint_info")
    order = 60

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        ctx, lo, start, end = signals.ctx, dip.lo, dip.start, dip.end
        every = signals.memo("checkpoints", checkpoints)
        # Requested by the WAL of a write surge the disk shows: its consequence (the host's disk scorer says).
        write_surge = any(surged(dip, signals) for surged in signals.contributions("write_surge"))
        # A checkpoint starting or ending in the window is telling only if that is rare: with
        # checkpoints every 10 s one starts or ends in almost any window. The chance of one (of
        # the same kind) in a window this long, from how often they start or end in the rest of the run.
        rest = signals.rest(lo, end)
        edges = {True: 0, False: 0}
        for c in every:
            if c["start"] <= end and c["end"] + AFTERMATH_S >= lo:
                continue  # one of this window's own: its other edge is not "elsewhere"
            edges[_forced(c)] += sum(1 for t in (c["start"], c["end"])
                                     if ctx.run_start <= t <= ctx.run_end and not lo <= t <= end)
        under_way = signals.usual_spans([(c["start"], c["end"] + AFTERMATH_S) for c in every], lo, end)
        found: list[Candidate] = []
        for c in every:
            # A progress line stands for the interval that ends at it, and the dip starts where its first low
            # line's interval starts: when in that interval TPS fell is not known. A checkpoint that started
            # within it holds the dip from its start (it is not 0.2 s late for a fall it may have caused).
            began = start if start <= c["start"] < start + ctx.interval_s else c["start"]
            a, b = max(lo, began), min(end, c["end"] + AFTERMATH_S)
            if b <= a:
                continue
            forced = _forced(c)
            edge = lo <= c["start"] <= end or lo <= c["end"] <= end
            # Merely under way (a spread checkpoint writes slowly for minutes): below MIN_SCORE alone.
            strength = 1.0 if forced else 0.5 if edge else 0.15
            odds = chance(edges[forced], rest, end - lo) if edge else 0.0
            strength *= 1.0 - odds
            if c["reason"].startswith(("wal", "xlog")) and write_surge:
                strength = min(strength, 0.25)  # requested by the WAL of that surge: its consequence
            figures = ", ".join(f"{k.replace('_seconds', '')} {c[k]} s" for k in ("write_seconds", "sync_seconds") if k in c)
            lag = c["start"] - start
            text = (f"checkpoint ({c['reason']}) started {abs(lag):.1f} s {'before' if lag < 0 else 'after'} the dip began, "
                    f"lasting {c['end'] - c['start']:.1f} s")
            if "buffers" in c:
                text += f", {c['buffers']} buffers written"
            if figures:
                text += f" ({figures})"
            if odds >= 0.05:
                text += f"; one starts or ends in {odds * 100:.0f}% of windows this long elsewhere in the run"
            got = self.candidate(dip, b - a, strength, text, usual=0.0 if edge else under_way, chance=round(odds, 3),
                                 reason=c["reason"], start=c["start"], end=c["end"],
                                 **{k: c[k] for k in ("buffers", "write_seconds", "sync_seconds") if k in c})
            if got is not None:
                found.append(got)
        if not found:
            return None
        ckpts = sorted(found, key=lambda c: -c.score)
        if len(ckpts) > 1:  # several checkpoints in one dip (a WAL storm): one candidate, the strongest
            ckpts[0].evidence += f" (and {len(ckpts) - 1} more checkpoint(s) in the dip)"
            ckpts[0].details["checkpoints"] = len(ckpts)
        return ckpts[0]

    def settle(self, dip: Dip, signals: Signals, found: list[Candidate]) -> None:
        """A disk busy while an immediate checkpoint wrote is the checkpoint's doing: it writes as fast as the
        disk takes (then fsyncs it all), and the commits' WAL flushes queue behind it. The checkpoint says why,
        the disk only how, so the disk ranks below it. Not so for a spread checkpoint, which paces its writes
        over minutes (a disk busy then is busy with something else: a VACUUM FULL), nor a WAL-requested one,
        which a write surge causes (see score)."""
        checkpoint = next((c for c in found if c.cause == self.name), None)
        disk = next((c for c in found if c.cause == "disk"), None)
        if disk is None or checkpoint is None or checkpoint.score < MIN_SCORE or disk.score < checkpoint.score:
            return
        if not _forced({"reason": checkpoint.details.get("reason", "")}):
            return
        busy: set[int] = set()
        for busy_of in signals.contributions("disk_busy"):
            busy |= busy_of(dip, signals)
        if _mostly_within(busy, checkpoint.details["start"], checkpoint.details["end"] + 1.0):
            disk.score = 0.9 * checkpoint.score
            disk.details["ranked_below"] = "checkpoint"
            disk.evidence += " (while the checkpoint wrote)"


def _mostly_within(seconds: set[int], a: float, b: float) -> bool:
    """Whether at least half of the seconds (each a sample's time, standing for the second before it) lie
    mostly within [a, b]."""
    inside = sum(1 for t in seconds if min(t, b) - max(t - 1.0, a) >= 0.5)
    return bool(seconds) and inside >= 0.5 * len(seconds)


class Autovacuum(Scorer):
    name = "autovacuum"
    needs = ("pg_autovacuum_in_progress", "pg_autovacuum_last_tuples_removed", "pg_autovacuum_last_pages_removed",
             "pg_autovacuum_workers")
    weight = 0.6
    order = 70

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        """The logged run that overlaps the window most beyond its table's usual (the share of the rest of
        the run that table had a run of that kind under way: pgbench_branches vacuumed every minute for
        10 ms explains nothing, a 20 s vacuum of pgbench_accounts once does); else the workers no
        logged run accounts for."""
        lo, end, length = dip.lo, dip.end, dip.length
        runs = signals.memo("autovacuum_runs", autovacuum_runs)
        best: tuple[float, dict, float, float] | None = None
        near = [r for r in runs if r["start"] <= end and r["end"] >= lo]
        for r in near:
            active = min(end, r["end"]) - max(lo, r["start"])
            same = [(x["start"], x["end"]) for x in runs
                    if (x["database"], x["table"], x["kind"]) == (r["database"], r["table"], r["kind"])]
            usual = signals.usual_spans(same, lo, end)
            rank = lift(min(1.0, active / length), usual)
            if best is None or rank > best[0]:
                best = (rank, r, active, usual)
        if best is not None and best[0] > 0:
            _, r, active, usual = best
            lag = r["start"] - dip.start
            text = (f"{r['kind']} of {r['table']} (database {r['database']}) ran {r['end'] - r['start']:.1f} s, "
                    f"from {abs(lag):.1f} s {'before' if lag < 0 else 'after'} the dip began (server log)")
            figures = {k: r[k] for k in ("tuples_removed", "pages_removed") if k in r}
            if "tuples_removed" in figures:
                text += f"; it removed {figures['tuples_removed']:.0f} dead tuples"
            if len(near) > 1:
                text += f" (and {len(near) - 1} more autovacuum run(s) in the window)"
            return self.candidate(dip, active, 0.5, text, usual=usual, source="server_log", table=r["table"],
                                  database=r["database"], kind=r["kind"], seconds=round(r["end"] - r["start"], 3),
                                  start=r["start"], end=r["end"], **figures)
        workers = signals.memo("autovacuum_workers", autovacuum_workers)
        if workers:
            peak = max(window_values(workers, lo, end) or [0.0])
            if peak > 0:
                return self.candidate(dip, active_seconds(workers, lambda v: v > 0, lo, end), 0.5,
                                      f"{peak:.0f} autovacuum worker(s) active",
                                      usual=signals.usual(workers, lambda v: v > 0, lo, end), source="workers",
                                      workers=peak)
        return None


class WalFpi(Scorer):
    """Full-page images after a checkpoint: usually a symptom of the checkpoint itself."""
    name = "wal_fpi"
    needs = ("pg_stat_wal_wal_fpi",)
    weight = 0.5
    order = 80

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        fpi = signals.memo("fpi", lambda sig: sum_by_time(rates(s) for s in sig.named("pg_stat_wal_wal_fpi")))
        if not fpi or not any(dip.lo - 10 <= c["start"] <= dip.end for c in signals.memo("checkpoints", checkpoints)):
            return None
        got = deviation(fpi, signals.ctx.run_start, signals.ctx.run_end, dip.lo, dip.end, floor=1.0)
        if not got:
            return None
        active_s, strength, peak, base, _ = got
        return self.candidate(dip, active_s, strength, f"full-page images {peak:.0f}/s after a checkpoint, {base:.0f}/s usually",
                              peak=round(peak, 3), baseline=round(base, 3))


def logged_in(dip: Dip, signals: Signals) -> dict[str, list[float]]:
    """Each kind of server log event in the window (from the dip's lead to one interval after it: a deadlock
    is logged when it is resolved) -> the times it was logged there."""
    hi = dip.end + signals.ctx.interval_s
    found = {}
    for event, times in signals.memo("log_events", log_events).items():
        inside = [t for t in times if dip.lo <= t <= hi]
        if inside:
            found[event] = inside
    return found


class LogEvent(Scorer):
    """One kind of server log event in the window, held against how often it comes in the rest of the run."""
    needs = ("pg_server_log_events_total",)

    def __init__(self, event: str, order: int):
        self.name = event  # type: ignore[misc]  # one scorer class, a cause per event
        self.order = order  # type: ignore[misc]

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        ctx = signals.ctx
        inside = logged_in(dip, signals).get(self.name)
        if not inside:
            return None
        lo, end = dip.lo, dip.end
        hi = end + ctx.interval_s
        times = signals.memo("log_events", log_events)[self.name]
        rest = signals.rest(lo, end)
        length = max(end - lo, ctx.interval_s)
        elsewhere = sum(1 for t in times if ctx.run_start <= t <= ctx.run_end and not lo <= t <= hi)
        odds = chance(elsewhere, rest, length)
        text = f"{len(inside)} {LOG_EVENTS.get(self.name, self.name)}, the first {inside[0] - ctx.run_start:.1f} s into the run"
        if elsewhere:
            text += f"; {elsewhere} more elsewhere in the run"
        active = hi - max(lo, inside[0] - EVENT_LEAD_S)
        return self.candidate(dip, active, 1.0 - odds, text, events=len(inside), elsewhere=elsewhere,
                              chance=round(odds, 3))


class Deadlock(LogEvent):
    def settle(self, dip: Dip, signals: Signals, found: list[Candidate]) -> None:
        """The lock waits of a deadlock are its own: the deadlock is the more specific answer."""
        if self.name in logged_in(dip, signals):
            for waited in found:
                if waited.cause == "lock":
                    waited.score *= 0.5
                    waited.evidence += " (waits of the deadlocks)"


def shutdowns(signals: Signals, lo: float, hi: float) -> list[str]:
    """A shutdown checkpoint in the server log in [lo, hi]: the server went away under the run (explain's
    account of how a run ended)."""
    for c in signals.memo("checkpoints", checkpoints):
        if "shutdown" in c["reason"] and lo - 5 <= c["start"] <= hi:
            return [f"the server log has a shutdown checkpoint ({c['reason']}) "
                    f"{c['start'] - signals.ctx.run_start:.1f} s into the run"]
    return []


def lock_waits(signals: Signals) -> dict[str, list[Timeline]]:
    """Sessions waiting on heavyweight locks, per wait_event ("relation", "transactionid", "tuple", ...)."""
    out: dict[str, list[Timeline]] = {}
    for s in signals.of_engine("pg_stat_activity_waits_sessions"):
        if s.labels.get("wait_event_type") == "Lock":
            out.setdefault(s.labels.get("wait_event", "?"), []).append(clean(s))
    return out


def register(registry: Registry) -> None:
    registry.add(Checkpoint())
    registry.add(Autovacuum())
    registry.add(WalFpi())
    # After the host's (the order the server log's events have always been weighed in).
    for n, event in enumerate(LOG_EVENTS):
        registry.add((Deadlock if event == "deadlock" else LogEvent)(event, 140 + n))
    registry.contribute("lock_waits", lock_waits)
    registry.contribute("server_stopped", shutdowns)
