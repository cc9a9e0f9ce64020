"""PostgreSQL's statements as causes of a dip (a benchwatch.causes scorer, registered by explain through
Engine.cause_modules): one statement's time per call rose (statement: the exporter's statements collector,
from pg_stat_statements and pg_stat_activity); and what the lock's evidence says of the statement its
sessions waited in (the "lock_detail" contribution: the statement, its blocker, its time per call)."""

from __future__ import annotations

import statistics
from typing import Any

from benchwatch.causes import LEAD_S, Candidate, Dip, Registry, Scorer, Signals, clean, host_of, lift, window_values
from benchwatch.util import sqltext

# statement: time per call must rise to this many times its usual, and by this much (seconds) at least.
STATEMENT_RISE = 3.0
STATEMENT_FLOOR_S = 0.001
# A statement that took this share of the top statements' time in the dip (or more) weighs fully.
STATEMENT_FULL_SHARE = 0.5
# With fewer than two readings of a statement outside the dip (a short run before it, read every 5 s), its usual
# time per call is what the calls outside it took in all, once there are this many.
STATEMENT_MIN_CALLS = 10
# A statement in flight this long (seconds) when sampled is worth naming in the evidence.
IN_FLIGHT_SHOWN_S = 0.5


class Statements:
    """The statements collector's series, by (target, queryid): {"text", "intervals": [(t0, t1, calls, seconds)]}
    (what finished between two samples: pg_stat_statements' counters), the in-flight samples
    [(t, wait_event_type, wait_event, sessions)] and the longest session's time in each [(t, seconds)];
    and postgres_exporter's lock-waits query: (statement, wait_event, blocker, blocker_pid) -> sessions."""

    def __init__(self, signals: Signals):
        of = signals.of_engine
        self.waiting = {(s.labels.get("statement", "?"), s.labels.get("wait_event", "?"),
                         s.labels.get("blocker", ""), s.labels.get("blocker_pid", "")): clean(s)
                        for s in of("pg_stat_activity_lock_waits_sessions")}
        counters: dict[tuple[str, str], dict] = {}
        for name, what in (("pg_statement_calls_total", "calls"), ("pg_statement_exec_seconds_total", "seconds")):
            for s in of(name):
                key = (host_of(s), s.labels.get("queryid", "?"))
                entry = counters.setdefault(key, {"text": s.labels.get("statement", "?")})
                entry[what] = {round(t, 3): v for t, v in clean(s)}
        out = {}
        for key, entry in counters.items():
            calls, secs = entry.get("calls", {}), entry.get("seconds", {})
            times = sorted(set(calls) & set(secs))
            intervals = []
            for t0, t1 in zip(times, times[1:]):
                dc, ds = calls[t1] - calls[t0], secs[t1] - secs[t0]
                if dc < 0 or ds < 0:  # statistics reset: what was counted since
                    dc, ds = calls[t1], secs[t1]
                intervals.append((t0, t1, dc, ds))
            if intervals:
                out[key] = {"text": entry["text"], "intervals": intervals}
        flight: dict[tuple[str, str], list] = {}
        self.longest_in_flight: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for s in of("pg_statement_active_seconds_max"):
            self.longest_in_flight.setdefault((host_of(s), s.labels.get("queryid", "?")), []).extend(clean(s))
        for s in of("pg_statement_active_sessions"):
            key = (host_of(s), s.labels.get("queryid", "?"))
            rows = flight.setdefault(key, [])
            rows += [(t, s.labels.get("wait_event_type", "?"), s.labels.get("wait_event", "?"), v) for t, v in clean(s)]
            counters.setdefault(key, {"text": s.labels.get("statement", "?")})
            if key not in out:
                out[key] = {"text": s.labels.get("statement", "?"), "intervals": []}
        self.statements, self.in_flight = out, flight

    def in_flight_view(self, host: str, qid: str, lo: float, end: float) -> tuple[str, str | None, float]:
        """What the statement's sessions waited on in the window (share of the session samples, strongest first),
        the heavyweight lock they waited on most (None) and the share of their samples spent on such locks."""
        seen: dict[str, float] = {}
        locks: dict[str, float] = {}
        for t, wtype, wevent, n in self.in_flight.get((host, qid), []):
            if lo <= t <= end + 1.0 and n > 0:
                name = "CPU" if wtype == "CPU" else f"{wtype}:{wevent}"
                seen[name] = seen.get(name, 0.0) + n
                if wtype == "Lock":
                    locks[wevent] = locks.get(wevent, 0.0) + n
        total = sum(seen.values())
        if not total:
            return "", None, 0.0
        text = ", ".join(f"{name} {n / total * 100:.0f}%" for name, n in sorted(seen.items(), key=lambda x: -x[1])[:3])
        top_lock = max(locks, key=lambda k: locks[k]) if locks else None
        return f"sessions waited on {text}", top_lock, sum(locks.values()) / total

    def waiting_statement(self, lo: float, end: float) -> dict | None:
        """The statement most sessions waited in over the window, with its lock and its blocker."""
        best = None
        for (statement, event, blocker, pid), tl in self.waiting.items():
            n = sum(window_values(tl, lo, end))
            if n > 0 and (best is None or n > best[0]):
                best = (n, statement, event, blocker, pid)
        if best is None:
            return None
        out = {"statement": best[1], "wait_event": best[2], "blocker": best[3]}
        if best[4]:
            out["blocker_pid"] = best[4]
        return out


