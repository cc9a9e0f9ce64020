"""go-ycsb v1.0.3 under `benchwatch run` on the stack's PostgreSQL and on MariaDB (one stack at a time, the
module's fixture parametrized by engine): every cumulative report stored at its own arrival as the interval's
operations per second, the password nowhere go-ycsb's echo of its properties could leave it, the run in
`snapshot`, a two-cell `sweep` in `report`, a bad flag (exit code 0 from go-ycsb) an exit code 1.

Time budget: about a minute per engine; each run is a few seconds (--target caps its rate), 1,000 records.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time

import pytest

from benchwatch import loadgens
from benchwatch.query.prometheus import query
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.tools import require_tool

BUDGET_S = 300  # both engines, stacks included
RECORDS = 1000
DATABASE = {"postgres": "postgresql", "mariadb": "mysql"}  # the stack's engine -> go-ycsb's database
REPORT = re.compile(rb"^([A-Z_]+) +- Takes\(s\): ([0-9.]+), Count: (\d+),")
# Workload A's properties (workloads/workloada of go-ycsb's source), as a property file of the test's own.
WORKLOAD_A = """workload=core
readallfields=true
readproportion=0.5
updateproportion=0.5
scanproportion=0
insertproportion=0
requestdistribution=uniform
"""
_started: list[float] = []


def goycsb_binary() -> str:
    """go-ycsb where benchwatch finds it: a missing go-ycsb fails, never skips (scripts/install-deps builds it)."""
    path = shutil.which("go-ycsb") or loadgens.by_name("goycsb").locate("go-ycsb", os.environ)
    if path is None:
        pytest.fail("go-ycsb not found: scripts/install-deps builds it (v1.0.3, from its module source)", pytrace=False)
    return path


@pytest.fixture(scope="module", params=sorted(DATABASE))
def stack(request):
    if not _started:
        _started.append(time.monotonic())
    goycsb_binary()
    if request.param == "mariadb":
        for tool in ("mariadbd", "prometheus-mysqld-exporter"):
            require_tool(tool)
    live = throwaway.start(scale=1, engine=request.param)
    try:
        if request.param == "mariadb":
            live.mariadb("SET GLOBAL innodb_flush_log_at_trx_commit = 0;")  # a test instance: no fsync per commit
        yield live, request.param
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("goycsb") / "workloada"
    path.write_text(WORKLOAD_A)
    return str(path)


def run_dir(live, stderr: bytes) -> str:
    run_id = re.search(rb"benchwatch: run (\S+):", stderr).group(1).decode()
    return os.path.join(live.state_dir, "runs", run_id)


def reports(stdout: bytes) -> list[list[tuple[str, float, int]]]:
    """go-ycsb's periodic reports as printed: each a list of (op, Takes(s), Count); a new one when the name sorts
    before the previous line's (each report is sorted); the lines after Run finished are not reports."""
    out: list[list[tuple[str, float, int]]] = []
    for line in stdout.split(b"\n"):
        if line.startswith(b"Run finished"):
            break
        m = REPORT.match(line)
        if m:
            op = m.group(1).decode()
            if not out or op <= out[-1][-1][0]:
                out.append([])
            out[-1].append((op, float(m.group(2)), int(m.group(3))))
    return out


@pytest.fixture(scope="module")
def ycsb_run(stack, workload):
    live, engine = stack
    db = DATABASE[engine]
    load = live.benchwatch("run", "--", "go-ycsb", "load", db, "-P", workload, "-p", f"recordcount={RECORDS}",
                           "--threads", "2", timeout=180)
    assert load.returncode == 0, load.stderr.decode()
    # 2,400 operations at 400 per second: about 6 reports of 1 s.
    r = live.benchwatch("run", "--", "go-ycsb", "run", db, "-P", workload, "-p", f"recordcount={RECORDS}",
                        "-p", "operationcount=2400", "--threads", "2", "--target", "400", timeout=180)
    return {"code": r.returncode, "stdout": r.stdout, "stderr": r.stderr, "dir": run_dir(live, r.stderr),
            "load_stdout": load.stdout, "load_dir": run_dir(live, load.stderr)}


