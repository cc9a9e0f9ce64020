"""The benchwatch exporter: one collector per module, switched like node_exporter's.

The collector interface and its registry are ``benchwatch.collector``'s (re-exported here for the
modules and tests that import them from here). The daemon's collectors are its own modules,
:data:`COLLECTOR_MODULES`, and every engine's (``Engine.collector_modules``, modules of the engine's
folder): :func:`load_collectors` loads them into a fresh :class:`Registry`, which refuses a second
collector of a name. ``--[no-]collector.NAME`` flags and the daemon's set of collectors are both read
from it, so a new collector is one module and its name in one list.
"""

from __future__ import annotations

import argparse
import importlib

from benchwatch.collector import (
    Collector,
    CollectorSpec,
    DuplicateCollector,
    ExporterOptions,
    Registry,
    register_collector,
)
from benchwatch.collector import add_collector_flags as _add_flags
from benchwatch.collector import enabled_collectors as _enabled

__all__ = ["COLLECTOR_MODULES", "Collector", "CollectorSpec", "DuplicateCollector", "ExporterOptions", "Registry",
           "add_collector_flags", "collector_modules", "enabled_collectors", "load_collectors", "register_collector"]

# The daemon's own collector modules; each engine adds its own (their place in the polling order is
# each collector's ``order``).
COLLECTOR_MODULES = ("pgbench_runs", "dips", "processes", "host")


def collector_modules() -> list[str]:
    """The modules that define collectors, imported: the daemon's own, then each engine's (engines by name)."""
    from benchwatch import engines
    from benchwatch.util.plugins import folder_module

    modules = [importlib.import_module(f"{__name__}.{m}").__name__ for m in COLLECTOR_MODULES]
    for engine in engines.load_engines().values():
        for name in engine.collector_modules:
            module = folder_module(engine, name)
            if module is None:
                raise RuntimeError(f"{engine!r} names collector module {name!r}, which its folder does not have")
            modules.append(module.__name__)
    return modules


def load_collectors() -> Registry:
    """A fresh registry of every collector, in polling order (:class:`DuplicateCollector` on a name twice).

    Not done when this package is imported: the collectors' imports (prometheus_client, the run
    model, the engines') are the daemon's business, and would double the start-up time of every
    other command.
    """
    registry = Registry()
    for name in collector_modules():
        registry.load(importlib.import_module(name))
    return registry


def add_collector_flags(parser: argparse.ArgumentParser) -> None:
    """``--[no-]collector.NAME`` for every collector."""
    _add_flags(parser, load_collectors())


def enabled_collectors(args: argparse.Namespace) -> dict[str, bool]:
    """The --[no-]collector.NAME choices of parsed arguments."""
    return _enabled(args, load_collectors())
