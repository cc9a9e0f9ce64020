"""The long-term series store (docs/long-term.md) on a real VictoriaMetrics started here: a stack with
``--long-term-*`` (a bearer token in a 0600 file) remote-writes to it; a short sweep's runs and an imported
run of two years ago all reach it, what Prometheus did not forward written directly (measured and printed);
then, from a second state directory whose Prometheus is empty, ``snapshot``, ``explain`` and ``report`` read
the runs from VictoriaMetrics and give the same curves, dips and why as from the stack's own Prometheus."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from benchwatch.query import launch
from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import processes
from tests.helpers import throwaway
from tests.helpers.stores import VictoriaMetrics

SWEEP = "lt"
TOKEN = "lt-token-9f3c2e7a"  # VictoriaMetrics single-node ignores it; what matters is where it never appears
CORPUS = os.path.join(os.path.dirname(throwaway.REPO_ROOT), "shared", "corpus", "wild")


@pytest.fixture(scope="module")
def world():
    """VictoriaMetrics, a stack writing to it, and the runs of one short sweep and one import."""
    directory = tempfile.mkdtemp(prefix="benchwatch-test-lt-", dir="/tmp")
    vm = VictoriaMetrics(directory)
    token = os.path.join(directory, "token")
    with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    state_dir = throwaway.make_state_dir()
    cfg = load_config(state_dir, throwaway.free_ports(), engine="postgres", long_term={
        "long_term_write_url": vm.url + "/api/v1/write", "long_term_query_url": vm.url,
        "long_term_bearer_token_file": token})
    live = throwaway.ThrowawayStack(Stack(cfg), state_dir)
    try:
        live.bring_up(scale=1)
        yield live, vm, directory
    finally:
        left = live.close()
        vm.close()
        shutil.rmtree(directory, ignore_errors=True)
        assert not left, f"still running after down: {left}"


def long_term_result(live, run_id: str, timeout: float = 120) -> dict:
    path = os.path.join(live.state_dir, "runs", run_id, "long-term.json")
    assert processes.wait_until(lambda: os.path.exists(path), timeout, 0.25), f"no {path}"
    with open(path) as f:
        return json.load(f)


def sweep_runs(live) -> list[str]:
    with open(os.path.join(live.state_dir, "sweeps", SWEEP, "state.jsonl")) as f:
        return [e["run_id"] for e in map(json.loads, f) if e.get("event") == "finished" and e.get("ok")]


@pytest.fixture(scope="module")
def swept(world, tmp_path_factory):
    live = world[0]
    script = tmp_path_factory.mktemp("lt") / "commit.sql"
    script.write_text("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 1, now());\n")
    r = live.benchwatch("sweep", "--name", SWEEP, "--variant", "on", "--variant", "off:synchronous_commit=off",
                        "--repeat", "3", "--", "pgbench", "-f", str(script), "-T", "2", timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    runs = sorted(set(sweep_runs(live)))
    assert len(runs) == 6, runs
    return runs


def test_every_sample_reaches_the_store_and_no_secret_leaks(world, swept):
    live, vm, directory = world
    results = {run_id: long_term_result(live, run_id) for run_id in swept}
    for run_id, done in results.items():
        assert done["local"] > 0 and done["refused"] == 0, (run_id, done)
        # Every TPS sample of the run in VictoriaMetrics, once.
        with open(os.path.join(live.state_dir, "runs", run_id, "meta.json")) as f:
            meta = json.load(f)
        selector = f'benchmark_progress_tps{{run_id="{run_id}"}}[1h]'
        # (VictoriaMetrics returns the series' staleness marker as a NaN sample; Prometheus never does.)
        got = [v for v in vm.query(selector, meta["ended_at"] + 30)[0]["values"] if v[1] != "NaN"]
        local = json.load(urllib.request.urlopen(live.prometheus + "/api/v1/query?" + urllib.parse.urlencode(
            {"query": selector, "time": meta["ended_at"] + 30})))
        want = local["data"]["result"][0]["values"]
        assert [t for t, _ in got] == [t for t, _ in want]
        assert all(math.isclose(float(a), float(b), rel_tol=1e-9) for (_, a), (_, b) in zip(got, want))
    forwarded = sum(d["forwarded"] for d in results.values())
    written = sum(d["written"] for d in results.values())
    print(f"\nlive runs: {sum(d['local'] for d in results.values())} samples in the runs' windows, "
          f"{forwarded} forwarded by Prometheus' remote write, {written} written directly: "
          f"{[d['written_by_name'] for d in results.values() if d['written']]}")
    # An old run: Prometheus keeps it (out-of-order window), its remote write does not forward it.
    old = time.time() - 2 * 365 * 86400
    r = live.benchwatch("import", os.path.join(CORPUS, "009_pgbench_16_rate_P1_jittered_times.txt"),
                        "--start", f"{old:.0f}")
    assert r.returncode == 0, r.stderr.decode()
    run_id = r.stdout.decode().split()[-1]
    said = r.stderr.decode()
    assert f"{run_id} in the long-term store" in said and "refused" not in said, said
    done = long_term_result(live, run_id, timeout=5)
    print(f"imported run of two years ago: {done}")
    assert done["written"] > 0 and done["refused"] == 0 and done["written"] + done["forwarded"] == done["local"]
    # The token: read by Prometheus from its file, in no config, saved state, argv or log of the stack.
    for root, _, files in os.walk(live.state_dir):
        for name in files:
            path = os.path.join(root, name)
            # Regular files only: a server's Unix socket (the results database's) cannot be read.
            if os.path.islink(path) or not os.path.isfile(path) or "/runs/" in path or "/pg/" in path or "/data/" in path:
                continue
            with open(path, "rb") as f:
                assert TOKEN.encode() not in f.read(), path
    with open(os.path.join(live.state_dir, "prometheus", "etc", "prometheus.yml")) as f:
        assert os.path.join(directory, "token") in f.read()
    for component in live.stack.components():
        pid = live.stack.pid(component)
        if pid:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                assert TOKEN.encode() not in f.read(), component
    # What a sample costs VictoriaMetrics once on disk (its storage alone, its index apart).
    urllib.request.urlopen(vm.url + "/internal/force_flush", timeout=30).read()
    m = vm.metrics()
    print(f"VictoriaMetrics: {m.get('vm_rows', 0):.0f} samples, {m.get('vm_data_size_bytes', 0):.0f} bytes: "
          f"{m.get('vm_data_size_bytes', 0) / max(m.get('vm_rows', 1), 1):.2f} bytes per sample")


def same_csv(a: str, b: str) -> bool:
    """The same rows, cell for cell, numbers within 1e-9 of each other: VictoriaMetrics keeps a float's
    12 significant digits or so (1.5100000000000002 comes back as 1.51)."""
    rows_a, rows_b = list(csv.reader(io.StringIO(a))), list(csv.reader(io.StringIO(b)))
    if len(rows_a) != len(rows_b):
        return False
    for ra, rb in zip(rows_a, rows_b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if x == y:
                continue
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                    return False
            except ValueError:
                return False
    return True


def cli(state_dir: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    began = time.monotonic()
    r = subprocess.run([throwaway.BENCHWATCH, *args, "--state-dir", state_dir], env=env,
                       capture_output=True, timeout=timeout)
    print(f"{args[0]} in {os.path.basename(state_dir)}: {time.monotonic() - began:.1f} s")
    return r


def test_without_the_local_series_the_store_gives_the_same_snapshot_explain_and_report(world, swept):
    live, _, directory = world
    for run_id in swept:
        long_term_result(live, run_id)
    # A second state directory: the same runs and sweep, a Prometheus that has none of them.
    other = os.path.join(directory, "other")
    os.makedirs(other)
    with launch.private_prometheus() as empty:
        with open(os.path.join(live.state_dir, "stack.json")) as f:
            saved = json.load(f)
        saved["ports"]["prometheus"] = empty.port
        with open(os.path.join(other, "stack.json"), "w") as f:
            json.dump(saved, f)
        for name in ("runs", "sweeps"):
            os.symlink(os.path.join(live.state_dir, name), os.path.join(other, name))
        here, there = live.state_dir, other
        run_id = swept[0]

        def explain(state_dir: str) -> dict:
            r = cli(state_dir, "explain", run_id, "--json")
            assert r.returncode == 0, r.stderr.decode()
            return json.loads(r.stdout)

        a, b = explain(here), explain(there)
        assert a["source"] == b["source"] == "prometheus"
        assert a["dips"] == b["dips"]

        def snapshot(state_dir: str) -> tuple[dict[str, str], str, str]:
            """The snapshot's curves (its series and every panel's data, as CSV), its source, what it said."""
            r = cli(state_dir, "snapshot", run_id, "-o", os.path.join(state_dir, "out"))
            assert r.returncode == 0, r.stderr.decode()
            target = r.stdout.decode().split()[0]
            with open(os.path.join(target, "manifest.json")) as f:
                source = json.load(f)["source"]
            curves = {}
            for sub in ("series", "panels"):
                for name in sorted(os.listdir(os.path.join(target, "data", sub))):
                    with open(os.path.join(target, "data", sub, name)) as f:
                        curves[f"{sub}/{name}"] = f.read()
            return curves, source, r.stderr.decode()

        (ca, source_a, _), (cb, source_b, said) = snapshot(here), snapshot(there)
        assert "long-term store" in said, said
        assert source_a == source_b == "prometheus"
        assert "series/benchmark_progress_tps.csv" in ca
        assert ca.keys() == cb.keys()
        for name in ca:
            assert same_csv(ca[name], cb[name]), name

        def report(state_dir: str) -> tuple[list, str]:
            """Each difference's verdict and why (server measures), and the why of its steadiness."""
            r = cli(state_dir, "report", SWEEP, "--json")
            assert r.returncode == 0, r.stderr.decode()
            model = json.loads(r.stdout)
            return [(d["verdict"], d["why"], d["stability"].get("why")) for d in model["differences"]], r.stderr.decode()

        (whys, _), (from_store, said) = report(here), report(there)
        assert any(why for _, why, _ in whys), whys
        assert from_store == whys, said