def slowed(dip: Dip, signals: Signals) -> list[dict]:
    """Each statement's time per call in the dip's window against the rest of the run, once per dip (the
    statement scorer and the lock's evidence read it). pg_stat_statements counts a call when it ends: the
    window is the samples from ``lo`` to one sample after ``end``. Those whose time per call rose
    STATEMENT_RISE times (and by STATEMENT_FLOOR_S) get a ``score``."""
    return dip.memo("slowed_statements", lambda: _slowed(signals.memo("statements", Statements), signals, dip.lo, dip.end))


def _slowed(sts: Statements, signals: Signals, lo: float, end: float) -> list[dict]:
    ctx = signals.ctx
    r0, r1 = ctx.run_start, ctx.run_end
    out = []
    spent_by_host: dict[str, float] = {}
    for (host, qid), entry in sts.statements.items():
        ivs = [iv for iv in entry["intervals"] if iv[1] > r0 - 1 and iv[0] < r1 + 5]
        # The dip itself, not the lead before it: an interval that ends before TPS fell holds the usual calls.
        inside = [iv for iv in ivs if iv[1] > lo + LEAD_S and iv[0] < end]
        after = [iv for iv in ivs if iv[0] >= end][:1]
        window = inside + [iv for iv in after if iv not in inside]
        w_end = window[-1][1] if window else end
        # The rest of the run: what ended before TPS fell (the lead before the dip included: at 5 s between
        # readings, a collapse early in a run may have no other reading before it) or began after it.
        rest = [iv for iv in ivs if iv[1] <= lo + LEAD_S or iv[0] >= w_end]
        calls = sum(iv[2] for iv in inside)
        spent = sum(iv[3] for iv in inside)
        # The calls stuck in the dip end in the sample after it: counted when they raise the time per call
        # (not the quick calls after the dip's end, which would dilute it).
        if after and after[0] not in inside and after[0][2] > 0 and (
                calls == 0 or after[0][3] / after[0][2] > spent / calls):
            calls, spent = calls + after[0][2], spent + after[0][3]
        spent_by_host[host] = spent_by_host.get(host, 0.0) + spent
        st: dict[str, Any] = {"host": host, "queryid": qid, "text": entry["text"], "calls": calls, "spent": spent,
                              "window": window, "after": after[0] if after else None, "rest": rest,
                              "usual_s": _usual(rest),
                              "dip_s": spent / calls if calls > 0 else None}
        st["in_flight"], st["lock_event"], st["lock_share"] = sts.in_flight_view(host, qid, lo, end)
        st["longest_s"] = max((v for t, v in sts.longest_in_flight.get((host, qid), []) if lo <= t <= end + 1.0),
                              default=None)
        out.append(st)
    for st in out:
        total = spent_by_host.get(st["host"]) or 0.0
        st["share"] = st["spent"] / total if total > 0 else 0.0
        usual, dip = st["usual_s"], st["dip_s"]
        if usual is None or dip is None:
            continue
        threshold = max(STATEMENT_RISE * usual, usual + STATEMENT_FLOOR_S)
        if dip < threshold:
            continue
        flight = sts.in_flight.get((st["host"], st["queryid"]), [])

        def slow(iv: tuple[float, float, float, float]) -> bool:
            # Slow calls finished in it, or none finished while sessions were in it (stuck).
            return (iv[2] > 0 and iv[3] / iv[2] >= threshold) or (
                iv[2] == 0 and any(iv[0] < t <= iv[1] and n > 0 for t, *_, n in flight))
        active_s = sum(max(0.0, min(iv[1], end) - max(iv[0], lo)) for iv in st["window"] if slow(iv))
        if st["after"] is not None and slow(st["after"]):
            active_s = max(active_s, ctx.interval_s)  # its slow calls were counted when they ended
        rest_s = sum(iv[1] - iv[0] for iv in st["rest"])
        rest_slow = sum(iv[1] - iv[0] for iv in st["rest"] if slow(iv))
        st["usual_share"] = rest_slow / rest_s if rest_s >= 2 * ctx.interval_s else 0.0
        st["active_s"] = active_s
        # One statement's own trouble, not everyone's: under a CPU hog or a busy disk every statement slows
        # alike, and the cause is elsewhere. Held against how much the other statements slowed (median).
        others = [o["dip_s"] / o["usual_s"] for o in out if o is not st and o["host"] == st["host"]
                  and o.get("usual_s") and o.get("dip_s") is not None]
        specific = max(0.0, 1.0 - (statistics.median(others) if others else 1.0) / (dip / usual))
        st["others_rise"] = round(statistics.median(others), 2) if others else None
        st["strength"] = (1.0 - usual / dip) * specific * min(1.0, st["share"] / STATEMENT_FULL_SHARE)
        length = max(end - (lo + LEAD_S), ctx.interval_s)
        st["score"] = Statement.weight * lift(min(1.0, active_s / length), st["usual_share"]) * st["strength"]
    return out


