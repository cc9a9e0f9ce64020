"""benchwatch sweep and report on a real PostgreSQL 15 stack: the false-alarm check (A/A), resume after SIGKILL,
bad input refused before any run, the report's bundle, two builds swept side by side. One stack for the module,
short runs (pgbench -T 3). A known effect (synchronous_commit on against off, with its why, the bundle and the
Experiment dashboard) is checked on test_profiled_sweeps.py's sweep: the same sweep, profiled."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from benchwatch.evidence import HOST_SIGNALS
from benchwatch.query.prometheus import query
from benchwatch.util.processes import wait_until
from tests.helpers import throwaway
from tests.helpers.tools import other_postgres_bindir

SHORT = ["-T", "3"]


@pytest.fixture(scope="module")
def live():
    stack = throwaway.start(scale=2)
    try:
        yield stack
    finally:
        left = stack.close()
        assert not left, f"still running after down: {left}"


def sweep(live, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return live.benchwatch("sweep", *args, timeout=timeout)


def report(live, name: str, timeout: float = 120) -> dict:
    r = live.benchwatch("report", name, "--json", timeout=timeout)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def runs(live) -> set[str]:
    path = os.path.join(live.state_dir, "runs")
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def events(live, name: str) -> list[dict]:
    with open(os.path.join(live.state_dir, "sweeps", name, "state.jsonl")) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


@pytest.mark.parametrize("args, message", [
    (["--variant", "A", "--variant", "B:no_such_setting=1", "--", "pgbench", *SHORT],
     "variant B: unknown setting no_such_setting"),
    (["--variant", "A", "--variant", "P:bindir=/usr/bin", "--", "pgbench", *SHORT],
     "variant P: bindir /usr/bin has no postgres"),
    (["--variant", "A", "--variant", "A:synchronous_commit=off", "--", "pgbench", *SHORT],
     "variant name 'A' is used twice"),
    (["--variant", "A", "--clients", "1,2", "--", "pgbench", "-c", "4", *SHORT],
     "-c/--client is in the pgbench arguments and --clients sets it per cell"),
])
def test_bad_input_is_refused_before_any_run(live, args, message):
    before = runs(live)
    r = sweep(live, "--name", "bad", *args, timeout=120)
    assert r.returncode == 2, r.stderr.decode()
    assert message in r.stderr.decode()
    assert runs(live) == before
    assert not os.path.exists(os.path.join(live.state_dir, "sweeps", "bad"))


def test_aa_shows_no_difference(live):
    r = sweep(live, "--name", "aa", "--variant", "A", "--variant", "B", "--clients", "1,2", "--repeat", "3",
              "--latency-log", "--", "pgbench", "-S", *SHORT)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "sweep aa: 12 runs (2 variants x 2 cells x 3 rounds), order interleaved, seed " in err
    assert "sweep aa: run 1/12 (" in err and " - ETA " in err
    model = report(live, "aa")
    assert model["sweep"] == "aa" and model["baseline"] == "A"
    assert sorted((c["variant"], c["clients"], c["n"]) for c in model["cells"]) == [
        ("A", 1, 3), ("A", 2, 3), ("B", 1, 3), ("B", 2, 3)]
    for c in model["cells"]:
        assert c["scale"] is None
        assert 0 < c["latency_p95_ms_median"] < 1000  # from each run's pgbench -l log
        assert c["tps_ci"][0] <= c["tps_median"] <= c["tps_ci"][1]
        assert len(c["run_ids"]) == 3
    assert [d["verdict"] for d in model["differences"]] == ["no difference shown"] * 2, model["differences"]
    assert "Welch" in model["differences"][0]["test"]
    # Ordinary runs: labelled in Prometheus like any run, with the sweep's labels beside the usual ones.
    labels = query(live.prometheus, 'count by (variant, cell, repeat) (benchmark_run_info{sweep="aa"})')
    assert len(labels) == 12
    # One verdict series and one row of the bundle's report per cell. (A known effect's verdict, why, bundle and
    # Experiment dashboard: test_profiled_sweeps.py's synchronous_commit sweep.)
    verdicts = query(live.prometheus, 'last_over_time(benchwatch_experiment_verdict{experiment="aa"}[15m])')
    assert sorted(float(r["value"][1]) for r in verdicts) == [0.0, 0.0]
    r = live.benchwatch("report", "aa", timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    out = os.path.join(live.state_dir, "shares", "sweep-aa")
    assert r.stdout.decode().split() == [out, out + ".tar.gz"]
    assert os.path.getsize(os.path.join(out, "tps-by-clients.png")) > 0  # a figure of TPS by the clients swept
    with open(os.path.join(out, "report.md")) as f:
        text = f.read()
    assert "| B | clients=1 |" in text and "| B | clients=2 |" in text, text


def test_resume_after_sigkill_runs_only_what_is_missing(live):
    name = "resume"
    proc = subprocess.Popen([throwaway.BENCHWATCH, "sweep", "--name", name, "--variant", "A",
                             "--variant", "B:synchronous_commit=off", "--repeat", "2", "--order", "blocked",
                             "--", "pgbench", "-S", *SHORT],
                            env=live.env(), start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = os.path.join(live.state_dir, "sweeps", name, "state.jsonl")

    def in_third_run() -> bool:
        try:
            with open(state) as f:
                return any(json.loads(line).get("event") == "started" and json.loads(line).get("index") == 3
                           for line in f if line.endswith("\n"))
        except FileNotFoundError:
            return False

    known = runs(live)

    def third_run_progressing() -> bool:
        # Into the run, not at its start: its first progress line is saved.
        if not in_third_run():
            return False
        for run_id in runs(live) - known:
            try:
                with open(os.path.join(live.state_dir, "runs", run_id, "stderr.log"), "rb") as f:
                    text = f.read()
            except FileNotFoundError:
                continue
            if b"progress: " in text and run_id not in finished_runs():
                return True
        return False

    def finished_runs() -> set[str]:
        try:
            return {e.get("run_id") for e in events(live, name) if e["event"] == "finished"}
        except FileNotFoundError:
            return set()

    try:
        assert wait_until(third_run_progressing, 120, interval=0.1), "the sweep never got into its third run"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    before = events(live, name)
    done_before = {e["index"]: e["run_id"] for e in before if e["event"] == "finished" and e["ok"]}
    assert sorted(done_before) == [1, 2]
    # B's settings were applied when the kill came: the resume puts them back first.
    r = sweep(live, "--resume", name)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "run 3 was interrupted: running it again" in err
    assert "sweep resume: run 1/4" not in err and "sweep resume: run 3/4 (B, round 1)" in err
    after = events(live, name)
    done = {}
    for e in after:
        if e["event"] == "finished" and e["ok"]:
            assert e["index"] not in done, f"run {e['index']} counted twice"
            done[e["index"]] = e["run_id"]
    assert sorted(done) == [1, 2, 3, 4]
    assert all(done[i] == done_before[i] for i in done_before)
    assert sum(1 for e in after if e["event"] == "started" and e["index"] == 3) == 2
    model = report(live, name)
    assert sorted(c["n"] for c in model["cells"]) == [2, 2]
    assert live.psql("SHOW synchronous_commit") == "on"


def test_two_real_builds_as_bindir_variants_each_watched_as_its_own_target(live, tmp_path):
    other = other_postgres_bindir()
    ours = os.path.dirname(live.stack.installed("postgres"))
    # Debian's PostgreSQL 15 has LLVM's JIT compiler, the npm build of 16 has none: with every JIT threshold at 0
    # each SELECT is compiled, inlined and optimised on 15 (tens of ms) and on 16 nothing is, a difference far
    # above this machine's run-to-run noise, so that the report has a why. 3 rounds: with 2, Welch's t has
    # about 1 degree of freedom when one side's runs spread and even a 40x difference can stay unshown.
    # 8 s runs: the statements collector samples every 5 s, most runs get two samples.
    script = tmp_path / "jit.sql"
    script.write_text("SET jit_above_cost = 0;\nSET jit_inline_above_cost = 0;\nSET jit_optimize_above_cost = 0;\n"
                      "\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n")
    r = sweep(live, "--name", "builds", "--variant", f"pg15:bindir={ours}", "--variant", f"pg16:bindir={other}",
              "--scale", "1", "--repeat", "3", "--", "pgbench", "-f", str(script), "-T", "8")
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert f"variant pg16: initdb of {other}" in err
    assert "debug_assertions" not in err  # release builds: no warning
    for name in ("pg15", "pg16"):
        assert f"sweep builds: variant {name}: postgres_exporter on 127.0.0.1:" in err, err
        assert f"variant-servers/builds/{name}/server.log followed" in err, err
    # Each build's server watched as a target of its own: its exporter's series, its server log's checkpoints
    # (the CHECKPOINT before each run), its statements.
    for name in ("pg15", "pg16"):
        target = f'target="sweep-builds-{name}"'
        assert query(live.prometheus, f"max_over_time(pg_up{{{target}}}[10m])"), name
        assert query(live.prometheus, f"max_over_time(pg_checkpoints_completed_total{{{target}}}[10m]) > 0"), name
        assert query(live.prometheus, f"max_over_time(pg_statement_calls_total{{{target}}}[10m])"), name
    model = report(live, "builds")
    versions = {v["name"]: v["server_versions"] for v in model["variants"]}
    assert [v.split(".")[0] for v in versions["pg15"]] == ["15"] and [v.split(".")[0] for v in versions["pg16"]] == ["16"]
    assert sorted((c["variant"], c["scale"], c["n"]) for c in model["cells"]) == [("pg15", 1, 3), ("pg16", 1, 3)]
    [diff] = model["differences"]
    assert diff["verdict"] == "faster", diff
    assert diff["why_scope"] == "server and host"
    host = {s.name for s in HOST_SIGNALS}
    server_side = [row for row in diff["why"] if row["signal"] not in host]
    assert server_side, diff["why"]
    # Between runs, the build idle during the next run was checkpointed (its timed checkpoint has nothing to do).
    assert any("idle during this run" in what for what in model["between_runs"]), model["between_runs"]
    # Both builds' servers and their watchers are stopped once the sweep ends, their exporters no longer scraped.
    for name in ("pg15", "pg16"):
        home = os.path.join(live.state_dir, "variant-servers", "builds", name)
        assert not os.path.exists(os.path.join(home, "data", "postmaster.pid"))
        assert not os.listdir(os.path.join(home, "pids"))
    with open(os.path.join(live.state_dir, "prometheus", "etc", "targets", "postgres.json")) as f:
        assert [e["labels"]["target"] for e in json.load(f)] == ["local"]


def test_an_existing_server_is_watched_with_what_can_be_read_of_it(live, tmp_path):
    """A dsn= variant's server (here the stack's own, whose log goes to its stderr: no logging collector): its
    own exporter and statements, no server log, and its scope says so."""
    from benchwatch.engines.postgresql.dsn import format_dsn

    server = live.stack.server.variant_server("dsn", format_dsn(live.stack.server.pg_params()), str(tmp_path / "own"))
    server.start()
    try:
        done = server.watch("sweep-t-own")
        assert any("no server log followed (its logging_collector is off" in d for d in done), done
        assert server.scope() == ("server (no server log: its logging_collector is off: its log goes wherever its "
                                  "stderr was sent) and host")
        assert wait_until(lambda: query(live.prometheus, 'pg_up{target="sweep-t-own"} == 1'), 60, interval=0.5)
    finally:
        server.stop()
    assert not os.listdir(tmp_path / "own" / "pids")
    with open(os.path.join(live.state_dir, "prometheus", "etc", "targets", "postgres.json")) as f:
        assert [e["labels"]["target"] for e in json.load(f)] == ["local"]


def test_sysbench_on_mariadb_with_a_settings_variant_and_clients(mariadb_stack):
    live = mariadb_stack
    tables = ["--tables=1", "--table-size=2000"]
    r = live.benchwatch("run", "--", "sysbench", "oltp_write_only", *tables, "prepare", timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    before = live.mariadb("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit")
    r = live.benchwatch("sweep", "--engine", "mariadb", "--name", "rw", "--variant", "base",
                        "--variant", "noflush:innodb_flush_log_at_trx_commit=2", "--clients", "1,2", "--repeat", "2",
                        "--", "sysbench", "oltp_write_only", *tables, "--time=3", "run", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "variant noflush: SET GLOBAL innodb_flush_log_at_trx_commit = 2" in err
    assert "(noflush, 2 clients, round " in err
    assert live.mariadb("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit") == before
    model = report(live, "rw")
    assert model["tool"] == "sysbench" and model["engine"] == "mysql"
    assert sorted((c["variant"], c["clients"], c["n"]) for c in model["cells"]) == [
        ("base", 1, 2), ("base", 2, 2), ("noflush", 1, 2), ("noflush", 2, 2)]
    assert all(c["tps_median"] > 0 and c["latency_p95_ms_median"] > 0 for c in model["cells"])
    assert {d["verdict"] for d in model["differences"]} <= {"faster", "slower", "no difference shown"}
    threads = query(live.prometheus, 'count by (threads) (benchmark_run_info{sweep="rw",tool="sysbench"})')
    assert sorted(t["metric"]["threads"] for t in threads) == ["1", "2"]
