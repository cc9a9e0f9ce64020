"""What a collector of the benchwatch exporter is: the interface, its options, and the registry object.

A low room of its own, below the exporter daemon and the engine folders: the daemon's own collectors
(``benchwatch.exporter.*``) and each engine's (the modules its ``Engine.collector_modules`` names) are
written against it, and the daemon loads them all without the engines importing the daemon. It imports
nothing of benchwatch: what a collector sends is typed by :class:`Sample`, a protocol that
``benchwatch.model.samples.Sample`` (a room above this one) fits.

A collector module marks its factories with :func:`register_collector` (name, help, default on or
off, place in the polling order); a :class:`Registry` takes the marked factories of the modules it is
given and refuses a second collector of the same name. ``--[no-]collector.NAME`` flags are read from
the registry (:func:`add_collector_flags`).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


class Sample(Protocol):
    """One value of one series as a collector sends it (``benchwatch.model.samples.Sample`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def value(self) -> float: ...

    @property
    def timestamp_ms(self) -> int: ...


# Where a collector's samples go (remote write), and what a subscriber is shown: every batch sent.
Sink = Callable[[Sequence[Sample]], None]


class Collector(Protocol):
    """What the daemon drives: poll() reads its source and sends samples, collect() serves /metrics.

    A collector that works in threads of its own may count their CPU time in an attribute
    ``thread_cpu_seconds`` (seconds, growing): the daemon adds it to what its polls took
    (``benchwatch_exporter_collector_cpu_seconds_total``)."""

    def poll(self) -> object: ...

    def collect(self) -> Iterable: ...


@dataclass
class ExporterOptions:
    """What a collector factory may use; built once by the daemon from its command line."""

    runs_dir: str
    sink: Sink
    registry: CollectorRegistry
    # The database server's log, where the engine's collectors read its events (checkpoints).
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
    subscribe: Callable[[Sink], None] | None = None
    # on_possibly_low(callback): callback() whenever a live run's newest TPS line might be the start of a
    # dip (as the dips collector judges it), from the poll loop: a collector that samples faster then.
    on_possibly_low: Callable[[Callable[[], None]], None] | None = None
    # run_live(): whether a followed run printed a line lately (None: this daemon follows no runs, as an
    # agent's log follower). A collector whose signal matters only against a run samples slowly otherwise.
    run_live: Callable[[], bool] | None = None
    # The daemon's environment: an engine's collector reads its server's connection there, as its own
    # exporter would (libpq's PG* variables and a 0600 passfile; never argv). Empty: no server to read.
    environ: Mapping[str, str] = field(default_factory=dict)


Factory = Callable[[ExporterOptions], Collector | None]


T = TypeVar("T")


class Outbox(Generic[T]):
    """Samples a collector's own thread read, waiting for the daemon's poll to hand them to the sink: the sink
    (the remote-write queue's batches) is the poll loop's, whatever thread read the samples."""

    def __init__(self) -> None:
        self._samples: list[T] = []
        self._lock = threading.Lock()

    def put(self, samples: Sequence[T]) -> None:
        with self._lock:
            self._samples.extend(samples)

    def send(self, sink: Callable[[list[T]], None]) -> int:
        """Everything waiting, to ``sink`` (not called when nothing waits); how many samples."""
        with self._lock:
            ready, self._samples = self._samples, []
        if ready:
            sink(ready)
        return len(ready)


@dataclass(frozen=True)
class CollectorSpec:
    name: str
    help: str
    # Returns None when the options leave it nothing to do (e.g. no server log given).
    factory: Factory = field(compare=False)
    default: bool = True
    # Its place in the order of polling and of /metrics, lowest first (ties: the order modules were
    # loaded). A dip pass reads back what was sent before the dips collector's poll (ORDER_DIPS): a
    # source whose samples of the same poll it should see comes before it.
    order: int = 50


ORDER_RUNS = 10          # the run followers: the TPS lines everything else is judged against
ORDER_BEFORE_DIPS = 20   # a source a dip pass should see the same poll's samples of (the server log's)
ORDER_DIPS = 30          # the dips collector
ORDER_AFTER_DIPS = 40    # a source whose samples can wait for the next pass


def register_collector(name: str, help: str, *, default: bool = True, order: int = 50) -> Callable[[Factory], Factory]:
    """Decorator marking a collector factory: ``@register_collector("name", "what it does")``.

    It only marks the function; a :class:`Registry` given the module takes it (:meth:`Registry.load`)."""
    def mark(factory: Factory) -> Factory:
        factory.collector_spec = CollectorSpec(name, help, factory, default, order)  # type: ignore[attr-defined]
        return factory
    return mark


class DuplicateCollector(ValueError):
    """Two collectors of one name: each name is a flag and a label value, so the second is refused."""


class Registry(Mapping[str, CollectorSpec]):
    """Collectors by name, in polling order; a second collector of a name is refused
    (:class:`DuplicateCollector`), as prometheus_client's registry refuses a second series name."""

    def __init__(self) -> None:
        self._specs: dict[str, CollectorSpec] = {}
        self._where: dict[str, str] = {}  # name -> the module that registered it

    def add(self, spec: CollectorSpec, where: str = "") -> None:
        if spec.name in self._specs:
            raise DuplicateCollector(f"collector {spec.name!r} registered twice: by {self._where[spec.name] or '?'} "
                                     f"and by {where or '?'}")
        self._specs[spec.name] = spec
        self._where[spec.name] = where
        # Stable: equal orders keep the order they were added in.
        ordered = sorted(self._specs.values(), key=lambda s: s.order)
        self._specs = {s.name: s for s in ordered}

    def load(self, module: ModuleType) -> list[CollectorSpec]:
        """Adds the factories ``module`` defines and marked with :func:`register_collector`; returns them."""
        found = [spec for value in vars(module).values()
                 if (spec := getattr(value, "collector_spec", None)) is not None and isinstance(spec, CollectorSpec)
                 # One imported from another module is that module's to register.
                 and getattr(spec.factory, "__module__", None) == module.__name__]
        for spec in found:
            self.add(spec, module.__name__)
        return found

    def module_of(self, name: str) -> str:
        """The module that registered collector ``name``."""
        return self._where[name]

    def __getitem__(self, name: str) -> CollectorSpec:
        return self._specs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)


def add_collector_flags(parser: argparse.ArgumentParser, registry: Mapping[str, CollectorSpec]) -> None:
    """``--[no-]collector.NAME`` for every collector of ``registry``."""
    for spec in registry.values():
        state = "on" if spec.default else "off"
        parser.add_argument(f"--collector.{spec.name}", dest=f"collector_{spec.name}",
                            action=argparse.BooleanOptionalAction, default=spec.default,
                            help=f"{spec.help} (default {state})")


def enabled_collectors(args: argparse.Namespace, registry: Mapping[str, CollectorSpec]) -> dict[str, bool]:
    """The --[no-]collector.NAME choices of parsed arguments."""
    return {name: getattr(args, f"collector_{name}") for name in registry}


@dataclass(frozen=True)
class MetricsDoc:
    """A collector module's part of docs/metrics.md (its module's ``metrics_doc()`` returns one)."""

    # Its sections, each (heading, prose and the table's head; its series: name -> (type, meaning)).
    sections: Sequence[tuple[str, Mapping[str, tuple[str, str]]]]
    # Its own health series, in the exporter's section, with a sentence about them.
    self_metrics: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    self_note: str = ""