def _usual(rest: list[tuple[float, float, float, float]]) -> float | None:
    """A statement's usual time per call outside the dip: the median over the readings with calls; from one
    reading (a collapse 10 s into a run, before the collector read it every second), that reading's own."""
    per = [iv[3] / iv[2] for iv in rest if iv[2] > 0]
    if len(per) >= 2:
        return statistics.median(per)
    calls = sum(iv[2] for iv in rest)
    return sum(iv[3] for iv in rest) / calls if calls >= STATEMENT_MIN_CALLS else None


def per_call(seconds: float) -> str:
    """A time per call as people read it: 0.21 ms, 4.5 ms, 48 ms, 2,950 ms."""
    ms = seconds * 1000
    return f"{ms:.2f} ms" if ms < 1 else f"{ms:.1f} ms" if ms < 10 else f"{ms:,.0f} ms"


def _ms_details(st: dict) -> dict:
    return {"ms_per_call_before": None if st.get("usual_s") is None else round(st["usual_s"] * 1000, 4),
            "ms_per_call_in_dip": None if st.get("dip_s") is None else round(st["dip_s"] * 1000, 4)}


class Statement(Scorer):
    name = "statement"
    needs = ("pg_statement_calls_total", "pg_statement_exec_seconds_total", "pg_statement_active_sessions",
             "pg_statement_active_seconds_max")
    order = 100

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        st = max((st for st in slowed(dip, signals) if st.get("score")), key=lambda st: st["score"], default=None)
        if not st:
            return None
        text = (f"{st['text']}: {per_call(st['usual_s'])} → {per_call(st['dip_s'])} per call "
                f"({st['calls']:.0f} calls finished in the dip and the sample after, {st['share'] * 100:.0f}% of "
                "the top statements' time)")
        if st.get("in_flight"):
            text += "; in flight: " + st["in_flight"]
            if (st.get("longest_s") or 0.0) >= IN_FLIGHT_SHOWN_S:
                text += f", one for up to {st['longest_s']:.1f} s"
        if st["others_rise"] is not None:
            text += f"; the other statements {st['others_rise']:.1f}× their usual"
        return self.candidate(dip, st["active_s"], st["strength"], text, usual=st["usual_share"],
                              statement=st["text"], queryid=st["queryid"], share=round(st["share"], 3),
                              calls=st["calls"], others_rise=st["others_rise"], **_ms_details(st))

    def settle(self, dip: Dip, signals: Signals, found: list[Candidate]) -> None:
        """A statement slowed by the lock it waited on: the lock (with its blocker) is the answer, and its
        evidence names this statement's time per call."""
        lock = next((c for c in found if c.cause == "lock"), None)
        if lock is None:
            return
        for cand in found:
            if cand.cause == self.name and _waited_on_lock(signals, cand.details, lock, dip):
                cand.score *= 0.5
                cand.evidence += " (it waited on a lock)"


def _waited_on_lock(signals: Signals, details: dict, lock: Candidate, dip: Dip) -> bool:
    waiter = lock.details.get("waiting_statement") or {}
    if waiter.get("queryid") == details.get("queryid"):
        return True
    sts = signals.memo("statements", Statements)
    host_qid = [k for k in sts.in_flight if k[1] == details.get("queryid")]
    return any(sts.in_flight_view(h, q, dip.lo, dip.end)[2] >= 0.5 for h, q in host_qid)


