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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from benchwatch.util.plugins import PluginRegistry, folder_part

if TYPE_CHECKING:
    import signal


class Host(Protocol):
    """What an engine's part may ask of the stack that runs it (benchwatch.stack.native.Stack is one): its
    files and configuration, and its process manager. Narrow on purpose: an engine names no stack code, and
    the stack names no engine."""

    # The stack's configuration (benchwatch.stack.config.Config): ports, state dir, labels, its options.
    cfg: Any

    def out(self, message: str) -> None: ...     # a line for the user (up's progress)

    def path(self, *parts: str) -> str: ...      # a path under the state dir

    def address(self, component: str) -> str: ...  # host:port of a component

    def installed(self, component: str) -> str: ...  # its program; StackError when missing

    def base_env(self) -> dict[str, str]: ...    # the environment a component starts with

    def spawn(self, component: str, argv: list[str], env: dict[str, str] | None = None,
              user: str | None = None) -> int: ...

    def pid(self, component: str) -> int | None: ...

    def healthy(self, component: str) -> bool: ...

    def restart(self, component: str) -> None: ...

    def log_file(self, component: str) -> str: ...

    def read_secret(self, name: str) -> str | None: ...

    def write_secret(self, name: str, value: str) -> None: ...

    def remove_secret(self, name: str) -> bool: ...  # whether there was one

    # Scrape targets its Prometheus takes beside the stack's own (a sweep's variant servers' exporters), in the
    # scrape job ``job``'s file_sd file: added, and removed by their addresses.
    def add_scrape_targets(self, job: str, entries: list[dict]) -> None: ...

    def remove_scrape_targets(self, job: str, addresses: list[str]) -> None: ...


class AgentHost(Protocol):
    """What an engine's agent part may ask of the host agent that runs it (benchwatch.stack.agent.Agent is
    one): its configuration, files and process manager. As narrow as :class:`Host`: the agent names no engine."""

    # The agent's configuration (benchwatch.stack.agent.AgentConfig): its name, host label, ports and the
    # instances it watches, each with ``name`` (its target label), ``server_log`` and ``server`` (no secrets).
    cfg: Any

    def path(self, *parts: str) -> str: ...      # a path under the agent's state dir

    def address(self, component: str) -> str: ...  # host:port of a component

    def url(self, component: str) -> str: ...    # http://host:port of a component

    def base_env(self) -> dict[str, str]: ...

    def spawn(self, component: str, argv: list[str], env: dict[str, str] | None = None,
              user: str | None = None) -> int: ...

    def read_secret(self, name: str) -> str | None: ...

    def write_secret(self, name: str, value: str) -> None: ...


class UnknownEngine(KeyError):
    def __str__(self) -> str:
        return f"unknown engine {self.args[0]!r}: use one of {', '.join(choices())}"


