"""The client's causes of a dip, whatever the engine: the tool printed nothing (client_stall), clients
aborted (clients_aborted). Registered by benchwatch.explain.causes."""

from __future__ import annotations

from benchwatch.causes import Candidate, Dip, Registry, Scorer, Signals, clean
from benchwatch.model.run import STALL_FACTOR  # as the run model: no line for 1.5 intervals is a stall
from benchwatch.model.samples import is_stale_marker


def line_gaps(signals: Signals) -> list[tuple[float, float]]:
    """Stretches without a progress line from the run's tool: gaps between its lines (the exporter's
    stall zeros, marked by benchmark_progress_stalled, are not lines)."""
    run = signals.ctx.run_id
    tps = [s for s in signals.named("benchmark_progress_tps") if s.labels.get("run_id") == run]
    stalled = {ts for s in signals.named("benchmark_progress_stalled") if s.labels.get("run_id") == run
               for ts, v in s.samples if v == 1}
    if not tps:
        return []
    lines = [ts / 1000 for ts, v in tps[0].samples if ts not in stalled and not is_stale_marker(v)]
    gap = STALL_FACTOR * signals.ctx.interval_s
    out = [(a, b) for a, b in zip(lines, lines[1:]) if b - a > gap + 1e-3]
    if stalled and lines:  # still silent at the end (a run followed live)
        last_stall = max(stalled) / 1000
        if last_stall > lines[-1]:
            out.append((lines[-1], last_stall))
    return out


def aborts(signals: Signals) -> list[tuple[float, float]]:
    """(time, clients aborted then) for each rise of benchmark_aborted_clients_total."""
    out = []
    for s in signals.named("benchmark_aborted_clients_total"):
        if s.labels.get("run_id") != signals.ctx.run_id:
            continue
        prev = 0.0
        for t, v in clean(s):
            if v > prev:
                out.append((t, v - prev))
            prev = v
    return out


class ClientStall(Scorer):
    """The tool printed nothing: the client itself was stopped (or, before pgbench 10, all of thread 0's
    clients were blocked: its progress lines then come in a burst)."""
    name = "client_stall"
    needs = ("benchmark_progress_tps", "benchmark_progress_stalled")
    order = 10

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        gaps = signals.memo("line_gaps", line_gaps)
        silent = sum(max(0.0, min(dip.end, b) - max(dip.lo, a)) for a, b in gaps)
        if silent <= 0:
            return None
        old = signals.ctx.progress_held_back
        longest = max(b - a for a, b in gaps if b >= dip.lo and a <= dip.end)
        return self.candidate(dip, silent, 0.5 if old else 1.0,
                              f"no progress line from {signals.ctx.tool} for {longest:.1f} s",
                              usual=signals.usual_spans(gaps, dip.lo, dip.end), silent_seconds=round(silent, 3))


class ClientsAborted(Scorer):
    name = "clients_aborted"
    needs = ("benchmark_aborted_clients_total",)
    order = 20

    def score(self, dip: Dip, signals: Signals) -> Candidate | None:
        ctx = signals.ctx
        aborted = [(t, n) for t, n in signals.memo("aborts", aborts) if dip.lo <= t <= dip.end + ctx.interval_s]
        if not aborted:
            return None
        n = sum(k for _, k in aborted)
        clients = ctx.clients or n
        return self.candidate(dip, dip.end - max(dip.lo, aborted[0][0]) + ctx.interval_s,
                              min(1.0, n / max(clients, 1)), f"{n:.0f} of {clients} clients aborted", aborted=n)


def register(registry: Registry) -> None:
    registry.add(ClientStall())
    registry.add(ClientsAborted())
