"""pgbench -> benchwatch -> Prometheus on the real native stack."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from benchwatch.util import net, processes
from tests.helpers.prometheus import query
from tests.helpers.promtool import promtool_problems
from tests.helpers.throwaway import BENCHWATCH

pytestmark = pytest.mark.integration

PROGRESS = re.compile(rb"^progress: ([0-9.]+) s, ([0-9.]+) tps, lat ([0-9.]+) ms stddev ([0-9.]+|NaN)")
RUN_ID = re.compile(rb"benchwatch: run (\S+):")


def run_id_of(stderr: bytes) -> str:
    m = RUN_ID.search(stderr)
    assert m, stderr.decode(errors="replace")
    return m.group(1).decode()


def printed_progress(path: str) -> list[tuple[float, float, float]]:
    with open(path, "rb") as f:
        return [(float(m.group(1)), float(m.group(2)), float(m.group(3))) for m in map(PROGRESS.match, f) if m]


def raw_samples(live, metric: str, run_id: str, extra: str = "") -> list[tuple[float, float]]:
    result = query(live.prometheus, f'{metric}{{run_id="{run_id}"{extra}}}[3h]')
    if not result:
        return []
    assert len(result) == 1, result
    return [(float(t), float(v)) for t, v in result[0]["values"]]


def wait_ingested(live, run_id: str, timeout: float = 30.0) -> None:
    ok = processes.wait_until(lambda: bool(query(live.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), timeout, 0.2)
    assert ok, f"run {run_id} never reached Prometheus as ended"


def summary_processed(stdout: bytes) -> int:
    return int(re.search(rb"number of transactions actually processed: (\d+)", stdout).group(1))


def test_status_json_contract(live_stack):
    r = live_stack.benchwatch("status", "--json")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    assert status["state_dir"] == live_stack.state_dir
    assert status["runs_dir"] == os.path.join(live_stack.state_dir, "runs")
    assert set(status["postgres"]) >= {"dsn", "log_file"}
    assert "password" not in status["postgres"]["dsn"]
    for name in ("prometheus", "alertmanager", "node_exporter", "postgres_exporter", "benchwatch_exporter"):
        c = status["components"][name]
        assert c["healthy"] is True, name
        assert c["url"].startswith("http://127.0.0.1:")
        assert processes.process_alive(c["pid"])


def test_up_is_idempotent(live_stack):
    before = {n: c["pid"] for n, c in json.loads(live_stack.benchwatch("status", "--json").stdout)["components"].items()}
    r = live_stack.benchwatch("up", "--json")
    assert r.returncode == 0, r.stderr
    after = {n: c["pid"] for n, c in json.loads(r.stdout)["components"].items()}
    assert before == after


def test_scrape_targets_up(live_stack):
    # node_exporter is scraped every second only where it reads the host (BENCHWATCH_HOST_READER=node_exporter);
    # else every 15 s (node_inventory) and the host's 1 s series come from the exporter, as job="node" all the same.
    node_job = "node" if live_stack.stack.cfg.host_reader == "node_exporter" else "node_inventory"

    def all_up():
        up = {r["metric"]["job"]: r["value"][1] for r in query(live_stack.prometheus, "up")}
        return up.get(node_job) == "1" and up.get("postgres") == "1" and up.get("benchwatch") == "1" \
            and bool(query(live_stack.prometheus, 'node_cpu_seconds_total{job="node"}'))
    assert processes.wait_until(all_up, 30, 0.2), query(live_stack.prometheus, "up")
    assert query(live_stack.prometheus, "pg_up")[0]["value"][1] == "1"


def test_run_is_point_exact(live_stack):
    # 8 s: a profile needs 5 full steady lines, and a busy machine's pgbench prints a short catch-up line or two.
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-r", "-c", "2", "-j", "2", "-T", "8")
    assert r.returncode == 0, r.stderr
    assert b"benchwatch: added -P 1" in r.stderr
    run_id = run_id_of(r.stderr)
    run_dir = os.path.join(live_stack.state_dir, "runs", run_id)
    # pgbench's own output reaches the terminal unchanged and is saved byte for byte.
    assert open(os.path.join(run_dir, "stdout.log"), "rb").read() == r.stdout
    ours = b"".join(l for l in r.stderr.splitlines(keepends=True) if not l.startswith(b"benchwatch: "))
    assert open(os.path.join(run_dir, "stderr.log"), "rb").read() == ours
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    assert meta["argv"][-2:] == ["-P", "1"] and meta["exit_code"] == 0
    assert meta["pgbench_version"].startswith("15") and meta["server_version"].startswith("15")
    # The run's stability profile is kept with it and said before the last line, which scripts read.
    said = [l.decode() for l in r.stderr.splitlines() if l.startswith(b"benchwatch: ")]
    assert said[-1] == f"benchwatch: run {run_id} ended with exit code 0"
    # (after them, where the run had a dip: "benchwatch: the dips' causes: benchwatch explain RUN_ID ...")
    over = next(i for i, line in enumerate(said) if line.startswith("benchwatch: stability over "))
    assert said[over + 1].startswith("benchwatch: stability: ")
    between = said[over + 2:-1]
    assert between == [] or (len(between) == 1 and between[0].startswith("benchwatch: the dips' causes: ")), said
    kept = json.load(open(os.path.join(run_dir, "summary.json")))
    assert kept["version"] == 2 and kept["stability"]["intervals"] >= 4 and kept["stability"]["tps_cov"] is not None

    wait_ingested(live_stack, run_id)
    printed = printed_progress(os.path.join(run_dir, "stderr.log"))
    assert len(printed) >= 5
    tps = raw_samples(live_stack, "benchmark_progress_tps", run_id)
    assert [v for _, v in tps] == [p[1] for p in printed]
    # One sample per line, at pgbench's own time: start + elapsed.
    start = meta["clock_start_epoch"]
    assert [round(t, 3) for t, _ in tps] == [round(start + p[0], 3) for p in printed]
    latency = raw_samples(live_stack, "benchmark_progress_latency_seconds", run_id)
    assert [round(v, 9) for _, v in latency] == [round(p[2] / 1000, 9) for p in printed]
    # Counters and the summary.
    total = raw_samples(live_stack, "benchmark_transactions_total", run_id)
    assert total[-1][1] == summary_processed(r.stdout)
    assert all(b[1] >= a[1] for a, b in zip(total, total[1:])), "counter decreased"
    statements = query(live_stack.prometheus, f'pgbench_statement_latency_seconds{{run_id="{run_id}"}}[3h]')
    assert len(statements) == 11  # TPC-B (sort of): 4 \set + 7 SQL statements
    info = query(live_stack.prometheus, f'last_over_time(benchmark_run_info{{run_id="{run_id}"}}[3h])')[0]["metric"]
    assert info["clients"] == "2" and info["threads"] == "2" and info["script"] == "tpcb-like" and info["scale"] == "2"
    summary_tps = float(re.search(rb"tps = ([0-9.]+)", r.stdout).group(1))
    assert raw_samples(live_stack, "benchmark_result_tps", run_id)[-1][1] == pytest.approx(summary_tps)
    # The curve ends with the run (staleness marker), not 5 minutes of flat line.
    last = tps[-1][0]
    assert query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}', last - 0.5)
    assert processes.wait_until(lambda: time.time() > last + 2, 10, 0.1)
    assert query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}', last + 2) == []
    assert query(live_stack.prometheus, f'benchmark_running{{run_id="{run_id}"}}', last + 2)[0]["value"][1] == "0"
    # The exporter keeps the run's other series in its directory, for snapshots without Prometheus.
    series_dir = os.path.join(run_dir, "series")
    assert processes.wait_until(lambda: os.path.isdir(series_dir) and any(n.endswith(".csv") for n in os.listdir(series_dir)), 30, 0.2)

    # Once they are written, the archiver completes summary.json: the dips counted by their cause.
    def by_cause():
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            return json.load(f)["stability"]["dips_by_cause"]
    assert processes.wait_until(lambda: by_cause() is not None, 30, 0.2)
    completed = json.load(open(os.path.join(run_dir, "summary.json")))["stability"]
    assert completed["dips_by_cause_source"] == "explain over the archived series"
    assert sum(row["dips"] for row in completed["dips_by_cause"].values()) == completed["dips"]


def test_pgbench_errors_and_exit_code_pass_through(live_stack):
    bare = live_stack.pgbench("-n", "-T", "1", "--no-such-option")
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-T", "1", "--no-such-option")
    assert r.returncode == bare.returncode != 0
    ours = b"".join(l for l in r.stderr.splitlines(keepends=True) if not l.startswith(b"benchwatch: "))
    assert ours == bare.stderr
    run_id = run_id_of(r.stderr)
    assert open(os.path.join(live_stack.state_dir, "runs", run_id, "stderr.log"), "rb").read() == bare.stderr
    wait_ingested(live_stack, run_id)
    assert raw_samples(live_stack, "benchmark_exit_code", run_id)[-1][1] == bare.returncode


def _start_run(live, *pgbench_args: str) -> subprocess.Popen:
    return subprocess.Popen([BENCHWATCH, "run", "--", "pgbench", *pgbench_args],
                            env=live.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_progress_lines(live, run_dir_holder: dict, proc: subprocess.Popen, count: int, timeout: float = 30) -> str:
    runs_dir = os.path.join(live.state_dir, "runs")

    def newest_run():
        names = sorted(os.listdir(runs_dir))
        for name in reversed(names):
            meta_path = os.path.join(runs_dir, name, "meta.json")
            meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
            if meta.get("pid") == proc.pid:
                return name
        return None

    assert processes.wait_until(lambda: newest_run() is not None, timeout, 0.05)
    run_id = newest_run()
    stderr_path = os.path.join(runs_dir, run_id, "stderr.log")
    # meta.json comes first, stderr.log a moment later (after the alert printer is set up).
    assert processes.wait_until(lambda: os.path.exists(stderr_path) and len(printed_progress(stderr_path)) >= count,
                                timeout, 0.05)
    run_dir_holder["path"] = os.path.join(runs_dir, run_id)
    return run_id


def test_lock_makes_tps_read_zero(live_stack):
    proc = _start_run(live_stack, "-n", "-P", "1", "-c", "2", "-j", "1", "-T", "9")
    holder: dict = {}
    run_id = _wait_progress_lines(live_stack, holder, proc, 2)
    lock = subprocess.run([os.path.join(pg_bindir(), "psql"), "-X", "-qc",
                           "BEGIN; LOCK TABLE pgbench_branches; SELECT pg_sleep(4); COMMIT;"],
                          env=live_stack.pg_env(), capture_output=True, timeout=60)
    assert lock.returncode == 0, lock.stderr
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    wait_ingested(live_stack, run_id)
    meta = json.load(open(os.path.join(holder["path"], "meta.json")))
    printed = printed_progress(os.path.join(holder["path"], "stderr.log"))
    zero_lines = [p for p in printed if p[1] == 0.0]
    assert len(zero_lines) >= 2, printed
    for elapsed, _, _ in zero_lines:
        at = meta["clock_start_epoch"] + elapsed + 0.5
        assert float(query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}', at)[0]["value"][1]) == 0.0


def _pgbench_child(pid: int) -> int:
    assert processes.wait_until(lambda: bool(open(f"/proc/{pid}/task/{pid}/children").read().split()), 10, 0.02)
    return int(open(f"/proc/{pid}/task/{pid}/children").read().split()[0])


def test_frozen_pgbench_is_a_drop_not_a_flat_line(live_stack):
    """SIGSTOP pgbench: no progress line for 4 s; Prometheus must read 0, and the catch-up must not double count."""
    proc = _start_run(live_stack, "-n", "-P", "1", "-c", "2", "-j", "1", "-T", "10")
    holder: dict = {}
    run_id = _wait_progress_lines(live_stack, holder, proc, 3)
    child = _pgbench_child(proc.pid)
    os.kill(child, signal.SIGSTOP)
    stopped_at = time.time()
    time.sleep(4)  # the stall itself: the thing under test is what happens while nothing is printed
    os.kill(child, signal.SIGCONT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    wait_ingested(live_stack, run_id)
    mid = stopped_at + 3.0
    assert float(query(live_stack.prometheus, f'benchmark_progress_tps{{run_id="{run_id}"}}', mid)[0]["value"][1]) == 0.0
    assert float(query(live_stack.prometheus, f'benchmark_progress_stalled{{run_id="{run_id}"}}', mid)[0]["value"][1]) == 1.0
    printed = printed_progress(os.path.join(holder["path"], "stderr.log"))
    tps = raw_samples(live_stack, "benchmark_progress_tps", run_id)
    real = [v for _, v in tps if v != 0.0]
    assert real == [p[1] for p in printed if p[1] != 0.0]
    assert len(tps) > len(printed), "no stall samples were written"
    # Transactions counted from the lines: tps x time covered, the catch-up line included once.
    expected, previous = 0, 0.0
    for elapsed, line_tps, _ in printed:
        expected += round(line_tps * (elapsed - previous))
        previous = elapsed
    last_line_ts = max(t for t, v in tps if v != 0.0)
    counted = float(query(live_stack.prometheus, f'benchmark_transactions_total{{run_id="{run_id}"}}', last_line_ts)[0]["value"][1])
    assert counted == expected
    assert abs(counted - summary_processed(out)) / summary_processed(out) < 0.05


def test_attach_reads_a_pipe(live_stack):
    bench = os.path.join(pg_bindir(), "pgbench")
    # Build the stream: real pgbench output plus two lines no pgbench prints.
    real = subprocess.run(["bash", "-c", f"{bench} -n -P 1 -c 2 -T 4 2>&1"], env=live_stack.pg_env(), capture_output=True, timeout=60)
    assert real.returncode == 0
    stream = real.stdout + b"garbage line\n\xff\xfe not utf8\n"
    r = live_stack.benchwatch("attach", "--pgbench-args", "-n -P 1 -c 2 -T 4", input=stream)
    assert r.returncode == 0, r.stderr
    assert r.stdout == stream
    run_id = run_id_of(r.stderr)
    wait_ingested(live_stack, run_id)
    printed = [m for m in map(PROGRESS.match, stream.splitlines()) if m]
    tps = raw_samples(live_stack, "benchmark_progress_tps", run_id)
    assert [v for _, v in tps] == [float(m.group(2)) for m in printed]
    assert raw_samples(live_stack, "benchmark_unparsed_lines_total", run_id)[-1][1] == 2


def test_exporter_metrics_pass_promtool(live_stack):
    # A run of its own: the exporter serves the last runs it followed, and one restarted by the
    # supervisor (a health check missed on a loaded machine) does not follow runs it had delivered.
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-P", "1", "-T", "2")
    assert r.returncode == 0, r.stderr
    run_id = run_id_of(r.stderr)
    url = live_stack.stack.cfg.url("benchwatch_exporter") + "/metrics"
    got: dict[str, bytes] = {}

    def served() -> bool:
        try:
            status, got["body"] = net.http_get(url)
        except OSError:  # being restarted
            return False
        return status == 200 and f'run_id="{run_id}"'.encode() in got["body"]
    assert processes.wait_until(served, 30, 0.2), f"run {run_id} never on the exporter's /metrics"
    body = got["body"]
    assert b"benchmark_progress_tps{" in body and b"benchmark_run_info{" in body
    assert_promtool_clean(body)


def assert_promtool_clean(exposition: bytes) -> None:
    """promtool check metrics finds nothing but the lints the contract's names cause (tests/helpers/promtool.py):
    the session's stack may still serve an earlier module's sysbench runs, with their quantile and le labels."""
    problems = promtool_problems(exposition)
    assert not problems, problems


def test_no_password_in_logs_argv_or_runs(live_stack):
    password = open(os.path.join(live_stack.state_dir, "secrets", "pg_password")).read().strip()
    assert len(password) >= 20
    for root, _dirs, files in os.walk(live_stack.state_dir):
        if "/secrets" in root or "/pg/data" in root or "/prometheus/data" in root:
            continue
        for name in files:
            if not os.path.isfile(os.path.join(root, name)) or name.startswith(".s.PGSQL"):
                continue  # sockets
            with open(os.path.join(root, name), "rb") as f:
                assert password.encode() not in f.read(), os.path.join(root, name)
    for name in live_stack.stack.components():
        pid = live_stack.stack.pid(name)
        assert password not in " ".join(processes.process_cmdline(pid)), name


def test_run_metadata_describes_server_and_host(live_stack):
    r = live_stack.benchwatch("run", "--", "pgbench", "-n", "-T", "1")
    assert r.returncode == 0, r.stderr
    meta = json.load(open(os.path.join(live_stack.state_dir, "runs", run_id_of(r.stderr), "meta.json")))
    assert meta["settings"]["max_wal_size"] == "64 MB" and meta["settings"]["checkpoint_timeout"] == "30 s"
    assert meta["settings"]["shared_buffers"].endswith("8kB")
    assert meta["host"]["cpus"] == os.cpu_count() and meta["host"]["memory_bytes"] > 0
    assert any(d["name"] for d in meta["host"]["disks"])


def test_exporter_receives_alertmanager_webhooks(live_stack):
    import urllib.request
    body = json.dumps({"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "PgbenchTPSDrop", "run_id": "r1"}, "annotations": {"summary": "s"}}]}).encode()
    url = live_stack.stack.cfg.url("benchwatch_exporter")
    with urllib.request.urlopen(urllib.request.Request(url + "/alerts", data=body, method="POST"), timeout=5) as r:
        assert r.status == 200
    _status, metrics = net.http_get(url + "/metrics")
    assert b'benchwatch_exporter_alert_notifications_total{status="firing"}' in metrics
    # The stack's own Alertmanager is configured to deliver here.
    rendered = open(os.path.join(live_stack.state_dir, "alertmanager", "alertmanager.yml")).read()
    assert url + "/alerts" in rendered
