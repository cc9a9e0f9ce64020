"""Load generators: one folder per tool, each a :class:`LoadGenerator`, found by name.

As patroni loads its DCS backends (``AbstractDCS``, ``get_dcs``): every
subpackage ``benchwatch.loadgens.<folder>`` holds everything benchwatch knows
of one tool (its output parser, its argv reader, its run model and series, its
summary tables, compare rows and dashboard rows) and exposes one instance as
``LOAD_GENERATOR``. The registry imports the folders it finds, so adding a tool
adds a folder; nothing outside the folder names the tool. The run wrapper, the
exporter, ``import`` and the replay look a run's tool up by program name, by
the ``tool`` recorded in meta.json, or by the lines of a saved output.

This module is the interface only: it imports no tool's folder at import time,
and the folders import from the rest of benchwatch, never the other way round.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from benchwatch.model import names as series_names
from benchwatch.util.plugins import DuplicatePlugin, PluginRegistry, folder_module, folder_part

if TYPE_CHECKING:
    from benchwatch.model.run import RunModel
    from benchwatch.model.samples import Sample


@dataclass(frozen=True)
class ArgvFacts:
    """What a load generator's command line says about the run."""

    error: str | None = None                 # why it cannot be read (the program will refuse it too)
    progress_interval: float | None = None
    info_labels: dict[str, str] = field(default_factory=dict)   # for the run_info series
    statements_per_transaction: float | None = None
    engine: str | None = None                # the engine family the argv drives, where it says (a driver option)


@dataclass
class OutputModel:
    """A saved output read by its tool (``import``): the run model to feed its lines to, and when it ended."""

    model: RunModel
    last_progress_time: float | None  # elapsed seconds, or epoch seconds above 1e8; None without progress lines


class LatencyLogReader(Protocol):
    """Per-transaction latency logs of one run, fed as their files grow (benchwatch.exporter follows them)."""

    def expect(self, path: str) -> None: ...

    def feed(self, path: str, data: bytes) -> None: ...

    def samples(self, final: bool) -> list[Sample]: ...