@dataclass(frozen=True)
class StackOption:
    """An option an engine adds to every command that acts on a stack (``--pg-dsn``): its flag, the
    BENCHWATCH_* variable read when the flag is not given, and where its value is kept. The flag, the
    variable and the stack.json key are contracts. Each takes one value (``benchwatch psql`` needs that
    to tell benchwatch's options from psql's)."""

    flag: str                   # "--pg-dsn"; argparse's dest is the flag's ("pg_dsn")
    # The stack configuration's key (Config.option, stack.json): "pg_dsn". None: not configuration, a flag
    # its own code reads from the command's arguments (demo --shards' --instances).
    key: str | None
    help: str
    env: str | None = None      # read when the flag is not given
    type: Callable[[str], Any] = str
    default: Any = None
    # Kept in stack.json so that the commands after up act on what it started; read back except by up and
    # demo, which start what they are told. False: never read back (a DSN may carry a password: the stack
    # keeps it in its 0600 secrets file), written as null.
    saved: bool = True
    path: bool = False          # a file name: made absolute
    selects_engine: bool = False  # giving it asks for this engine (--mysql-defaults-file: --engine mariadb)
    # Taken only when the stack runs this engine (--instances: demo --shards reads the flag for its own).
    own_engine_only: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class EngineCommand:
    """A subcommand an engine brings (``benchwatch psql``), registered by benchwatch.commands like its own.
    ``handler`` gets the command's Context (its arguments, ``stack``, ``say``, the output streams)."""

    name: str
    help: str
    handler: Callable[[Any], int]
    arguments: Callable[[Any], None] | None = None
    add_help: bool = True
    passthrough: bool = False
    after: str | None = None    # the command it follows in ``benchwatch --help`` (None: after every other)


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

    # -- its part of the native stack (a StackPart of a Host) --------------------------------------
    # Its components in the stack (server, exporter) -> default port on 127.0.0.1; each also gets a
    # --<component>-port flag and a BENCHWATCH_<COMPONENT>_PORT variable.
    default_ports: ClassVar[Mapping[str, int]] = {}
    # Component -> the Debian package that brings its program (named in up's "not installed" line, and
    # installed by scripts/install-deps for a stack on this engine: benchwatch.stack.packages).
    packages: ClassVar[Mapping[str, str]] = {}
    # Debian packages of what only some uses need (e.g. "shards": the sharded demo's PL/Proxy), by name;
    # installed only when asked for (scripts/install-deps --feature NAME, demo --shards).
    feature_packages: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # The load generator (its name in benchwatch.loadgens) its demo runs: what the demo installs besides
    # the engine's packages.
    demo_tool: ClassVar[str] = ""
    # Whether the stack can run several embedded instances of its server side by side (--instances N).
    instances: ClassVar[bool] = False
    # Its collectors of the benchwatch exporter: modules of its folder (benchwatch.util.plugins.folder_module)
    # written against benchwatch.collector, which the daemon loads beside its own (each a --[no-]collector.NAME).
    collector_modules: ClassVar[tuple[str, ...]] = ()
    # Its options of every command acting on a stack (an existing server to watch instead of the embedded
    # one, its instances); two engines may share a flag, whose help then joins theirs.
    stack_options: ClassVar[tuple[StackOption, ...]] = ()
    # The label of its exporter's series naming the server watched, where it differs from ``instance``.
    server_label: ClassVar[str | None] = None
    # Programs a bin directory must hold to be one of its builds (sweep's bindir= variants).
    build_programs: ClassVar[tuple[str, ...]] = ()
    # Settings that say where a server listens, not how it runs: two servers side by side always differ in
    # them, so "what differs between the servers" (report --comment) leaves them out.
    address_settings: ClassVar[tuple[str, ...]] = ()
    # What a tool's output says when the server went away (cause -> regular expressions, as explain's
    # ending reads them: "terminated", "restart", "crash", "out_of_disk").
    ending_messages: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def commands(self) -> list[EngineCommand]:
        """Its subcommands (``benchwatch psql``, ``env``)."""
        return []

    def agent_options(self, parser: Any) -> None:
        """Its options of ``benchwatch agent up`` (the servers to watch), each passed to the agent by its dest."""

    def agent_part(self, agent: AgentHost) -> AgentPart | None:
        """Its part of a host agent that watches its servers (None: agents cannot watch this engine). The
        engine that brings ``agent_options`` brings this too."""
        return None

    def stop_local_instances(self, layout: Mapping[str, Any]) -> list[str]:
        """``benchwatch down``: stop the server instances a demo of this engine started beside the stack and
        recorded in ``layout`` (the stack's shards/shards.json); the names of those stopped. A layout another
        engine's demo wrote is not its business: []."""
        return []

    # -- `benchwatch demo` (its folder's demo.py, demo(ctx), found by convention) -----------------
    # The command's help: what `benchwatch demo` does on it, and what its --duration is.
    demo_help: ClassVar[str] = ""
    demo_duration_help: ClassVar[str] = ""

    def demo_arguments(self, parser: Any) -> None:
        """Its options of ``benchwatch demo``."""

    def demo_arguments_given(self, args: Any) -> str | None:
        """Its demo options given in ``args`` (for a demo of another engine, which refuses them), as said."""
        return None

    def demo(self, ctx: Any) -> int:
        """``benchwatch demo`` on this engine (a benchwatch.demokit.DemoContext); its exit code."""
        run = folder_part(self, "demo", "demo")
        if run is None:
            ctx.say(f"benchwatch demo has no demo for {self.title}")
            return 2
        return int(run(ctx))

    # -- its part of `benchwatch status` ---------------------------------------------------------
    def status_lines(self, status: Mapping[str, Any]) -> list[str]:
        """Its lines of ``status``'s text (where its server is, pid, log), from ``status --json``."""
        return []

    def status_healthy(self, status: Mapping[str, Any]) -> bool:
        """Whether its server is healthy, as its keys of ``status --json`` say (components apart)."""
        return True

    def binary(self, component: str) -> str | None:
        """The program of one of its components (base name, without an instance suffix); None if missing."""
        return None

    def stack_part(self, stack: Host) -> StackPart:
        """Its server components in one native stack."""
        return StackPart(self, stack)

    def results_server(self) -> ResultsServer | None:
        """A small server of this engine's that a stack may run for itself to keep the results database
        (benchwatch.results: PostgreSQL's dialect), whichever engine is under test; None: it has none.
        :func:`results_server` asks every engine."""
        return None

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
    # Its causes' scorers: modules of its folder (benchwatch.util.plugins.folder_module) written against
    # benchwatch.causes, each with a register(registry) that adds its scorers (one per name of
    # explain_signals it scores; target_down and lock are explain's own, fed by up_metric and the
    # "lock_waits" contribution).
    cause_modules: ClassVar[tuple[str, ...]] = ()
    # The raw series its signals read (fetched from Prometheus for explain, kept in the archive).
    explain_selectors: ClassVar[tuple[str, ...]] = ()
    # 1 while its exporter reaches the server, 0 while not: the target_down signal.
    up_metric: ClassVar[str] = ""
    # Its server's process names (comm, as ps shows them): the exporter's processes collector counts
    # their CPU as the database's, apart from other processes' (explain's cpu_contention).
    server_processes: ClassVar[frozenset[str]] = frozenset()

    def process_kind(self, cmdline: str) -> str | None:
        """What one of its server processes does, from its /proc/PID/cmdline (NULs as spaces): a profile's
        samples of the database by process kind (benchwatch.profile). None: one kind, "server"."""
        return None

    def server_pid(self, facts: Mapping[str, Any]) -> int | None:
        """The pid of the server a run drove, from its meta.json facts (describe_server's): a profile counts
        that server and its children as the database, other servers of the host as other processes. None:
        not known (every server process of the host counts)."""
        return None

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
    # window and {target} after each selector of its server's series, kind, unit, scale): its server's
    # counters per transaction, its wait events. {target} becomes the matcher of the target that served the
    # run where its meta.json says which (a sweep's runs: the stack's own server and each variant's own are
    # watched side by side), else nothing (the sum over every target, as runs recorded before).
    evidence_signals: ClassVar[tuple[tuple[Any, ...], ...]] = ()

    # -- its part of the dashboards (benchwatch.dashboards.run) ----------------------------
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
        """Its figures of a run (a benchwatch.present.summary.Context), merged into the summary's dict."""
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

    def chart_spans(self, summary: dict, annotations: list[dict], t0_ms: float) -> list[tuple[float, float, str, str]]:
        """Its regions on a run's PNG charts (benchwatch.share.png), from the summary's dict and the run
        dashboard's annotations (their colours): (start s, end s, colour, legend), relative to ``t0_ms``."""
        spans = folder_part(self, "summary", "chart_spans")
        return spans(summary, annotations, t0_ms) if spans else []

    @property
    def compare_rows(self) -> list[Any]:
        """Its rows of a comparison (benchwatch.present.summary.CompareRow)."""
        return list(folder_part(self, "summary", "COMPARE_ROWS", []))

    def __repr__(self) -> str:
        return f"<engine {self.name}>"


