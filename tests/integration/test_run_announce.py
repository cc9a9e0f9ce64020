"""`run` announces where the output is saved only once those files exist (tests read them on that word)."""

from __future__ import annotations

import io
import os

from benchwatch.record.stream import LineSafeStream
from benchwatch.record.wrapper import run_benchmark
from tests.helpers.tools import require_tool


def test_output_files_exist_when_the_run_is_announced(tmp_path):
    require_tool("pgbench")
    seen: list[bool] = []

    def started(run) -> None:
        seen.append(all(os.path.exists(run.file(name)) for name in ("stdout.log", "stderr.log", "meta.json")))

    code, run = run_benchmark(["pgbench", "--version"], runs_dir=str(tmp_path), client_env={}, notice=lambda _: None,
                              on_start=started, stderr_sink=LineSafeStream(io.BytesIO()))
    assert code == 0
    assert seen == [True]
    assert b"pgbench (PostgreSQL)" in open(run.file("stdout.log"), "rb").read()
