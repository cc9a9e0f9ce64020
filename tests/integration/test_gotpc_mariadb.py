"""go-tpc (TPC-C) on a real embedded MariaDB 10.11 under `benchwatch run`: every report stored at its arrival and
drawn by a 1 s query_range, per-type series, a stall, the throwaway user and its password, snapshot and explain.

Time budget: the whole file in under 3 minutes. `prepare` of one warehouse took 169 s with the server's
durable defaults (tests/fixtures/gotpc/README.md); here the test instance runs with
innodb_flush_log_at_trx_commit=0 and prepare skips its consistency check (--no-check), once per module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from benchwatch import loadgens
from benchwatch.query.prometheus import query, query_range
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.throwaway import BackgroundRun
from tests.helpers.tools import require_tool

BUDGET_S = 180
PREPARE_BUDGET_S = 100
REPORT = re.compile(rb"^\[Current\] (\S+?) +- Takes\(s\): [0-9.]+, Count: (\d+),")
USERS = "SELECT COUNT(*) FROM mysql.user WHERE User LIKE 'bw\\_gotpc\\_%'"
_started: list[float] = []  # when this file's stack started (not its import: pytest imports every file first)


def gotpc_binary() -> str:
    """go-tpc where benchwatch finds it: a missing go-tpc fails, never skips (scripts/install-deps --test builds it)."""
    path = shutil.which("go-tpc") or loadgens.by_name("gotpc").locate("go-tpc", os.environ)
    if path is None:
        pytest.fail("go-tpc not found: scripts/install-deps --test builds it "
                    "(go install github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.7)", pytrace=False)
    return path


@pytest.fixture(scope="module")
def stack():
    _started.append(time.monotonic())
    gotpc_binary()
    for tool in ("mariadbd", "prometheus-mysqld-exporter"):
        require_tool(tool)
    live = throwaway.start(engine="mariadb")
    try:
        # A test instance: no fsync per commit (the load goes from minutes to seconds).
        live.mariadb("SET GLOBAL innodb_flush_log_at_trx_commit = 0;")
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


@pytest.fixture(scope="module")
def prepared(stack):
    started = time.monotonic()
    r = stack.benchwatch("run", "--", "go-tpc", "tpcc", "--warehouses", "1", "--threads", "4", "prepare", "--no-check",
                         timeout=PREPARE_BUDGET_S)
    assert r.returncode == 0, r.stderr.decode()
    assert b"--interval" not in r.stderr  # prepare prints no reports: nothing added
    print(f"prepare took {time.monotonic() - started:.1f} s")
    return r


def run_dir(live, stderr: bytes) -> str:
    run_id = re.search(rb"benchwatch: run (\S+):", stderr).group(1).decode()
    return os.path.join(live.state_dir, "runs", run_id)


def printed_reports(stdout: bytes) -> list[int]:
    """Committed transactions of each report go-tpc printed (a report: [Current] lines until the next sorts before)."""
    out: list[int] = []
    last = None
    for line in stdout.split(b"\n"):
        m = REPORT.match(line)
        if not m:
            continue
        op = m.group(1).decode()
        key = op.lower().replace("_err", "_ERR")
        if last is None or key <= last:
            out.append(0)
        last = key
        if not op.endswith("_ERR"):
            out[-1] += int(m.group(2))
    return out


def gotpc_password(port: int, deadline: float) -> str | None:
    """What the process table shows: go-tpc's argv, with -p PASSWORD (documented; unavoidable with go-tpc)."""
    while time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"go-tpc") and b"-p" in argv and str(port).encode() in argv:
                return argv[argv.index(b"-p") + 1].decode()
        time.sleep(0.05)
    return None