class StackPart:
    """One engine's components in a native stack (the ``stack``, a :class:`Host`): which run,
    how each starts, stops, reports health and logs, and what the shared components need of it (scrape
    targets, the benchwatch exporter's arguments, the status JSON, the environment of a run's tool).

    Component names are the stack's (pid files, logs, ports, the supervisor's records): a server run once
    per instance is ``name`` for instance 1 and ``name-i`` for instance i > 1."""

    def __init__(self, engine: Engine, stack: Host) -> None:
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

    def choose_server(self, running: bool) -> None:
        """Before up starts anything: which server to watch, from the options given (``running``: whether this
        engine's components already run in the state dir), kept for the commands after up."""

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

    def secret_values(self) -> list[str]:
        """Its passwords as they are, for what a share must never hold (snapshots redact them)."""
        return []

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


class AgentPart:
    """One engine's part of a host agent (``benchwatch agent up``, on a database host): for each instance of its
    server the agent watches (``agent.cfg.instances``), its components (an exporter, started before the agent's
    Prometheus; a follower of the server log, after it), how they start and report health, their scrape jobs,
    the programs they need, and each instance's connection kept in the agent's secrets.

    Component names and secret files are the agent's state on disk (pid files, logs, ports in agent.json, the
    supervisor's records): an agent started by an earlier version is stopped and restarted by their names."""

    # The option of agent up that gives its servers, as its messages name it ("--postgres").
    flag: ClassVar[str] = ""

    def __init__(self, engine: Engine, agent: AgentHost) -> None:
        self.engine = engine
        self.agent = agent

    def servers(self, options: Mapping[str, Any]) -> list[str]:
        """The servers agent up was given (its ``agent_options`` by dest), in order: one instance each."""
        return []

    def instance_suffix(self, server: str) -> str | None:
        """What tells this server apart in the default target name (agent NAME-SUFFIX) when the agent watches
        several; None: its position."""
        return None

    def keep_servers(self, servers: list[str]) -> None:
        """At up: each instance's connection (paired with ``cfg.instances`` in order) kept 0600 in the agent's
        secrets, its ``server`` label set; an instance given none must have one kept from before (StackError)."""

    def preflight(self) -> None:
        """StackError naming the package when a program its components need is missing."""

    def exporters(self) -> list[str]:
        """Its components started before the agent's Prometheus (which scrapes them), in order."""
        return []

    def followers(self) -> list[str]:
        """Its components started after the agent's Prometheus (they remote-write to it), in order."""
        return []

    def start(self, component: str) -> None:
        raise NotImplementedError

    def health_path(self, component: str) -> str:
        """The HTTP path that answers 200 while the component is healthy."""
        return "/metrics"

    def scrape_configs(self, central_jobs: Mapping[str, dict]) -> list[dict]:
        """Its scrape jobs in the agent's Prometheus, from prometheus/prometheus.yml's (``central_jobs``) where
        the central stack has the same job; every target labelled with ``target``, ``host``, ``component``."""
        return []

    @staticmethod
    def static_job(job: Mapping[str, Any], static_configs: list[dict]) -> dict:
        """A central job with the given targets instead of its file_sd_configs (written per environment)."""
        return {**{k: v for k, v in job.items() if k != "file_sd_configs"}, "static_configs": static_configs}