class LoadGenerator:
    """Everything benchwatch knows of one load generator. Subclasses live in their own folder.

    Class attributes say what the tool is; methods read its argv and output. The
    defaults suit a tool without a per-transaction log whose output needs no
    special recognition.
    """

    name: ClassVar[str]                     # meta.json's "tool", the runs' ``tool`` label
    title: ClassVar[str]                    # as people write it in prose and on charts
    programs: ClassVar[frozenset[str]]      # program basenames that are this tool
    progress_stream: ClassVar[str]          # "stdout" or "stderr": where its progress lines come
    progress_option: ClassVar[str]          # how its progress interval is asked for, as a user writes it
    version_argv: ClassVar[tuple[str, ...]] = ("--version",)  # what prints the version, after the program
    version_key: ClassVar[str]              # meta.json key of the version (a contract for pgbench and sysbench)
    # Engine families (benchwatch.engines) it can drive, the one it drives without being told first.
    engines: ClassVar[tuple[str, ...]]
    # Runs recorded before meta.json had a "tool", and programs under another name (a wrapper
    # script, a renamed build), are taken for the default tool.
    default: ClassVar[bool] = False
    # docs/metrics.md's section on its own series (heading, prose, table header): benchwatch.exporter.metrics_doc.
    metrics_doc: ClassVar[str] = ""
    # The prefix of series only this tool writes, when not benchmark_ (e.g. "gotpc_"): a run's series are
    # selected by it too (run_selector, below).
    series_prefix: ClassVar[str | None] = None
    # What scripts/install-deps installs for it (benchwatch.stack.packages): Debian packages, and Go modules
    # ("module/path/cmd/program@version", built with go install where locate finds no program of that name).
    packages: ClassVar[tuple[str, ...]] = ()
    go_modules: ClassVar[tuple[str, ...]] = ()
    # "elapsed": its progress lines carry their time (progress_elapsed). "arrival": they carry none; the
    # wrapper records each progress line's arrival (progress_line) in the run directory's ARRIVALS file.
    progress_clock: ClassVar[str] = "elapsed"
    # Its run_info labels that say how long the run is or how it reports, not what work it does: left out of
    # the workload key (benchwatch.history.workload) beside every tool's and its version_key.
    not_work: ClassVar[frozenset[str]] = frozenset()

    @property
    def metrics(self) -> Mapping[str, tuple[str, str]]:
        """The series its run model writes beyond every tool's (benchwatch.model.run.METRICS)."""
        return {}

    @property
    def latency_log_metrics(self) -> Mapping[str, tuple[str, str]]:
        """The series of its per-transaction latency log (not rebuilt from the raw output: saved with the run)."""
        return {}

    # -- the command line ----------------------------------------------------------------

    def progress_elapsed(self, line: bytes) -> float | None:
        """Elapsed seconds (or, above 1e8, epoch seconds) a progress line stands for; None for any other line."""
        raise NotImplementedError

    def progress_line(self, line: bytes) -> bool:
        """Whether a line is a progress line (the wrapper stamps the arrival of each for an "arrival" clock)."""
        return self.progress_elapsed(line) is not None

    def locate(self, program: str, env: Mapping[str, str]) -> str | None:
        """The program's path where it is not on PATH (e.g. a Go tool in $(go env GOPATH)/bin); None: not found."""
        return None

    def binary_version(self, path: str) -> str | None:
        """The version read from the program's file, where its version command does not say it."""
        return None

    def connect(self, argv: list[str], target: Any, notice: Callable[[str], None]) -> tuple[list[str], Callable[[], None] | None]:
        """argv pointed at a server of the stack (``target``, an engine's target, e.g. a MySQLTarget) when it
        names none, and what to call once the run ended, whatever happened to it (None: nothing)."""
        return argv, None

    def connect_env(self, argv: list[str], env: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """argv pointed at the server a client environment describes (the stack's ``PGHOST``, ``PGPORT``, ...,
        which ``run`` also sets) for a tool that reads no such variable, and the options added (none: it reads
        them itself, as pgbench does, or the argv names its server already)."""
        return argv, []

    def progress_held_back(self, version: str) -> bool:
        """Whether this version of the tool (its ``version_key`` value) holds its progress lines back while
        some clients are blocked, printing them in a burst later: explain then weighs a silence less."""
        return False

    def judge(self, argv: list[str], stdout: bytes, stderr: bytes, exit_code: int) -> str | None:
        """Why a run that exited 0 failed, read from its output (a tool whose exit code is unreliable); None: it did not."""
        return None

    def ensure_progress(self, argv: list[str]) -> tuple[list[str], list[str]]:
        """The argv with a progress report asked for if it has none, and the options added (empty: none)."""
        raise NotImplementedError

    def read_argv(self, argv: list[str]) -> ArgvFacts:
        raise NotImplementedError

    # -- experiments (benchwatch sweep): the cells of a sweep as options of the tool ------------

    def clients_option(self, argv: list[str]) -> str | None:
        """The option of ``argv`` that already sets the number of clients (as typed), None if none does:
        ``sweep --clients`` refuses an argv that sets it too."""
        return None

    def with_clients(self, argv: list[str], clients: int, cores: int) -> list[str]:
        """argv running ``clients`` clients (and, where the tool has them, no more threads than clients or
        cores); NotImplementedError: the tool has no client count benchwatch knows."""
        raise NotImplementedError(f"{self.title} has no client count benchwatch can set")

    def with_option(self, argv: list[str], option: str, value: str) -> list[str]:
        """argv with ``option`` set to ``value`` (``sweep --arg``), the tool reading the last one given."""
        return [f"{option}={value}" if option.startswith("--") else option, *([] if option.startswith("--") else [value]),
                *argv]

    # How a user sets its number of clients, as sweep --clients's help names it (None: sweep cannot set it).
    clients_flag: ClassVar[str | None] = None

    # The option that sets the run's length in seconds, for a warmup run (None: no warmup).
    duration_option: ClassVar[str | None] = None

    def init_argvs(self, argv: list[str], scale: int | None) -> list[list[str]]:
        """The tool's arguments that re-create the tables of a run of ``argv`` (at ``scale``, where the tool
        has one), run in turn; [] when benchwatch does not know how (``--reinit``, ``--scale``)."""
        return []

    def parse_version(self, text: str) -> str | None:
        m = re.search(r"(\d+(?:\.\d+)+)", text)
        return m.group(1) if m else None

    def engine_of(self, argv: list[str]) -> str:
        """The engine family a run with this argv drives."""
        return self.read_argv(argv).engine or self.engines[0]

    def latency_log(self, argv: list[str], default_prefix: str, add: bool) -> tuple[list[str], str | None, list[str]]:
        """The per-transaction latency log: (argv, the log prefix the tool will write to or None, options added).
        ``default_prefix`` is the run directory's; ``add`` asks for the log even if argv does not."""
        return argv, None, []

    def redact_argv(self, argv: list[str]) -> list[str]:
        """argv as it may be saved and shown: a password given as an option replaced (after the program)."""
        return list(argv)

    def output_redactor(self, argv: list[str]) -> Callable[[bytes], bytes] | None:
        """What hides, in each line of its output, a secret the tool prints back (one that echoes every property
        it was given, a password among them) before the line is shown or saved; None: it prints none."""
        return None

    def latency_log_reader(self, run_id: str) -> LatencyLogReader | None:
        """What turns the per-transaction log's files into samples (None: the tool has no such log)."""
        return None

    def latency_log_file(self, base: str, name: str) -> bool:
        """Whether ``name`` is one of the files the tool writes for a latency log of prefix ``base``."""
        return False

    # -- its part of the dashboards (benchwatch.dashboards.run) ----------------------------

    # How the run picker shows a run of this tool: run_info labels, then a format with $2, $3... for
    # them ($1 is the run id), e.g. ("script", "clients", "scale") and "$2, $3 clients, scale $4".
    run_picker_labels: ClassVar[tuple[str, ...]] = ("script",)
    run_picker_format: ClassVar[str] = "$2"
    # Engine family -> (uid, file, title) of the run dashboard of this tool on it, where the names
    # are given (existing dashboards keep theirs); else benchwatch-<tool>-<engine>.
    dashboard_names: ClassVar[Mapping[str, tuple[str, str, str]]] = {}
    panels_summary: ClassVar[str] = ""      # what its panels of a run dashboard show, for the description

    def dashboard_panels(self, layout: Any) -> list[Any]:
        """Its own panels of a run dashboard, below the TPS (panel builders placed by ``layout``): by default
        ``panels(layout)`` of its folder's ``dashboard.py``, none without one."""
        module = folder_module(self, "dashboard")
        return module.panels(layout) if module is not None else []

    # -- its part of a run's summary and of comparisons (benchwatch.share.summary) --------------
    # By convention, from its folder's summary.py where it has one: figures(ctx), throughput_rows(summary),
    # latency_rows(summary), tables(summary), COMPARE_ROWS.

    def summary_figures(self, ctx: Any) -> dict:
        """Its figures of a run (a benchwatch.present.summary.Context), merged into the summary's dict."""
        figures = folder_part(self, "summary", "figures")
        return figures(ctx) if figures else {}

    def throughput_rows(self, summary: dict) -> list[list[str]]:
        """Its rows of the summary's Throughput table."""
        rows = folder_part(self, "summary", "throughput_rows")
        return rows(summary) if rows else []

    def latency_rows(self, summary: dict) -> list[list[str]]:
        """Its rows of the summary's Latency table."""
        rows = folder_part(self, "summary", "latency_rows")
        return rows(summary) if rows else []

    def summary_tables(self, summary: dict) -> list[tuple[str, list[str], list[list[str]]]]:
        """Its own tables of the summary: (title, header, rows)."""
        tables = folder_part(self, "summary", "tables")
        return tables(summary) if tables else []

    @property
    def compare_rows(self) -> list[Any]:
        """Its rows of a comparison (benchwatch.present.summary.CompareRow)."""
        return list(folder_part(self, "summary", "COMPARE_ROWS", []))

    # -- saved output ------------------------------------------------------------------

    def recognises(self, line: bytes) -> bool:
        """True for a line only this tool prints (``import`` tells the tools apart by their lines)."""
        return False

    # -- the run model -------------------------------------------------------------------

    def run_model(self, run_id: str, meta: Mapping[str, Any], info_labels: dict[str, str]) -> RunModel:
        """The model of a run recorded by ``run`` or ``attach``, as its meta.json describes it."""
        raise NotImplementedError

    def output_model(self, lines: Sequence[bytes], run_id: str, start_epoch: float | None,
                     labels: Mapping[str, str]) -> OutputModel:
        """The model of a saved output (``import``), which has no argv: labels from what it prints."""
        raise NotImplementedError


# -- judging a run that exited 0 -------------------------------------------------------------


def output_events(parser: Any, stdout: bytes, stderr: bytes) -> list[object]:
    """Every event a tool's output parser (``feed(line) -> events``) makes of a finished run's output, stderr
    first (where a tool's errors go), for a ``judge`` that reads what its exit code does not say."""
    events: list[object] = []
    for line in (stderr + b"\n" + stdout).split(b"\n"):
        events.extend(parser.feed(line))
    return events


def fatal_line(events: Sequence[object], kind: type[Any], failing: Sequence[str]) -> str | None:
    """``kind: message`` of the first event of class ``kind`` (with ``kind`` and ``message`` attributes) whose
    kind is one of ``failing``: why such a run failed; None: none."""
    fatal = [e for e in events if isinstance(e, kind) and e.kind in failing]
    return f"{fatal[0].kind}: {fatal[0].message}" if fatal else None


# -- the registry ---------------------------------------------------------------------------

_LOADED: PluginRegistry[LoadGenerator] | None = None


def load_generators() -> PluginRegistry[LoadGenerator]:
    """Every load generator, by name: the ``LOAD_GENERATOR`` of each folder of this package, in a registry that
    refuses a name taken twice (a program name claimed by two tools is refused too)."""
    global _LOADED
    if _LOADED is None:
        found: PluginRegistry[LoadGenerator] = PluginRegistry("load generator")
        programs: dict[str, str] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if not info.ispkg:
                continue
            module = importlib.import_module(f"{__name__}.{info.name}")
            generator = getattr(module, "LOAD_GENERATOR", None)
            if isinstance(generator, LoadGenerator):
                found.add(generator, generator.name)
                for program in generator.programs:
                    if programs.setdefault(program, generator.name) != generator.name:
                        raise DuplicatePlugin(f"program {program!r} is claimed by two load generators: "
                                              f"{programs[program]} and {generator.name}")
        defaults = [g for g in found.values() if g.default]
        if len(defaults) != 1:
            raise RuntimeError(f"exactly one load generator must be the default, found {[g.name for g in defaults]}")
        _LOADED = found
    return _LOADED


def default() -> LoadGenerator:
    return next(g for g in load_generators().values() if g.default)


def for_program(program: str) -> LoadGenerator:
    name = os.path.basename(program)
    return next((g for g in load_generators().values() if name in g.programs), default())


def for_output(data: bytes) -> LoadGenerator:
    """The tool that printed a saved output: the first tool other than the default that recognises a line."""
    others = [g for g in load_generators().values() if not g.default]
    for line in data.split(b"\n"):
        line = line.strip(b"\r")
        for g in others:
            if g.recognises(line):
                return g
    return default()


def by_name(tool: str | None) -> LoadGenerator:
    """The load generator of a recorded run; runs recorded before "tool" existed are the default's."""
    generators = load_generators()
    return generators[tool] if tool is not None and tool in generators else default()


def names() -> list[str]:
    return sorted(load_generators())


def run_series_names() -> str:
    """The regex of every run series' name: the tool-neutral and legacy prefixes, and each load generator's own."""
    own = sorted({g.series_prefix[:-1] for g in load_generators().values()
                  if g.series_prefix and g.series_prefix.endswith("_")})
    if not own:
        return series_names.RUN_SERIES_NAMES
    return f"({'|'.join([series_names.PREFIX[:-1], series_names.LEGACY_PREFIX[:-1], *own])})_.*"


def run_selector(run_id: str) -> str:
    """Every series of one run, whichever tool and whichever version recorded it."""
    return f'{{__name__=~"{run_series_names()}",run_id="{run_id}"}}'
def titles() -> list[str]:
    """The tools as people write them, the default first: for help texts, which name no tool themselves."""
    generators = load_generators().values()
    return [g.title for g in generators if g.default] + sorted(g.title for g in generators if not g.default)
