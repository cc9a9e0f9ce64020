"""Candidate causes of a dip, from the run's raw series, each scored and with its evidence.

Each cause is a scorer (``benchwatch.causes.Scorer``: its name, the series it reads, its weight, and
``score(dip, signals)`` giving a candidate with its evidence), in one registry that refuses a name twice:
the client's and the host's, registered here by explain's own modules (client.py: client_stall,
clients_aborted; targets.py: target_down; locks.py: lock; host.py: disk, cpu_contention,
database_cpu_bound, io_pressure), and each engine's, registered by its folder's modules
(``Engine.cause_modules``: PostgreSQL's checkpoint, wal_fpi, autovacuum, statement and the server log's
events; MySQL's innodb_flushing). The method (score = weight x lift(overlap, usual) x strength, base rates,
MIN_SCORE) is docs/explain.md's; benchwatch.causes holds the toolkit the scorers share.

Which scorers are weighed is the run's: the engine-neutral ones (NEUTRAL, HOST) and those its engine
brings (``Engine.explain_signals``), less those its server cannot give (``Engine.absent_signals``): a
PostgreSQL run is not blamed on an InnoDB region of another target, nor a MySQL run on a PostgreSQL
checkpoint.
"""

from __future__ import annotations

import functools
from typing import Any

from benchwatch import causes as kit
from benchwatch import engines, loadgens
from benchwatch.causes import LEAD_S, MIN_SCORE, Candidate, Context, Registry, Timeline
from benchwatch.explain import client, host, locks, targets
from benchwatch.query.series import Series
from benchwatch.util.plugins import folder_module

__all__ = [
    "HOST",
    "LEAD_S",
    "MIN_SCORE",
    "NEUTRAL",
    "NEUTRAL_SELECTORS",
    "Candidate",
    "Context",
    "Registry",
    "Signals",
    "Timeline",
    "registry",
    "run_selectors",
    "selectors",
]

# The signals of every run, whatever its engine: the client's and the host's (listed after the engine's).
NEUTRAL = ("client_stall", "clients_aborted", "disk")
HOST = host.HOST

# Series the neutral signals read (raw, as stored), for fetching from Prometheus and saving with a run;
# each engine's are its Engine.explain_selectors.
NEUTRAL_SELECTORS = (
    "node_disk_io_time_seconds_total", "node_disk_read_time_seconds_total", "node_disk_write_time_seconds_total",
    "node_disk_reads_completed_total", "node_disk_writes_completed_total", "node_disk_written_bytes_total",
    "node_pressure_cpu_waiting_seconds_total", "node_pressure_io_waiting_seconds_total",
    "benchmark_host_cpu_seconds_total", "benchmark_host_top_process_cpu_ratio", "benchmark_host_cpus",
)


@functools.cache
def registry() -> Registry:
    """Every cause's scorer: explain's own, then each engine's (its folder's Engine.cause_modules, each
    with a ``register(registry)``), in the engines registry's order."""
    found = Registry()
    for own in (client, targets, locks, host):
        own.register(found)
    for engine in engines.load_engines().values():
        for name in engine.cause_modules:
            module = folder_module(engine, name)
            if module is None or not hasattr(module, "register"):
                raise ImportError(f"engine {engine.name}: cause module {name!r} of its folder is missing "
                                  "or has no register(registry)")
            module.register(found)
    return found


def __getattr__(name: str) -> Any:
    if name == "WEIGHTS":  # cause -> its scorer's weight (read by tests and docs)
        return {s.name: s.weight for s in registry()}
    raise AttributeError(name)


def selectors() -> list[str]:
    """Series every signal reads: the neutral ones' and every engine's (the run's engine is not known
    before its meta.json is read, and the fetch is one query either way)."""
    out = list(NEUTRAL_SELECTORS)
    for engine in engines.load_engines().values():
        out += [s for s in engine.explain_selectors if s not in out]
    return out


def run_selectors(run_id: str) -> list[str]:
    """Everything explaining a run reads: its own benchmark_* series and the signals."""
    return [loadgens.run_selector(run_id), *selectors()]


class Signals(kit.Signals):
    """Every signal of a run, read once from its series; ``candidates(start, end)`` scores every weighed
    cause for a dip."""

    def __init__(self, series: list[Series], ctx: Context, scorers: Registry | None = None):
        super().__init__(series, ctx, scorers if scorers is not None else registry())

    @property
    def locks(self) -> dict[str, Timeline]:
        """Sessions waiting on locks, per wait event (every engine's contribution)."""
        return self.memo("locks", locks.waits)

    def candidates(self, start: float, end: float) -> list[Candidate]:
        return self.registry.candidates(self, start, end)

    def server_stopped(self, lo: float, hi: float) -> list[str]:
        """What the signals say of the server going away in [lo, hi]: the engine's (a shutdown checkpoint),
        then its exporter's up series at 0."""
        said = [line for says in self.contributions("server_stopped") for line in says(self, lo, hi)]
        return said + targets.down_lines(self, lo, hi)