# What the evidence of a variant's runs can compare (the report's ``why_scope``): its server's series and the
# host's, or the host's only (an engine that cannot watch a variant's server, a sweep recorded before).
SERVER_AND_HOST = "server and host"
HOST_ONLY = "host only (a variant runs on a server the stack does not watch)"


class VariantServer:
    """A server one of an experiment's variants runs on, beside the stack's (benchwatch sweep)."""

    def start(self) -> list[str]:
        """Up and answering (made first where it has no data directory yet): what was done."""
        return []

    def watch(self, target: str, sweep: str = "") -> list[str]:
        """Watched like the stack's own server while the sweep runs: its exporter scraped by the stack's
        Prometheus, its server log followed, its statements read, every series labelled ``target`` (its
        scrapes also ``sweep``: silent after the sweep, it is not a failing target); what was started. Stopped
        by :meth:`stop`. A part that cannot be watched is left out and said by :meth:`scope`."""
        return []

    def scope(self) -> str:
        """What the evidence of its runs compares, as the report's ``why_scope`` says it: SERVER_AND_HOST, or
        with what could not be read named (``server (no server log: ...) and host``); HOST_ONLY unwatched."""
        return HOST_ONLY

    def stop(self) -> None:
        """Its watchers stopped; the server stopped if it was started here."""

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

    def settle(self) -> list[str]:
        """Before a run on another server of the same sweep, this one idle since its own run: the dirty pages
        that run left written now, between the runs, rather than by its timed checkpoint during the other's."""
        return []

    def facts(self) -> dict[str, Any]:
        """server_version and whether the build checks assertions (``debug_assertions``)."""
        return {}