def test_every_report_is_stored_at_its_arrival_as_the_intervals_rate(stack, ycsb_run):
    (live, engine), r = stack, ycsb_run
    assert r["code"] == 0, r["stderr"].decode()
    assert b"added --interval 1 to the goycsb arguments" in r["stderr"]
    directory = r["dir"]
    run_id = os.path.basename(directory)
    with open(os.path.join(directory, "stdout.log"), "rb") as f:
        assert f.read() == r["stdout"]  # what the terminal showed, saved as shown
    meta = json.load(open(os.path.join(directory, "meta.json")))
    assert meta["tool"] == "goycsb" and meta["exit_code"] == 0 and meta["progress_interval"] == 1.0
    assert meta["engine"] == {"postgres": "postgresql", "mariadb": "mysql"}[engine]
    assert meta["goycsb_version"] == "1.0.3"
    printed = reports(r["stdout"])
    assert len(printed) >= 4, r["stdout"].decode()
    # The figures are cumulative since each type's first operation: counts never fall, Takes grows by the interval.
    totals = [dict((op, count) for op, _, count in rep)["TOTAL"] for rep in printed]
    assert totals == sorted(totals) and totals[-1] <= 2400
    takes = [dict((op, t) for op, t, _ in rep)["TOTAL"] for rep in printed]
    assert all(0.8 <= b - a <= 1.6 for a, b in zip(takes, takes[1:], strict=False)), takes
    arrivals = [float(x) for x in open(os.path.join(directory, "arrivals.log")).read().split()]
    firsts: list[float] = []
    ops = [m.group(1) for m in map(REPORT.match, r["stdout"].split(b"Run finished")[0].split(b"\n")) if m]
    for i, op in enumerate(ops):  # the first line of each report: where it sorts before the line above
        if i == 0 or op <= ops[i - 1]:
            firsts.append(arrivals[i])
    assert len(firsts) == len(printed)
    expected = [float(b - a) for a, b in zip([0, *totals], totals, strict=False)]  # per interval of 1 s
    selector = f'benchmark_progress_tps{{run_id="{run_id}",tool="goycsb"}}'

    def stored() -> dict[float, float]:
        result = query(live.prometheus, f"{selector}[1h]")
        return {round(float(t), 3): float(v) for t, v in result[0]["values"]} if result else {}

    assert wait_until(lambda: all(round(t, 3) in stored() for t in firsts), 30, interval=0.5), (stored(), firsts)
    samples = stored()
    assert [samples[round(t, 3)] for t in firsts] == expected, (samples, firsts, expected)
    read = query(live.prometheus, f'goycsb_progress_ops{{run_id="{run_id}",op="READ"}}[1h]')
    assert read and len(read[0]["values"]) == len(printed)
    summary = re.search(rb"Run finished, takes .*?\nTOTAL +- Takes\(s\): [0-9.]+, Count: (\d+), OPS: ([0-9.]+)",
                        r["stdout"], re.S)
    assert summary and int(summary.group(1)) == 2400
    assert wait_until(lambda: query(live.prometheus, f'benchmark_result_tps{{run_id="{run_id}"}}'), 20, interval=0.5)
    assert float(query(live.prometheus, f'benchmark_result_tps{{run_id="{run_id}"}}')[0]["value"][1]) == float(summary.group(2))
    done = query(live.prometheus, f'benchmark_transactions_total{{run_id="{run_id}"}}')
    assert done and float(done[0]["value"][1]) == 2400


def test_the_password_is_neither_in_argv_nor_in_anything_saved(stack, ycsb_run):
    (live, engine), r = stack, ycsb_run
    if engine == "mariadb":
        target = live.stack.server.targets()[0]
        password = target.client_params()["password"]
        assert b'"mysql.password"="*****"' in r["stdout"]  # go-ycsb's echo, hidden
        conn = next(p for p in json.load(open(os.path.join(r["dir"], "meta.json")))["argv"] if "bw-goycsb-connection" in p)
        assert stat.S_IMODE(os.stat(conn).st_mode) == 0o600
    else:
        with open(live.stack.client_env()["PGPASSFILE"]) as f:
            password = f.read().strip().rsplit(":", 1)[1]
        assert b"pg.password" not in r["stdout"]  # lib/pq read it from PGPASSFILE: go-ycsb never had it
    assert len(password) >= 8
    for directory in (r["dir"], r["load_dir"]):
        for root, _, files in os.walk(directory):
            for name in files:
                with open(os.path.join(root, name), "rb") as f:
                    assert password.encode() not in f.read(), name
        meta = json.load(open(os.path.join(directory, "meta.json")))
        assert not any("password" in a for a in meta["argv"]), meta["argv"]
    assert password.encode() not in r["stdout"] + r["stderr"] + r["load_stdout"]


def test_snapshot_and_a_sweep_report_read_it(stack, ycsb_run, workload, tmp_path):
    (live, engine), r = stack, ycsb_run
    run_id = os.path.basename(r["dir"])
    snap = live.benchwatch("snapshot", run_id, "-o", str(tmp_path / "snap"), timeout=180)
    assert snap.returncode == 0, snap.stderr.decode()
    text = "".join(open(os.path.join(root, n), errors="replace").read() for root, _, files in os.walk(tmp_path / "snap")
                   for n in files if n.endswith(".md"))
    assert "YCSB operations (go-ycsb)" in text and "UPDATE" in text
    engine_args = ["--engine", "mariadb"] if engine == "mariadb" else []
    sweep = live.benchwatch("sweep", *engine_args, "--name", f"ycsb-{engine}", "--variant", "base", "--clients", "1,2",
                            "--repeat", "1", "--", "go-ycsb", "run", DATABASE[engine], "-P", workload,
                            "-p", f"recordcount={RECORDS}", "-p", "operationcount=600", timeout=300)
    assert sweep.returncode == 0, sweep.stderr.decode()
    rep = live.benchwatch("report", f"ycsb-{engine}", "--json", timeout=120)
    assert rep.returncode == 0, rep.stderr.decode()
    model = json.loads(rep.stdout)
    assert model["tool"] == "go-ycsb"  # as people write it
    assert sorted((c["clients"], c["n"]) for c in model["cells"]) == [(1, 1), (2, 1)]
    assert all(c["tps_median"] > 0 and c["latency_p95_ms_median"] > 0 for c in model["cells"]), model["cells"]
    threads = query(live.prometheus, f'count by (threads) (benchmark_run_info{{sweep="ycsb-{engine}",tool="goycsb"}})')
    assert sorted(t["metric"]["threads"] for t in threads) == ["1", "2"]


def test_a_bad_flag_go_ycsb_exits_0_on_is_exit_code_1(stack):
    live, engine = stack
    r = live.benchwatch("run", "--", "go-ycsb", "run", DATABASE[engine], "--output", "x", timeout=60)
    assert r.returncode == 1, r.stderr.decode()
    assert b"goycsb exited 0 but failed: usage: unknown flag: --output; exit code 1" in r.stderr
    meta = json.load(open(os.path.join(run_dir(live, r.stderr), "meta.json")))
    assert meta["tool_exit_code"] == 0 and meta["exit_code"] == 1


def test_the_file_keeps_its_time_budget(stack):
    assert time.monotonic() - _started[0] < BUDGET_S, f"{time.monotonic() - _started[0]:.0f} s"
