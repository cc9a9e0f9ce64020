"""Backfilling saved runs, and the stack's failure messages."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from benchwatch.util import processes
from tests.helpers.prometheus import query
from tests.helpers.throwaway import REPO_ROOT, free_ports, make_state_dir
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures", "pgbench")
START_2016 = 1452074400.0  # 2016-01-06T10:00:00Z


def saved_output(tmp_path, fixture: str) -> str:
    path = os.path.join(tmp_path, f"{fixture}.txt")
    with open(path, "wb") as out:
        for ext in ("stderr", "stdout"):
            with open(os.path.join(FIXTURES, f"{fixture}.{ext}"), "rb") as f:
                out.write(f.read())
    return path


def printed(path: str) -> list[tuple[float, float]]:
    with open(path, "rb") as f:
        return [(float(l.split()[1]), float(l.split()[3])) for l in f if l.startswith(b"progress: ")]


def test_import_backfills_a_2016_run(live_stack, tmp_path):
    path = saved_output(tmp_path, "pg15_report")
    r = live_stack.benchwatch("import", path, "--start", "2016-01-06T10:00:00Z")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.decode().strip()
    result = query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]', START_2016 + 1800)
    assert len(result) == 1
    got = [(float(t), float(v)) for t, v in result[0]["values"]]
    assert got == [(round(START_2016 + e, 3), v) for e, v in printed(path)]
    # It appears like a live run: info, summary and statements are there too.
    info = query(live_stack.prometheus, f'benchmark_run_info{{run_id="{run_id}"}}', START_2016 + 5)
    assert info and info[0]["metric"]["mode"] == "import"
    statements = query(live_stack.prometheus, f'pgbench_statement_latency_seconds{{run_id="{run_id}"}}[1h]', START_2016 + 1800)
    assert len(statements) == 11
    meta = json.load(open(os.path.join(live_stack.state_dir, "runs", run_id, "meta.json")))
    assert meta["mode"] == "import" and meta["clock_start_epoch"] == START_2016


def test_import_old_format_with_catch_up_burst(live_stack, tmp_path):
    path = saved_output(tmp_path, "pg94_report_stall")
    r = live_stack.benchwatch("import", path, "--start", "2016-01-07T10:00:00Z")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.decode().strip()
    start = START_2016 + 86400
    result = query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]', start + 1800)
    stamps = [float(t) for t, _ in result[0]["values"]]
    assert len(stamps) == len(printed(path)) == 8
    assert stamps == sorted(set(stamps))


def test_import_openmetrics_is_accepted_by_promtool(live_stack, tmp_path):
    path = saved_output(tmp_path, "pg15_rate_latency_limit")
    r = live_stack.benchwatch("import", path, "--start", "2016-01-06T10:00:00Z", "--openmetrics")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text.endswith("# EOF\n")
    om = tmp_path / "run.om"
    om.write_bytes(r.stdout)
    blocks = tmp_path / "blocks"
    created = subprocess.run([require_tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)],
                             capture_output=True, text=True)
    assert created.returncode == 0, created.stderr
    assert [d for d in os.listdir(blocks) if os.path.isdir(blocks / d)]


def test_import_of_unreadable_input_says_so(live_stack, tmp_path):
    r = live_stack.benchwatch("import", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and b"cannot read" in r.stderr
    r = live_stack.benchwatch("import", saved_output(tmp_path, "pg15_plain"), "--start", "yesterday-ish")
    assert r.returncode == 2 and b"--start" in r.stderr


def _python_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchwatch", *args], env=env, capture_output=True, text=True, timeout=120)


def test_taken_port_gives_one_line_and_leaves_nothing_running():
    state = make_state_dir()
    ports = free_ports()
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", ports["prometheus"]))
    blocker.listen()
    try:
        env = dict(os.environ)
        args = ["up", "--state-dir", state] + [f"--{c.replace('_', '-')}-port={p}" for c, p in ports.items()]
        r = _python_cli(*args, env=env)
        assert r.returncode == 1
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, r.stderr
        assert f"port {ports['prometheus']}" in lines[0] and "--prometheus-port" in lines[0]
        assert not os.path.exists(os.path.join(state, "pids")) or not os.listdir(os.path.join(state, "pids"))
    finally:
        blocker.close()
        shutil.rmtree(state, ignore_errors=True)


def test_missing_binary_names_the_debian_package():
    state = make_state_dir()
    bindir = tempfile.mkdtemp()
    try:
        # A PATH with everything but prometheus.
        for tool in ("prometheus-node-exporter", "prometheus-postgres-exporter", "prometheus-alertmanager", "psql"):
            target = shutil.which(tool)
            if target:
                os.symlink(target, os.path.join(bindir, tool))
        env = dict(os.environ, PATH=bindir)
        ports = free_ports()
        args = ["up", "--state-dir", state] + [f"--{c.replace('_', '-')}-port={p}" for c, p in ports.items()]
        r = _python_cli(*args, env=env)
        assert r.returncode == 1
        assert r.stderr.strip() == "benchwatch: prometheus is not installed: apt-get install prometheus"
        assert not os.path.exists(os.path.join(state, "pg", "data"))
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)


def test_import_of_a_run_directory_keeps_its_clock(live_stack):
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-T", "3")
    assert r.returncode == 0, r.stderr
    run_id = [l.split()[2].rstrip(":") for l in r.stderr.decode().splitlines() if l.startswith("benchwatch: run ")][0]
    run_dir = os.path.join(live_stack.state_dir, "runs", run_id)
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    # The live run is complete in Prometheus once the exporter wrote its end.
    assert processes.wait_until(lambda: bool(query(live_stack.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    r = live_stack.benchwatch("import", run_dir, "--run-id", f"{run_id}-replayed")
    assert r.returncode == 0, r.stderr
    live = query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]')[0]["values"]
    replayed = query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}-replayed"}}[1h]')[0]["values"]
    assert replayed == live and meta["clock_start_epoch"]
