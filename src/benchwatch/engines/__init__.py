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
from collections.abc import Callable, Mapping
from typing import Any, ClassVar


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

    def describe_server(self, env: Mapping[str, str]) -> dict:
        """meta.json's facts of the server a tool with this environment reaches (server_version, settings),
        best effort; {} when the engine cannot be asked that way."""
        return {}

    # -- its part of the dashboards (benchwatch.grafana.dashboards) ----------------------------
    server_transactions_text: ClassVar[str] = "commits+rollbacks per second counted by the selected targets' servers"
    regions_text: ClassVar[str] = ""         # what the shaded regions over the TPS curve are
    regions_name: ClassVar[str] = "its regions"
    panels_summary: ClassVar[str] = ""       # what its panels of a run dashboard show, for the description

    def server_transactions_expr(self) -> str:
        """PromQL: commits+rollbacks per second on the selected targets, beside the tool's TPS."""
        raise NotImplementedError

    def annotations(self) -> list[Any]:
        """Its regions over every dashboard's time axis (PrometheusAnnotation builders)."""
        return []

    def dashboard_panels(self, layout: Any) -> list[Any]:
        """Its section of a run dashboard, starting with a row (panel builders placed by ``layout``)."""
        return []

    def dashboards(self) -> dict[str, Callable[[], dict]]:
        """Its own dashboards: file name -> builder of the dashboard JSON."""
        return {}

    # -- its part of a run's summary and of comparisons (benchwatch.share) -----------------------
    context_selectors: ClassVar[tuple[str, ...]] = ()  # series its summary reads beyond the dashboard's
    # Its series a finished run's archive keeps (benchwatch.query.archive): everything its panels, summary
    # and explain signals read, so that a snapshot rebuilt from the run directory draws what one from the
    # live Prometheus draws (tests/unit/test_archive.py checks that every query is covered). Plain data:
    # the exporter daemon reads it without importing the summary or dashboard code.
    archived_selectors: ClassVar[tuple[str, ...]] = ()

    def summary_figures(self, ctx: Any) -> dict:
        """Its figures of a run (a benchwatch.share.summary.Context), merged into the summary's dict."""
        return {}

    def summary_tables(self, summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        """Its tables of the summary (events during the run: checkpoints, flushing pressure)."""
        return []

    def settings_tables(self, summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        """The server's settings, last in the summary."""
        return []

    @property
    def compare_rows(self) -> list[Any]:
        """Its rows of a comparison (benchwatch.share.summary.CompareRow)."""
        return []

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