def _lock_waiter(slowed: list[dict], stmt: dict | None) -> dict | None:
    """The statement sessions waited in on a heavyweight lock in the window: from the in-flight samples
    (most session samples on a Lock), else the lock-waits query's statement matched by its text."""
    # Those with a usual time per call first: the same text may also stand for sessions the collector
    # could not give a queryid, or the statement under another queryid, without counters.
    def counted(st: dict | None) -> dict | None:
        """The entry of the same text that has counters (its time per call), with the waiter's in-flight view."""
        if st is None or st["usual_s"] is not None:
            return st
        key = sqltext.key(st["text"])
        other = next((o for o in slowed if o["usual_s"] is not None and key and sqltext.key(o["text"]) == key), None)
        if other is None:
            return st
        return {**other, **{k: st[k] for k in ("in_flight", "lock_event", "lock_share") if st.get(k)},
                "longest_s": max(other.get("longest_s") or 0.0, st.get("longest_s") or 0.0) or None}

    def with_longest(st: dict | None) -> dict | None:
        """How long its sessions had been in flight, over every entry of its text: the sessions that waited
        on the lock may be under another queryid (or none yet) than the one with counters."""
        if st is None:
            return None
        key = sqltext.key(st["text"])
        longest = max([o.get("longest_s") or 0.0 for o in slowed if key and sqltext.key(o["text"]) == key]
                      + [st.get("longest_s") or 0.0])
        return {**st, "longest_s": longest or None}

    def most_waiting(candidates: list[dict]) -> dict | None:
        return with_longest(counted(max(candidates, key=lambda st: (st["usual_s"] is not None,
                                                                    st["lock_share"] * (st["spent"] + 1e-9 + st["calls"])))))

    waiting = [st for st in slowed if st.get("lock_event")]
    if stmt:
        # The lock-waits query saw which statement waited on the blocked lock: that one, in flight or not.
        # Without this, another statement's ordinary row-lock waits in the same seconds (tpcb-like's UPDATE
        # of its one pgbench_branches row, under load) could be named the waiter while the evidence names
        # the statement the lock-waits query saw.
        key = sqltext.key(stmt["statement"])
        named = [st for st in waiting if key and sqltext.key(st["text"]) == key]
        if named:
            return most_waiting(named)
        same = [st for st in slowed if key and sqltext.key(st["text"]) == key]
        if same:
            return with_longest(max(same, key=lambda st: st["usual_s"] is not None))
    return most_waiting(waiting) if waiting else None


def lock_detail(dip: Dip, signals: Signals, text: str) -> tuple[str, dict]:
    """The lock's evidence, with the statement its sessions waited in: the lock-waits query's statement and
    blocker, else the statement collector's view of the waiter (in flight on a heavyweight lock); its time
    per call."""
    stmt = signals.memo("statements", Statements).waiting_statement(dip.lo, dip.end)
    extra: dict[str, Any] = {"statement": stmt} if stmt else {}
    waiter = _lock_waiter(slowed(dip, signals), stmt)
    if stmt:
        text += f"; {stmt['statement']} waited on Lock:{stmt['wait_event']}"
        if stmt["blocker"]:
            state, _, query = stmt["blocker"].partition(": ")
            pid = f" (pid {stmt['blocker_pid']})" if stmt.get("blocker_pid") else ""
            text += f", blocked by a session {state}{pid}" + (f": {query}" if query else "")
    elif waiter and waiter.get("lock_event"):
        text += f"; {waiter['text']} waited on Lock:{waiter['lock_event']}"
    if waiter and waiter.get("usual_s") is not None:
        if waiter.get("dip_s") is not None:
            text = text.rstrip(";") + f"; {per_call(waiter['usual_s'])} → {per_call(waiter['dip_s'])} per call"
        else:
            text = text.rstrip(";") + f"; {per_call(waiter['usual_s'])} per call before"
        # A wait for a table lock comes while the statement is parsed, before its execution: not
        # in pg_stat_statements' time. How long its sessions had been at it shows the wait.
        longest = waiter.get("longest_s") or 0.0
        if longest >= IN_FLIGHT_SHOWN_S:
            text += f", in flight up to {longest:.1f} s"
            if longest > 10 * (waiter.get("dip_s") or 0.0):
                text += " (a wait for a table lock comes before execution, outside pg_stat_statements' time)"
        extra["waiting_statement"] = {"statement": waiter["text"], "queryid": waiter["queryid"],
                                      **_ms_details(waiter), "longest_in_flight_s": waiter.get("longest_s")}
    return text, extra


def register(registry: Registry) -> None:
    registry.add(Statement())
    registry.contribute("lock_detail", lock_detail)