def reports_so_far(run: BackgroundRun) -> int:
    """Report lines this run has stored so far (its own run directory's arrivals.log)."""
    try:
        with open(os.path.join(run.run_dir(), "arrivals.log"), "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


@pytest.fixture(scope="module")
def tpcc_run(stack, prepared):
    """A 14 s TPC-C run with its districts row-locked for 4 s from its 4th second: reports, a stall, reports again."""
    live = stack
    run = BackgroundRun(live, "go-tpc", "tpcc", "--warehouses", "1", "run", "--time", "14s", "--threads", "2",
                     "--ignore-error")  # the lock can end in a deadlock, which stops a thread without it
    try:
        password = gotpc_password(live.stack.server.targets()[0].port, time.monotonic() + 20)
        assert password, "go-tpc never showed up in the process table"
        during = int(live.mariadb(USERS + ";"))
        assert wait_until(lambda: reports_so_far(run) >= 5 * 3, 30, interval=0.1)  # 3 reports of 5 lines
        # Row locks on the warehouse's districts, which every writing transaction updates: taken once the
        # one go-tpc transaction holding one commits, held 4 s. (LOCK TABLES first waits for the metadata
        # locks of every open transaction, and once held its stall ran 11 s in 1 run of about 16.)
        live.mariadb("BEGIN; SELECT COUNT(*) FROM tpcc.district WHERE d_w_id = 1 FOR UPDATE; SELECT SLEEP(4); COMMIT;",
                     timeout=60)
    finally:
        code = run.wait(120)
    return {"code": code, "stdout": run.out["stdout"], "stderr": run.out["stderr"], "password": password,
            "users_during": during, "dir": run_dir(live, run.out["stderr"])}


def test_reports_are_stored_at_their_arrival_and_drawn_by_a_1s_query_range(stack, tpcc_run):
    live, r = stack, tpcc_run
    assert r["code"] == 0, r["stderr"].decode()
    assert b"added --interval 1s to the gotpc arguments" in r["stderr"]
    directory = r["dir"]
    run_id = os.path.basename(directory)
    with open(os.path.join(directory, "stdout.log"), "rb") as f:
        assert f.read() == r["stdout"]  # byte for byte
    reports = printed_reports(r["stdout"])
    assert len(reports) >= 8, r["stdout"].decode()
    meta = json.load(open(os.path.join(directory, "meta.json")))
    assert meta["tool"] == "gotpc" and meta["engine"] == "mysql" and meta["exit_code"] == 0
    assert meta["server_version"].startswith("10.11") and meta["gotpc_version"] == "1.0.7"
    assert "*****" in meta["argv"] and "-p" in meta["argv"]
    arrivals = [float(x) for x in open(os.path.join(directory, "arrivals.log")).read().split()]
    # The first line of each report: the report's time.
    firsts, i = [], 0
    for line in r["stdout"].split(b"\n"):
        if line.startswith(b"[Current] "):
            firsts.append(arrivals[i])
            i += 1
    selector = f'benchmark_progress_tps{{run_id="{run_id}",tool="gotpc"}}'

    def stored() -> list[tuple[float, float]]:
        result = query(live.prometheus, f"{selector}[1h]")
        return [(float(t), float(v)) for t, v in result[0]["values"]] if result else []

    assert wait_until(lambda: len(stored()) >= len(reports), 30, interval=0.5)
    samples = stored()
    report_times = {round(t, 3) for t in firsts}
    real = [(t, v) for t, v in samples if round(t, 3) in report_times]
    assert [v for _, v in real] == [float(n) for n in reports], (samples, sorted(report_times), reports)  # count/s
    assert len(real) == len(reports)
    extra = [v for t, v in samples if round(t, 3) not in report_times]
    assert extra and set(extra) == {0.0}, "no stall zeros during the lock"
    stalled = query(live.prometheus, f'max_over_time(benchmark_progress_stalled{{run_id="{run_id}"}}[1h])')
    assert stalled and float(stalled[0]["value"][1]) == 1
    # A 1 s query_range, steps between the reports (as Grafana draws it), sees every report.
    first = real[0][0]
    drawn = query_range(live.prometheus, selector, first + 0.5, real[-1][0] + 0.9, 1)
    seen = {round(float(v), 3) for _, v in drawn[0]["values"]}
    assert {round(v, 3) for _, v in real} <= seen, (samples, drawn[0]["values"], first)


def test_per_type_series_tpmc_and_the_summary(stack, tpcc_run):
    live, r = stack, tpcc_run
    run_id = os.path.basename(r["dir"])
    for txn in ("NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL"):
        assert wait_until(lambda txn=txn: query(live.prometheus, f'gotpc_progress_tps{{run_id="{run_id}",txn="{txn}"}}[1h]'),
                          20, interval=0.5), txn
        assert query(live.prometheus, f'gotpc_progress_latency_seconds{{run_id="{run_id}",txn="{txn}",quantile="0.99"}}[1h]')
    m = re.search(rb"^tpmC: ([0-9.]+),", r["stdout"], re.M)
    assert m, r["stdout"].decode()
    tpmc = float(m.group(1))
    assert wait_until(lambda: query(live.prometheus, f'gotpc_result_tpmc{{run_id="{run_id}"}}'), 20, interval=0.5)
    assert float(query(live.prometheus, f'gotpc_result_tpmc{{run_id="{run_id}"}}')[0]["value"][1]) == tpmc


def test_the_password_is_nowhere_benchwatch_wrote_and_the_user_is_gone(stack, tpcc_run):
    live, r = stack, tpcc_run
    password = r["password"]
    assert len(password) >= 20 and r["users_during"] == 1
    for root, _, files in os.walk(r["dir"]):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert password.encode() not in f.read(), name
    assert password.encode() not in r["stdout"] + r["stderr"]
    for root, _, files in os.walk(os.path.join(live.state_dir, "logs")):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert password.encode() not in f.read(), name
    assert int(live.mariadb(USERS + ";")) == 0


def test_snapshot_and_explain_read_the_run(stack, tpcc_run, tmp_path):
    live, r = stack, tpcc_run
    run_id = os.path.basename(r["dir"])
    ex = live.benchwatch("explain", run_id, "--json", timeout=120)
    assert ex.returncode == 0, ex.stderr.decode()
    dips = json.loads(ex.stdout)["dips"]
    assert any(d["min_tps"] == 0 for d in dips), dips  # the lock
    snap = live.benchwatch("snapshot", run_id, "-o", str(tmp_path / "snap"), timeout=180)
    assert snap.returncode == 0, snap.stderr.decode()
    text = "".join(open(os.path.join(root, n), errors="replace").read() for root, _, files in os.walk(tmp_path / "snap")
                   for n in files if n.endswith(".md"))
    assert "tpmC" in text and "NEW_ORDER" in text and "InnoDB" in text
    for root, _, files in os.walk(tmp_path / "snap"):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert r["password"].encode() not in f.read(), name
    # The snapshot's raw copy rebuilds the run (arrivals.log kept): the same tpmC table without Prometheus.
    raw = next(os.path.join(root, d) for root, dirs, _ in os.walk(tmp_path / "snap") for d in dirs if d == "raw")
    assert os.path.exists(os.path.join(raw, "arrivals.log"))
    again = live.benchwatch("snapshot", "--run-dir", raw, "-o", str(tmp_path / "again"), timeout=180)
    assert again.returncode == 0, again.stderr.decode()
    cmp = live.benchwatch("compare", run_id, run_id, "--names", "A,B", "-o", str(tmp_path / "cmp"), timeout=180)
    assert cmp.returncode == 0, cmp.stderr.decode()
    text = "".join(open(os.path.join(root, n), errors="replace").read() for root, _, files in os.walk(tmp_path / "cmp")
                   for n in files if n.endswith(".md"))
    assert "tpmC (go-tpc summary)" in text and "NEW_ORDER p99" in text


def test_a_failure_go_tpc_exits_0_on_is_exit_code_1_and_the_user_is_dropped(stack):
    r = stack.benchwatch("run", "--", "go-tpc", "tpcc", "--warehouses", "1", "run", "--output", "table", timeout=60)
    assert r.returncode == 1, r.stderr.decode()
    assert b"gotpc exited 0 but failed: usage: unknown flag: --output; exit code 1" in r.stderr
    meta = json.load(open(os.path.join(run_dir(stack, r.stderr), "meta.json")))
    assert meta["tool_exit_code"] == 0 and meta["exit_code"] == 1 and "unknown flag" in meta["failure"]
    assert int(stack.mariadb(USERS + ";")) == 0


def interrupt(run: BackgroundRun, within: float) -> tuple[int, float]:
    """Ctrl-C as a terminal sends it (SIGINT to the whole process group); (exit code, seconds to the exit).
    A run still going ``within`` seconds later is killed with its group (nothing left behind) and fails."""
    sent = time.monotonic()
    os.killpg(run.proc.pid, signal.SIGINT)
    try:
        code = run.wait(within)
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.wait(10)
        pytest.fail(f"still running {within:.0f} s after Ctrl-C: {b''.join(run.lines['stderr']).decode(errors='replace')}")
    return code, time.monotonic() - sent


def test_ctrl_c_ends_the_run_cleanly_and_drops_the_user(stack, prepared):
    """Ctrl-C reaches the whole foreground process group: go-tpc stops, prints its summary, the user goes."""
    live = stack
    run = BackgroundRun(live, "go-tpc", "tpcc", "--warehouses", "1", "run", "--threads", "2", session=True)
    try:
        assert wait_until(lambda: reports_so_far(run) >= 5 * 2, 30, interval=0.1)  # this run's own reports
        assert int(live.mariadb(USERS + ";")) == 1
    finally:
        code, _ = interrupt(run, 30)
    assert code == 0, run.out["stderr"].decode()
    assert b"Got signal [interrupt] to exit." in run.out["stdout"] and b"tpmC:" in run.out["stdout"]
    meta = json.load(open(os.path.join(run.run_dir(), "meta.json")))
    assert meta["exit_code"] == 0 and "failure" not in meta
    assert int(live.mariadb(USERS + ";")) == 0


def creating_users(live) -> list[str]:
    """The states of the server's sessions running a CREATE USER of a throwaway go-tpc user."""
    return live.mariadb("SELECT STATE FROM information_schema.PROCESSLIST "
                        "WHERE INFO LIKE 'CREATE USER %bw\\_gotpc\\_%';").splitlines()


def test_ctrl_c_while_the_throwaway_user_is_created_ends_the_run_and_leaves_no_user(stack):
    """Ctrl-C in the middle of start-up: the CREATE USER of go-tpc's throwaway user is held by a global read
    lock (its session waits "for backup lock", seen in the process list), so the signal lands exactly while
    benchwatch waits for it. The lock goes as soon as the signal is sent: whether the statement was
    killed by the client's own Ctrl-C or went through, the run ends within seconds, go-tpc never
    starts, and no user is left."""
    live = stack
    locker = subprocess.Popen(["mariadb", f"--defaults-file={live.stack.server.targets()[0].client_file}", "-N", "-B",
                               "--unbuffered"],  # its answer before the next statement
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        locker.stdin.write("FLUSH TABLES WITH READ LOCK; SELECT 'locked';\n")
        assert locker.stdout.readline().strip() == "locked"
        run = BackgroundRun(live, "go-tpc", "tpcc", "--warehouses", "1", "run", "--threads", "2", session=True)
        try:
            assert wait_until(lambda: any(s.startswith("Waiting") for s in creating_users(live)), 30, interval=0.05), \
                b"".join(run.lines["stderr"]).decode()
        finally:
            sent = time.monotonic()
            os.killpg(run.proc.pid, signal.SIGINT)
            locker.stdin.write("UNLOCK TABLES;\n")
            locker.stdin.close()
            try:
                code = run.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(run.proc.pid, signal.SIGKILL)
                run.wait(10)
                pytest.fail("still running 20 s after Ctrl-C: " + b"".join(run.lines["stderr"]).decode(errors="replace"))
    finally:
        locker.kill()
        locker.wait()
    took = time.monotonic() - sent
    err = run.out["stderr"].decode(errors="replace")
    assert code == 130 and took < 10, (code, took, err)
    assert "interrupted (Ctrl-C) before go-tpc started" in err, err
    assert b"tpmC" not in run.out["stdout"]  # go-tpc never ran
    meta = json.load(open(os.path.join(run.run_dir(), "meta.json")))
    assert meta["exit_code"] == 130 and meta["state"] == "finished" and "interrupted" in meta["error"], meta
    assert int(live.mariadb(USERS + ";")) == 0


def test_the_file_keeps_its_time_budget(stack):
    assert time.monotonic() - _started[0] < BUDGET_S, f"{time.monotonic() - _started[0]:.0f} s"
