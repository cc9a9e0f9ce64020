"""What benchwatch knows of each load generator, in one registry.

A load generator is one module here (its output parser and its argv reader)
plus one entry in :data:`LOAD_GENERATORS`; the run wrapper, the exporter and
the replay look a run's load generator up by program name or by the ``tool``
recorded in meta.json, so adding one (sysbench) adds entries, not branches.
Everything here is pure: the wrapper runs the programs and reads the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from benchwatch.parse import pgbench_args, sysbench_args


@dataclass(frozen=True)
class ArgvFacts:
    """What a load generator's command line says about the run."""

    error: str | None = None                 # why it cannot be read (the program will refuse it too)
    progress_interval: float | None = None
    info_labels: dict[str, str] = field(default_factory=dict)   # for <tool>_run_info
    statements_per_transaction: float | None = None


# (argv, the run directory's default log prefix, add the log even if not asked) ->
# (argv, the log prefix the program will write to or None, the options added).
LatencyLog = Callable[[list[str], str, bool], tuple[list[str], str | None, list[str]]]


@dataclass(frozen=True)
class LoadGenerator:
    name: str                       # meta.json's "tool"
    programs: frozenset[str]        # program basenames that are this load generator
    progress_stream: str            # "stdout" or "stderr": where its progress lines come
    # Elapsed seconds (or, above 1e8, epoch seconds) a progress line stands for; None for any other line.
    progress_elapsed: Callable[[bytes], float | None]
    # The argv with a progress report asked for if it has none, and the options added (empty: none).
    ensure_progress: Callable[[list[str]], tuple[list[str], list[str]]]
    read_argv: Callable[[list[str]], ArgvFacts]
    version_argv: tuple[str, ...]   # what prints the version, after the program
    version_key: str                # meta.json key of the version (an existing contract for pgbench)
    parse_version: Callable[[str], str | None]
    latency_log: LatencyLog | None = None   # per-transaction latency log, where the tool has one
    engine: str = "postgres"        # the server family it drives (what the run's meta describes)
    # True for a saved output this tool printed (``import`` tells the tools apart by their lines).
    recognises: Callable[[bytes], bool] = lambda line: False


# -- pgbench --------------------------------------------------------------------------

_PGBENCH_PROGRESS = re.compile(rb"^progress: ([0-9]+(?:\.[0-9]+)?) s")


def _pgbench_elapsed(line: bytes) -> float | None:
    m = _PGBENCH_PROGRESS.match(line)
    return float(m.group(1)) if m else None


def _pgbench_ensure_progress(argv: list[str]) -> tuple[list[str], list[str]]:
    args, added = pgbench_args.ensure_progress(argv)
    return args, (["-P", "1"] if added else [])


def _pgbench_argv(argv: list[str]) -> ArgvFacts:
    parsed = pgbench_args.parse_pgbench_args(argv)
    return ArgvFacts(parsed.error, parsed.progress_interval, parsed.info_labels(),
                     pgbench_args.sql_statements_per_transaction(parsed))


def _version_number(text: str) -> str | None:
    m = re.search(r"(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else None


def _pgbench_latency_log(argv: list[str], default_prefix: str, add: bool) -> tuple[list[str], str | None, list[str]]:
    """With -l (or when asked to add it), pgbench's per-transaction logs go where the exporter reads them."""
    parsed = pgbench_args.parse_pgbench_args(argv)
    said: list[str] = []
    if parsed.error:
        return argv, None, said  # pgbench will refuse this argv; adding to it would only confuse
    if "log" not in parsed.flags:
        if not add:
            return argv, None, said
        argv = pgbench_args.insert_options(argv, ["-l"])
        said.append("-l")
    prefix = parsed.last("log-prefix")
    if prefix is None:
        prefix = default_prefix
        argv = pgbench_args.insert_options(argv, [f"--log-prefix={prefix}"])
        said.append(f"--log-prefix={prefix}")
    return argv, os.path.abspath(prefix), said


PGBENCH = LoadGenerator(name="pgbench", programs=frozenset({"pgbench"}), progress_stream="stderr",
                        progress_elapsed=_pgbench_elapsed, ensure_progress=_pgbench_ensure_progress,
                        read_argv=_pgbench_argv, version_argv=("--version",), version_key="pgbench_version",
                        parse_version=_version_number, latency_log=_pgbench_latency_log)

# -- sysbench ---------------------------------------------------------------------------

# 1.0: "[ 1s ] thds: ...", 0.5: "[  10s] threads: ..." (the queue lines of --rate are not progress lines).
_SYSBENCH_PROGRESS = re.compile(rb"^\[ *([0-9]+(?:\.[0-9]+)?)s ?\] (?:thds|threads):")
_SYSBENCH_BANNER = re.compile(rb"^sysbench [0-9]+\.[0-9]+")


def _sysbench_elapsed(line: bytes) -> float | None:
    m = _SYSBENCH_PROGRESS.match(line)
    return float(m.group(1)) if m else None


def _sysbench_argv(argv: list[str]) -> ArgvFacts:
    parsed = sysbench_args.parse_sysbench_args(argv)
    return ArgvFacts(parsed.error, sysbench_args.progress_interval(parsed), parsed.info_labels())


SYSBENCH = LoadGenerator(name="sysbench", programs=frozenset({"sysbench"}), progress_stream="stdout",
                         progress_elapsed=_sysbench_elapsed, ensure_progress=sysbench_args.ensure_progress,
                         read_argv=_sysbench_argv, version_argv=("--version",), version_key="sysbench_version",
                         parse_version=_version_number, engine="mysql",
                         recognises=lambda line: bool(_SYSBENCH_PROGRESS.match(line) or _SYSBENCH_BANNER.match(line)))

# -- the registry -----------------------------------------------------------------------

LOAD_GENERATORS: dict[str, LoadGenerator] = {g.name: g for g in (PGBENCH, SYSBENCH)}
# A program under another name (a wrapper script, a renamed build) is taken for this one.
DEFAULT = PGBENCH


def for_program(program: str) -> LoadGenerator:
    name = os.path.basename(program)
    return next((g for g in LOAD_GENERATORS.values() if name in g.programs), DEFAULT)


def for_output(data: bytes) -> LoadGenerator:
    """The tool that printed a saved output: the first tool other than the default that recognises a line."""
    others = [g for g in LOAD_GENERATORS.values() if g is not DEFAULT]
    for line in data.split(b"\n"):
        for g in others:
            if g.recognises(line.strip(b"\r")):
                return g
    return DEFAULT


def by_name(tool: str | None) -> LoadGenerator:
    """The load generator of a recorded run; runs recorded before "tool" existed are pgbench runs."""
    return LOAD_GENERATORS.get(tool or DEFAULT.name, DEFAULT)
