"""The exporter's /metrics for a finished run: golden file, promtool-clean, sample values."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.record import rundir
from tests.helpers.tools import require_tool

HERE = os.path.dirname(os.path.dirname(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "pgbench")
GOLDEN = os.path.join(HERE, "golden", "pgbench_runs.prom")
START = 1_700_000_000.0


def make_run(runs_dir: str, run_id: str, fixture: str, argv: list[str]) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir, run_id)
    for ext in ("stdout", "stderr"):
        shutil.copy(os.path.join(FIXTURES, f"{fixture}.{ext}"), run.file(f"{ext}.log"))
    run.write_meta({"run_id": run_id, "mode": "run", "state": rundir.FINISHED, "pid": None, "argv": argv,
                    "progress_interval": 1.0, "clock_start_epoch": START, "ended_at": START + 6,
                    "exit_code": 0, "pgbench_version": "15.18", "server_version": "15.18", "scale": "2"})
    return run


@pytest.fixture
def collector(tmp_path):
    make_run(str(tmp_path), "20231114T221320Z-0001", "pg15_report",
             ["pgbench", "-n", "-r", "-c", "1", "-j", "1", "-T", "5", "-P", "1"])
    sent = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START + 10)
    c.poll()
    registry = CollectorRegistry()
    registry.register(c)
    return c, registry, sent


def test_exposition_matches_golden_file(collector):
    _, registry, _ = collector
    text = generate_latest(registry).decode()
    if os.environ.get("BENCHWATCH_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(text)
    with open(GOLDEN, encoding="utf-8") as f:
        assert text == f.read(), "exposition changed: rerun with BENCHWATCH_UPDATE_GOLDEN=1 and review the diff"


def test_golden_file_passes_promtool():
    with open(GOLDEN, "rb") as f:
        body = f.read()
    check = subprocess.run([require_tool("promtool"), "check", "metrics"], input=body, capture_output=True)
    # pgbench_summary_* are contract names (issue 2); promtool only dislikes "summary" in them.
    problems = [l for l in (check.stdout + check.stderr).decode().splitlines()
                if l and not re.fullmatch(r"pgbench_summary_\w+ metric name should not include type 'summary'", l)]
    assert check.returncode in (0, 3) and not problems, problems


def test_sample_values(collector):
    _, registry, sent = collector
    labels = {"run_id": "20231114T221320Z-0001"}
    assert registry.get_sample_value("pgbench_running", labels) == 0.0
    assert registry.get_sample_value("pgbench_exit_code", labels) == 0.0
    with open(os.path.join(FIXTURES, "pg15_report.stdout")) as f:
        processed = int(re.search(r"actually processed: (\d+)", f.read()).group(1))
    assert registry.get_sample_value("pgbench_transactions_total", labels) == processed
    assert registry.get_sample_value("pgbench_exporter_unparsed_lines_total", labels) == 0.0
    assert registry.get_sample_value("pgbench_progress_interval_seconds", labels) == 1.0
    # What /metrics shows is what was sent to Prometheus, last value per series.
    assert any(s.name == "pgbench_progress_tps" for s in sent)
    assert os.path.exists(os.path.join(collector[0].runs_dir, "20231114T221320Z-0001", ".ingested"))


def test_ingested_and_imported_runs_are_not_followed_again(tmp_path):
    run = make_run(str(tmp_path), "20231114T221320Z-0002", "pg15_plain", ["pgbench"])
    open(run.file(".ingested"), "w").close()
    imported = make_run(str(tmp_path), "20231114T221320Z-0003", "pg15_plain", ["pgbench"])
    imported.update_meta(mode="import")
    sent = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START)
    c.poll()
    assert sent == [] and c.following == {}
