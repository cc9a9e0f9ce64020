"""The benchwatch exporter: one collector per module, switched like node_exporter's.

Each collector module registers itself here with :func:`register_collector`
(name, help, default on or off, and a factory taking the exporter's options).
``--[no-]collector.NAME`` flags and the daemon's set of collectors are both
read from :data:`COLLECTORS`, so a new collector is one module and its name
in :data:`COLLECTOR_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from benchwatch.model.samples import Sample


class Collector(Protocol):
    """What the daemon drives: poll() reads its source and sends samples, collect() serves /metrics."""

    def poll(self) -> object: ...

    def collect(self) -> Iterable: ...


@dataclass
class ExporterOptions:
    """What a collector factory may use; built once by the daemon from its command line."""

    runs_dir: str
    sink: Callable[[list[Sample]], None]
    registry: CollectorRegistry
    server_log: str | None = None
    clock: Callable[[], float] = time.time
    # Prometheus' base URL when finished runs' series are to be saved in their run directory.
    archive_url: str | None = None
    # target/host (the shared labelling contract) for series about the database, e.g. checkpoints.
    database_labels: dict[str, str] = field(default_factory=dict)
    # The sink's delivery marks and backlog (benchwatch.sink.remote_write.BufferedRemoteWriter.mark):
    # how a collector learns what Prometheus has acknowledged, and when to stop reading ahead.
    mark: Callable[[Callable[[], None]], None] | None = None
    backlog: Callable[[], int] | None = None
    # subscribe(callback): callback(samples) with every batch given to ``sink`` from then on, by any
    # collector, right after it is queued: how one collector sees another's samples without
    # reading them back from Prometheus (the dips collector watches the TPS lines this way).
    subscribe: Callable[[Callable[[list[Sample]], None]], None] | None = None
    # libpq keywords of the database the stack watches, without a password (PGPASSFILE holds it), from
    # the daemon's PG* environment: the statements collector's connection. None: no database to read.
    pg_params: dict[str, str] | None = None


@dataclass(frozen=True)
class CollectorSpec:
    name: str
    help: str
    # Returns None when the options leave it nothing to do (e.g. no server log given).
    factory: Callable[[ExporterOptions], Collector | None] = field(compare=False)
    default: bool = True


# name -> spec, filled by load_collectors().
COLLECTORS: dict[str, CollectorSpec] = {}
# The modules that register collectors; their order is the order of polling and of /metrics.
COLLECTOR_MODULES = ("pgbench_runs", "checkpoints", "dips", "processes", "statements")


def register_collector(name: str, help: str, *, default: bool = True):
    """Decorator for a collector factory: ``@register_collector("name", "what it does")``."""
    def add(factory: Callable[[ExporterOptions], Collector | None]):
        if name in COLLECTORS:
            raise ValueError(f"collector {name!r} registered twice")
        COLLECTORS[name] = CollectorSpec(name, help, factory, default)
        return factory
    return add


def load_collectors() -> dict[str, CollectorSpec]:
    """Import the collector modules, which register themselves; returns :data:`COLLECTORS`.

    Not done when this package is imported: the collectors' imports
    (prometheus_client, the run model) are the daemon's business, and would
    double the start-up time of every other command.
    """
    modules = [f"{__name__}.{m}" for m in COLLECTOR_MODULES]
    for module in modules:
        importlib.import_module(module)
    # In COLLECTOR_MODULES' order, whichever module happened to be imported first.
    ordered = sorted(COLLECTORS.values(), key=lambda spec: modules.index(spec.factory.__module__))
    COLLECTORS.clear()
    COLLECTORS.update((spec.name, spec) for spec in ordered)
    return COLLECTORS


def add_collector_flags(parser: argparse.ArgumentParser) -> None:
    """``--[no-]collector.NAME`` for every registered collector."""
    for spec in load_collectors().values():
        state = "on" if spec.default else "off"
        parser.add_argument(f"--collector.{spec.name}", dest=f"collector_{spec.name}",
                            action=argparse.BooleanOptionalAction, default=spec.default,
                            help=f"{spec.help} (default {state})")


def enabled_collectors(args: argparse.Namespace) -> dict[str, bool]:
    """The --[no-]collector.NAME choices of parsed arguments."""
    return {name: getattr(args, f"collector_{name}") for name in load_collectors()}
