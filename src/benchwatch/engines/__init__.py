"""Database engines: one folder per engine family, each an :class:`Engine`, found by name.

As patroni loads its DCS backends (``AbstractDCS``, ``get_dcs``): every
subpackage ``benchwatch.engines.<family>`` holds everything an engine brings
(its server components and how they start, stop and report health; server facts,
settings and capabilities for meta.json; its exporter and scrape job; its
recording and alert rules; its dashboard rows, explain signals, summary and
compare rows) and exposes one instance as ``ENGINE``. The stack and the agent
look the engine up here instead of comparing strings; one name per family
(``postgresql``, ``mysql``) in code, JSON and labels, with the names users type
(``--engine postgres|mariadb``) as aliases. MariaDB and MySQL are flavours of
``mysql``, recorded with their version beside it.

This module is the interface only: it imports no engine folder at import time.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import ClassVar


class UnknownEngine(KeyError):
    def __str__(self) -> str:
        return f"unknown engine {self.args[0]!r}: use one of {', '.join(choices())}"


class Engine:
    """Everything benchwatch knows of one engine family. Subclasses live in their own folder."""

    name: ClassVar[str]                      # the family: in meta.json, labels and JSON
    title: ClassVar[str]                     # as people write it: "PostgreSQL", "MySQL/MariaDB"
    aliases: ClassVar[tuple[str, ...]] = ()  # other names users give it (--engine mariadb)
    default: ClassVar[bool] = False          # what the stack runs when no engine is asked for
    scrape_job: ClassVar[str]                # its exporter's job in prometheus/prometheus.yml
    # Recording-rule files of prometheus/rules/ about its series alone, loaded only by a stack
    # that runs it (a group selecting nothing still costs Prometheus CPU every second).
    rule_files: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


_LOADED: dict[str, Engine] = {}


def load_engines() -> dict[str, Engine]:
    """Every engine, by family name: the ``ENGINE`` of each folder of this package."""
    if not _LOADED:
        found: dict[str, Engine] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if info.ispkg:
                engine = getattr(importlib.import_module(f"{__name__}.{info.name}"), "ENGINE", None)
                if isinstance(engine, Engine):
                    found[engine.name] = engine
        if sum(e.default for e in found.values()) != 1:
            raise RuntimeError(f"exactly one engine must be the default: {sorted(found)}")
        _LOADED.update(found)
    return _LOADED


def get(name: str) -> Engine:
    """The engine a family name or an alias names; :class:`UnknownEngine` otherwise."""
    for engine in load_engines().values():
        if name == engine.name or name in engine.aliases:
            return engine
    raise UnknownEngine(name)


def default() -> Engine:
    return next(e for e in load_engines().values() if e.default)


def choices() -> list[str]:
    """Every name an engine may be given by: families and aliases (for --engine)."""
    return sorted({n for e in load_engines().values() for n in (e.name, *e.aliases)})