class ResultsServer:
    """The stack's own results database server (an optional capability of an engine: Engine.results_server): not
    the server under test, its own data directory, port and password. The stack starts it as one of its
    components (``results_db``), supervised as the others."""

    package: str = ""     # what to install when its program is missing

    def program(self) -> str | None:
        """Its server program; None when not installed."""
        return None

    def user(self) -> str | None:
        """The OS user it runs as (None: the caller's)."""
        return None

    def init(self, data: str, password: str, home: str, env: Mapping[str, str]) -> None:
        """A new data directory in ``data`` with a superuser ``postgres`` of ``password``; StackError on failure."""
        raise NotImplementedError

    def argv(self, data: str, port: int, socket_dir: str) -> list[str]:
        """How it starts: listening on 127.0.0.1:``port`` only."""
        raise NotImplementedError

    def pid_source(self, data: str) -> str | None:
        """The file its server writes its pid to, when it writes one itself."""
        return None


def results_server() -> ResultsServer | None:
    """The first engine's (in name order) that can run the stack's own results database; None when none can."""
    for engine in load_engines().values():
        server = engine.results_server()
        if server is not None:
            return server
    return None


_LOADED: PluginRegistry[Engine] | None = None


def load_engines() -> PluginRegistry[Engine]:
    """Every engine, by family name: the ``ENGINE`` of each folder of this package, in a registry that refuses
    a family name or alias taken twice."""
    global _LOADED
    if _LOADED is None:
        found: PluginRegistry[Engine] = PluginRegistry("engine")
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if info.ispkg:
                engine = getattr(importlib.import_module(f"{__name__}.{info.name}"), "ENGINE", None)
                if isinstance(engine, Engine):
                    found.add(engine, engine.name, engine.aliases)
        if sum(e.default for e in found.values()) != 1:
            raise RuntimeError(f"exactly one engine must be the default: {sorted(found)}")
        _LOADED = found
    return _LOADED


def get(name: str) -> Engine:
    """The engine a family name or an alias names; :class:`UnknownEngine` otherwise."""
    engine = load_engines().find(name)
    if engine is None:
        raise UnknownEngine(name)
    return engine


def stack_options() -> list[StackOption]:
    """Every engine's stack options, engines in name order (a flag two engines share, once per engine)."""
    return [o for e in load_engines().values() for o in e.stack_options]


def configured_options() -> list[StackOption]:
    """The stack options kept in the stack's configuration (those with a key)."""
    return [o for o in stack_options() if o.key is not None]


def default() -> Engine:
    return next(e for e in load_engines().values() if e.default)


def choices() -> list[str]:
    """Every name an engine may be given by: families and aliases (for --engine)."""
    return sorted({n for e in load_engines().values() for n in (e.name, *e.aliases)})
