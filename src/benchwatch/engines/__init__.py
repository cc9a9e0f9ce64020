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
from typing import TYPE_CHECKING, Any, ClassVar

from benchwatch.util.plugins import folder_part

if TYPE_CHECKING:
    import signal

    from benchwatch.stack.native import Stack


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

    # -- its part of the native stack (benchwatch.stack.native) ---------------------------------
    # Its components in the stack (server, exporter) -> default port on 127.0.0.1; each also gets a
    # --<component>-port flag and a BENCHWATCH_<COMPONENT>_PORT variable.
    default_ports: ClassVar[Mapping[str, int]] = {}
    # Component -> the Debian package that brings its program (named in up's "not installed" line, and
    # installed by scripts/install-deps for a stack on this engine: benchwatch.stack.packages).
    packages: ClassVar[Mapping[str, str]] = {}
    # Debian packages of what only some uses need (e.g. "shards": the sharded demo's PL/Proxy), by name;
    # installed only when asked for (scripts/install-deps --feature NAME, demo --shards).
    feature_packages: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # The function of benchwatch.demo that is `benchwatch demo` on this engine, and the load generator
    # (its name in benchwatch.loadgens) that demo runs: what the demo installs besides the engine's packages.
    demo: ClassVar[str] = "demo"
    demo_tool: ClassVar[str] = ""
    # Whether the stack can run several embedded instances of its server side by side (--instances N).
    instances: ClassVar[bool] = False

    def binary(self, component: str) -> str | None:
        """The program of one of its components (base name, without an instance suffix); None if missing."""
        return None

    def stack_part(self, stack: Stack) -> StackPart:
        """Its server components in one native stack."""
        return StackPart(self, stack)

    def describe_server(self, env: Mapping[str, str]) -> dict:
        """meta.json's facts of the server a tool with this environment reaches (server_version, settings),
        best effort; {} when the engine cannot be asked that way."""
        return {}

    def capabilities(self, facts: Mapping[str, Any]) -> dict[str, bool]:
        """Which of its statistics the server has (meta.json's "capabilities", e.g. pg_stat_wal), from the
        facts describe_server gave: recorded ones first, else what its version and settings say."""
        return dict(facts.get("capabilities") or {})

    # -- its part of `benchwatch explain` (benchwatch.explain.causes, docs/explain.md) ----------
    # The causes of a TPS dip it brings, beside explain's engine-neutral ones (client_stall,
    # clients_aborted, disk): explain weighs these for its runs and no other engine's.
    explain_signals: ClassVar[tuple[str, ...]] = ()
    # Signal -> the capability (a key of capabilities()) it needs of the server; a run whose server
    # lacks it lists the signal as absent, with capability_missing()'s reason, instead of scoring nothing.
    explain_needs: ClassVar[Mapping[str, str]] = {}
    # The raw series its signals read (fetched from Prometheus for explain, kept in the archive).
    explain_selectors: ClassVar[tuple[str, ...]] = ()
    # 1 while its exporter reaches the server, 0 while not: the target_down signal.
    up_metric: ClassVar[str] = ""
    # Its server's process names (comm, as ps shows them): the exporter's processes collector counts
    # their CPU as the database's, apart from other processes' (explain's cpu_contention).
    server_processes: ClassVar[frozenset[str]] = frozenset()

    def capability_missing(self, capability: str, facts: Mapping[str, Any]) -> str:
        """Why the server has no ``capability``, in a few words for explain's report."""
        return f"{capability} is not available on the server"

    def absent_signals(self, facts: Mapping[str, Any]) -> dict[str, str]:
        """Its explain signals the server of a run (meta.json's facts) cannot give, each with the reason.
        A capability that is not known (a run recorded without the server's version) counts as there."""
        caps = self.capabilities(facts)
        return {signal: self.capability_missing(need, facts) for signal in self.explain_signals
                if (need := self.explain_needs.get(signal)) and caps.get(need) is False}

    # -- its part of the evidence of a difference (benchwatch.evidence: sweep's report, the history) --
    # Plain data, each the fields of a benchwatch.evidence.Signal: (name, PromQL with {w} for the run's
    # window, kind, unit, scale): its server's counters per transaction, its wait events.
    evidence_signals: ClassVar[tuple[tuple[Any, ...], ...]] = ()

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
    # By convention, from its folder's summary.py where it has one: figures(ctx), tables(summary),
    # settings_tables(summary), COMPARE_ROWS.
    context_selectors: ClassVar[tuple[str, ...]] = ()  # series its summary reads beyond the dashboard's
    # Its series a finished run's archive keeps (benchwatch.query.archive): everything its panels, summary
    # and explain signals read, so that a snapshot rebuilt from the run directory draws what one from the
    # live Prometheus draws (tests/unit/test_archive.py checks that every query is covered). Plain data:
    # the exporter daemon reads it without importing the summary or dashboard code.
    archived_selectors: ClassVar[tuple[str, ...]] = ()

    def summary_figures(self, ctx: Any) -> dict:
        """Its figures of a run (a benchwatch.share.summary.Context), merged into the summary's dict."""
        figures = folder_part(self, "summary", "figures")
        return figures(ctx) if figures else {}

    def summary_tables(self, summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        """Its tables of the summary (events during the run: checkpoints, flushing pressure)."""
        tables = folder_part(self, "summary", "tables")
        return tables(summary) if tables else []

    def settings_tables(self, summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        """The server's settings, last in the summary."""
        tables = folder_part(self, "summary", "settings_tables")
        return tables(summary) if tables else []

    @property
    def compare_rows(self) -> list[Any]:
        """Its rows of a comparison (benchwatch.share.summary.CompareRow)."""
        return list(folder_part(self, "summary", "COMPARE_ROWS", []))

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


class StackPart:
    """One engine's components in a native stack (benchwatch.stack.native.Stack, the ``stack``): which run,
    how each starts, stops, reports health and logs, and what the shared components need of it (scrape
    targets, the benchwatch exporter's arguments, the status JSON, the environment of a run's tool).

    Component names are the stack's (pid files, logs, ports, the supervisor's records): a server run once
    per instance is ``name`` for instance 1 and ``name-i`` for instance i > 1."""

    def __init__(self, engine: Engine, stack: Stack) -> None:
        self.engine = engine
        self.stack = stack

    def servers(self) -> list[str]:
        """Its server components the stack starts, first of all (none when it watches an existing server)."""
        return []

    def exporters(self) -> list[str]:
        """Its exporters, started once the shared exporters are up."""
        return []

    def split(self, component: str) -> tuple[str, int]:
        """(base component, instance) of one of its component names."""
        return component, 1

    def owns(self, component: str) -> bool:
        return self.split(component)[0] in self.engine.default_ports

    def is_server(self, component: str) -> bool:
        return False

    def start(self, component: str) -> None:
        raise NotImplementedError

    def after_start(self, component: str) -> None:
        """Once the component is healthy (a database created, users and client files written)."""

    def after_up(self) -> None:
        """Once every component is up (files a client of the stack reads)."""

    def pid_source(self, component: str) -> str | None:
        """The pid file a server writes itself; None for a component whose pid the stack records."""
        return None

    def log_file(self, component: str) -> str | None:
        """Where the component logs, if not logs/<component>.log."""
        return None

    def healthy(self, component: str) -> bool | None:
        """Whether a running server answers; None for a component judged by its HTTP endpoint."""
        return None

    def stop_signal(self, component: str) -> signal.Signals | None:
        """The signal of its clean shutdown, if not SIGTERM."""
        return None

    def scrape_targets(self) -> list[dict]:
        """The file_sd entries of its scrape job (targets/<scrape_job>.json)."""
        return []

    def exporter_args(self) -> list[str]:
        """Arguments of the benchwatch exporter for this engine's server (its log, its labels)."""
        return []

    def exporter_env(self) -> dict[str, str]:
        """Variables of the benchwatch exporter's environment for this engine's server (a connection's
        parameters, the password in a 0600 file: never argv)."""
        return {}

    def status(self, restarts: Mapping[str, Mapping[str, Any]]) -> dict:
        """Its keys of ``status --json`` (e.g. "postgres", "mysql"), each a dict."""
        return {}

    def client_env(self) -> dict[str, str]:
        """Variables a tool run on the stack gets to reach its server (the password in a 0600 file)."""
        return {}

    def targets(self) -> list[Any]:
        """The server instances the stack watches, each with a ``name`` (its target label)."""
        return []

    def variant_server(self, kind: str, value: str, home: str) -> VariantServer | None:
        """A server of an experiment's variant that is not the stack's: ``kind`` "bindir" (another build,
        started from its own data directory in ``home``) or "dsn" (one that already runs); None: this engine
        has no such variant."""
        return None

    def server_control(self, target: str | None = None) -> ServerControl | None:
        """Its server (or the target so named) for experiments: settings changed and restored, the state
        between runs; None when benchwatch cannot act on it."""
        return None


class VariantServer:
    """A server one of an experiment's variants runs on, beside the stack's (benchwatch sweep)."""

    def start(self) -> list[str]:
        """Up and answering (made first where it has no data directory yet): what was done."""
        return []

    def stop(self) -> None:
        """Stopped if it was started here."""

    def client_env(self) -> dict[str, str]:
        """The variables a tool gets to reach it (the password in a 0600 file)."""
        raise NotImplementedError

    def control(self) -> ServerControl | None:
        return None


class SettingsError(Exception):
    """A setting that cannot be applied: the message says which and why."""


class ServerControl:
    """One server for ``benchwatch sweep`` (benchwatch.experiment): its settings read, changed and put back,
    and what is done before each run so that one run does not weigh on the next. Each method returns
    what it did, in a few words each, for the experiment's record."""

    def settings(self, names: list[str]) -> dict[str, dict[str, Any] | None]:
        """name -> {"value": as the server shows it, "restart": whether a change needs a restart, "persisted":
        whether it was set by benchwatch's means before (restored as that value)}; None: no such setting."""
        raise NotImplementedError

    def apply(self, values: Mapping[str, str]) -> list[str]:
        """Set the settings (reload, or restart when one needs it); SettingsError if the server refuses."""
        raise NotImplementedError

    def restore(self, originals: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """The settings back as ``settings()`` read them before the experiment."""
        raise NotImplementedError

    def before_run(self, checkpoint: bool = True) -> list[str]:
        """Before each run: dirty pages written (a checkpoint), the tool's growing tables emptied."""
        return []

    def facts(self) -> dict[str, Any]:
        """server_version and whether the build checks assertions (``debug_assertions``)."""
        return {}


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
