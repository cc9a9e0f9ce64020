"""What benchwatch knows of each load generator, in one registry.

A load generator is one module here (its output parser and its argv reader)
plus one entry in :data:`LOAD_GENERATORS`; the run wrapper, the exporter and
the replay look a run's load generator up by program name or by the ``tool``
recorded in meta.json, so adding one (sysbench) adds entries, not branches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from benchwatch.parse import pgbench_args


@dataclass(frozen=True)
class LoadGenerator:
    name: str                       # meta.json's "tool"
    programs: frozenset[str]        # program basenames that are this load generator
    progress_stream: str            # "stdout" or "stderr": where its progress lines come
    # Elapsed seconds (or, above 1e8, epoch seconds) a progress line stands for; None for any other line.
    progress_elapsed: Callable[[bytes], float | None]
    # The argv with a progress report asked for if it has none, and the options added (empty: none).
    ensure_progress: Callable[[list[str]], tuple[list[str], list[str]]]


_PGBENCH_PROGRESS = re.compile(rb"^progress: ([0-9]+(?:\.[0-9]+)?) s")


def _pgbench_elapsed(line: bytes) -> float | None:
    m = _PGBENCH_PROGRESS.match(line)
    return float(m.group(1)) if m else None


def _pgbench_ensure_progress(argv: list[str]) -> tuple[list[str], list[str]]:
    args, added = pgbench_args.ensure_progress(argv)
    return args, (["-P", "1"] if added else [])


PGBENCH = LoadGenerator(name="pgbench", programs=frozenset({"pgbench"}), progress_stream="stderr",
                        progress_elapsed=_pgbench_elapsed, ensure_progress=_pgbench_ensure_progress)

LOAD_GENERATORS: dict[str, LoadGenerator] = {g.name: g for g in (PGBENCH,)}
# A program under another name (a wrapper script, a renamed build) is taken for this one.
DEFAULT = PGBENCH


def for_program(program: str) -> LoadGenerator:
    name = os.path.basename(program)
    return next((g for g in LOAD_GENERATORS.values() if name in g.programs), DEFAULT)


def by_name(tool: str | None) -> LoadGenerator:
    """The load generator of a recorded run; runs recorded before "tool" existed are pgbench runs."""
    return LOAD_GENERATORS.get(tool or DEFAULT.name, DEFAULT)
