"""The results database with real runs (issue 31): two hosts ("host-a", "host-b": two state directories, their own
stacks and ports, up --host apart, one after the other to spare the 2 cores) write their short pgbench runs to one
PostgreSQL started for the test; `history --all-hosts` on host A shows host B's runs in the pooled workload; the
database stopped during one of A's runs: the run is kept locally with its exit code and output as ever, marked
pending, and in the database once it is back."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import psycopg
import pytest

from benchwatch.history import report
from benchwatch.results.pending import Pending
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.results_db import ResultsServer

pytestmark = pytest.mark.integration

PGBENCH = ["pgbench", "-c", "1", "-T", "2", "-P", "1"]
RUN_LINE = re.compile(r"^benchwatch: run (\S+): output saved in ", re.M)
# The archiver writes a run once Prometheus has scraped past its end; the retry loop comes every 15 s.
WRITTEN_WITHIN_S = 90


def _exporter_log(live) -> str:
    with open(live.stack.log_file("benchwatch_exporter"), encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-15:])


def _run(live) -> tuple[str, subprocess.CompletedProcess]:
    r = live.benchwatch("run", "--", *PGBENCH, timeout=120)
    stderr = r.stderr.decode(errors="replace")
    assert r.returncode == 0, stderr
    m = RUN_LINE.search(stderr)
    assert m, stderr
    return m.group(1), r


@pytest.fixture(scope="module")
def two_hosts():
    db = ResultsServer()
    db.start()
    a = b = None
    try:
        a = throwaway.start(scale=1, results_dsn=db.dsn, host="host-a")
        a_runs = [_run(a)[0]]
        assert wait_until(lambda: a_runs[0] in db.run_hosts(), WRITTEN_WITHIN_S, 0.5), _exporter_log(a)

        # The database down during a run: the run is as ever, kept pending, and written once it is back.
        db.stop()
        down_id, down = _run(a)
        pending = Pending(a.stack.cfg.runs_dir)
        assert wait_until(lambda: (m := pending.get(down_id)) is not None and m.attempts >= 1, WRITTEN_WITHIN_S, 0.5), \
            "no pending marker with a failed attempt for the run made while the database was down"
        said = a.benchwatch("status", "--json", timeout=60)
        results = json.loads(said.stdout)["results"]
        assert results["pending_runs"] == 1 and results["last_error"], results
        db.start()
        assert wait_until(lambda: down_id in db.run_hosts(), WRITTEN_WITHIN_S, 0.5), _exporter_log(a)
        assert wait_until(lambda: pending.get(down_id) is None, 10, 0.2)
        a_runs.append(down_id)
        a.stack.down()  # its state dir stays: history runs on it below

        b = throwaway.start(scale=1, results_dsn=db.dsn, host="host-b")
        b_runs = [_run(b)[0]]
        assert wait_until(lambda: b_runs[0] in db.run_hosts(), WRITTEN_WITHIN_S, 0.5), _exporter_log(b)
        b.stack.down()
        yield db, a, b, a_runs, b_runs, down
    finally:
        for live in (a, b):
            if live is not None:
                assert not live.close()
        db.close()


def test_each_host_writes_its_runs_under_its_own_name(two_hosts):
    db, a, _, a_runs, b_runs, _ = two_hosts
    hosts = db.run_hosts()
    assert {hosts[r] for r in a_runs} == {"host-a"} and {hosts[r] for r in b_runs} == {"host-b"}
    with open(os.path.join(a.stack.cfg.runs_dir, a_runs[0], "meta.json")) as f:
        assert json.load(f)["hostname"] == "host-a"
    with psycopg.connect(db.dsn) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM run_files WHERE run_id = %s", (a_runs[0],))}
        figures = conn.execute("SELECT figures FROM runs WHERE run_id = %s", (a_runs[0],)).fetchone()[0]
    assert {"meta.json", "stdout.log", "summary.json"} <= names and any(n.startswith("series/") for n in names)
    assert figures["tps"] > 0
    with open(os.path.join(a.stack.cfg.state_dir, "stack.json")) as f:
        saved = json.load(f)
    assert saved["host"] == "host-a" and "password" not in saved["results_dsn"]


def test_the_run_made_while_the_database_was_down_kept_its_output_and_exit_code(two_hosts):
    _, a, _, a_runs, _, down = two_hosts
    run = os.path.join(a.stack.cfg.runs_dir, a_runs[1])
    with open(os.path.join(run, "stdout.log"), "rb") as f:
        saved = f.read()
    assert down.returncode == 0 and b"tps" in down.stdout and saved == down.stdout
    assert not os.path.exists(os.path.join(a.stack.cfg.runs_dir, ".results-pending", a_runs[1] + ".json"))


def test_history_all_hosts_on_a_shows_b_s_runs(two_hosts):
    _, a, b, a_runs, b_runs, _ = two_hosts
    # Host B names its workload and notes an event (its stack is down; the database takes them at once).
    named = b.benchwatch("history", b_runs[0], "--name", "nightly-b")
    assert named.returncode == 0 and b"is named nightly-b" in named.stderr, named.stderr
    assert b"not in the results database" not in named.stderr, named.stderr
    noted = b.benchwatch("annotate", "host-b: remounted with noatime")
    assert noted.returncode == 0, noted.stderr
    # host A's own history (in this process: each CLI start imports SciPy again): one workload, its two runs
    own = report.History.of_state(a.stack.cfg.state_dir, a.stack.cfg.runs_dir).workloads()
    assert [w["runs"] for w in own] == [2]
    r = a.benchwatch("history", "--all-hosts", "--json")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    pooled = json.loads(r.stdout)["workloads"]
    assert len(pooled) == 1 and pooled[0]["runs"] == 3 and pooled[0]["hosts"] == ["host-a", "host-b"]
    assert pooled[0]["workload"] != own[0]["workload"] and "host" not in pooled[0]["key"]
    # B's name of its own workload names the pooled one on A (history_state read back, under pooled ids).
    assert pooled[0]["name"] == "nightly-b", pooled[0]
    r = a.benchwatch("history", "nightly-b", "--all-hosts", "--json")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    runs = json.loads(r.stdout)["runs"]
    assert [x["run_id"] for x in runs] == a_runs + b_runs
    assert [x["host"] for x in runs] == ["host-a", "host-a", "host-b"]


def test_explain_on_a_reads_a_run_of_b_from_the_database(two_hosts):
    _, a, b, _, b_runs, _ = two_hosts
    shutil.rmtree(os.path.join(b.stack.cfg.runs_dir, b_runs[0]))  # B's copy gone: the database's is the one left
    r = a.benchwatch("explain", b_runs[0], "--json")
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    result = json.loads(r.stdout)
    assert result["run_id"] == b_runs[0] and result["source"] != "prometheus"
    fetched = os.path.join(a.stack.cfg.state_dir, "results", "fetched", b_runs[0])
    assert os.path.isfile(os.path.join(fetched, "stdout.log")) and os.listdir(os.path.join(fetched, "series"))
    assert not os.path.exists(os.path.join(a.stack.cfg.runs_dir, b_runs[0]))  # not among A's own runs
