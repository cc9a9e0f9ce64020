"""Snapshots and comparisons of real runs on the live stack: the files a user shares, opened the
way a colleague would (the HTML in headless Chromium with no network), and a snapshot rebuilt
from the run directory alone compared with one made from Prometheus."""

from __future__ import annotations

import csv
import glob
import http.server
import json
import math
import os
import re
import shutil
import subprocess
import tarfile
import threading
from typing import ClassVar

import pytest

from benchwatch.query.archive import save_run_series
from benchwatch.share.png import png_size
from benchwatch.util import net, processes
from tests.helpers.prometheus import query
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def run_id_of(result: subprocess.CompletedProcess) -> str:
    for line in result.stderr.decode().splitlines():
        m = re.match(r"benchwatch: run (\S+) ended", line)
        if m:
            return m.group(1)
    raise AssertionError(result.stderr.decode())


def finished_run(live_stack, *pgbench_args: str, during=None) -> str:
    """A run through `benchwatch run`, with its series in Prometheus and saved in the run directory."""
    proc = subprocess.Popen([os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchwatch"),
                             "run", "--", "pgbench", *pgbench_args], env=live_stack.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=live_stack.state_dir)
    try:
        if during:
            during()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            processes.stop_pid(proc.pid)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert result.returncode == 0, err.decode()
    run_id = run_id_of(result)
    assert processes.wait_until(lambda: bool(query(live_stack.prometheus, f'benchmark_running{{run_id="{run_id}"}} == 0')), 30, 0.2)
    save_run_series(os.path.join(live_stack.state_dir, "runs", run_id), live_stack.prometheus)
    return run_id


@pytest.fixture(scope="module")
def checkpoint_run(live_stack):
    """-l (per-transaction log), -r, and a CHECKPOINT 5 s into the run (once pgbench has said so)."""
    runs_dir = os.path.join(live_stack.state_dir, "runs")
    before = set(os.listdir(runs_dir)) if os.path.isdir(runs_dir) else set()

    def checkpoint_mid_run():
        def five_seconds_in():
            for d in set(os.listdir(runs_dir)) - before if os.path.isdir(runs_dir) else []:
                try:
                    with open(os.path.join(runs_dir, d, "stderr.log"), "rb") as f:
                        if b"progress: 5.0 s" in f.read():
                            return True
                except FileNotFoundError:
                    pass
            return False
        assert processes.wait_until(five_seconds_in, 60, 0.05)
        live_stack.psql("CHECKPOINT")

    return finished_run(live_stack, "-n", "-r", "-l", "-P", "1", "-c", "4", "-j", "2", "-T", "10",
                        during=checkpoint_mid_run)


@pytest.fixture(scope="module")
def snapshot(live_stack, checkpoint_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("snap-prom")
    r = live_stack.benchwatch("snapshot", checkpoint_run, "--out", str(out))
    assert r.returncode == 0, r.stderr.decode()
    directory, archive = r.stdout.decode().split()
    assert "from Prometheus" in r.stderr.decode()
    return directory, archive


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def render(html_path: str, tmp: str, screenshot: str | None = None, size=(1400, 2600)) -> tuple[dict, list[str]]:
    """Open a page in headless Chromium with networking off; (status the page wrote, console lines)."""
    args = [CHROMIUM or require_tool("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", f"--user-data-dir={tmp}/profile", "--enable-logging=stderr", "--v=0",
            # No network: every name resolves nowhere and every request goes to a closed proxy.
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size={size[0]},{size[1]}", "--hide-scrollbars", "--virtual-time-budget=5000"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    r = subprocess.run(args + ["file://" + os.path.abspath(html_path)], capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    console = [l for l in r.stderr.decode(errors="replace").splitlines() if ":CONSOLE" in l]
    if screenshot:
        return {}, console
    m = re.search(r'<div id="bw-status"[^>]*>([^<]*)</div>', r.stdout.decode())
    assert m, r.stdout.decode()[-2000:]
    return json.loads(m.group(1)), console


# -- the snapshot of a run ------------------------------------------------------------------------

def test_snapshot_directory_and_archive(snapshot, checkpoint_run):
    directory, archive = snapshot
    assert os.path.basename(directory) == f"snapshot-{checkpoint_run}"
    for name in ("index.html", "grafana-snapshot.json", "summary.md", "summary.json", "tps.png", "latency.png",
                 "disk.png", "manifest.json", "raw/meta.json", "raw/stdout.log", "raw/stderr.log",
                 "data/annotations.csv", "data/series/benchmark_progress_tps.csv",
                 "data/series/pg_checkpoint_in_progress.csv", "data/series/node_disk_io_time_seconds_total.csv"):
        assert os.path.isfile(os.path.join(directory, name)), name
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    top = os.path.basename(directory)
    assert {f"{top}/index.html", f"{top}/grafana-snapshot.json", f"{top}/raw/stdout.log"} <= names
    files = {f"{top}/{os.path.relpath(os.path.join(r, n), directory)}" for r, _, ns in os.walk(directory) for n in ns}
    assert files <= names


def test_pngs_decode_with_the_expected_size(snapshot):
    directory, _ = snapshot
    from PIL import Image
    for name, size in (("tps.png", (1200, 500)), ("latency.png", (1200, 450)), ("disk.png", (1200, 700))):
        path = os.path.join(directory, name)
        assert png_size(path) == size
        with Image.open(path) as im:
            im.load()  # decodes every byte
            assert im.size == size
            # Not blank: a drawn curve has many colours.
            assert len(im.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


def test_grafana_snapshot_has_frames_for_every_panel_and_the_annotations(snapshot, checkpoint_run):
    directory, _ = snapshot
    body = json.loads(read(os.path.join(directory, "grafana-snapshot.json")))
    assert set(body) == {"dashboard", "name", "expires"}
    dash = body["dashboard"]
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len(panels) >= 14
    expected_data = {"TPS", "TPS mean", "TPS min", "TPS max", "TPS stddev", "TPS coefficient of variation",
                     "Seconds below 50% of median", "Statements per second (QPS)", "Latency", "Aborted clients",
                     "Per-statement latency", "Disk utilisation (%util)", "Disk await"}
    for p in panels:
        assert isinstance(p["snapshotData"], list), p["title"]
        assert p["targets"][0]["queryType"] == "snapshot" and p["targets"][0]["snapshot"] == p["snapshotData"]
        for frame in p["snapshotData"]:
            assert frame["refId"] and frame["fields"][0]["type"] == "time"
            assert all(len(f["values"]) == len(frame["fields"][0]["values"]) for f in frame["fields"])
        if p["title"] in expected_data:
            assert p["snapshotData"] and any(v is not None for f in p["snapshotData"] for v in f["fields"][-1]["values"]), p["title"]
    tps = next(p for p in panels if p["title"] == "TPS")
    values = [v for f in tps["snapshotData"] if f["refId"] == "A" for v in f["fields"][1]["values"] if v is not None]
    assert len(values) >= 9 and max(values) > 0
    annotations = {a["name"]: a for a in dash["annotations"]["list"]}
    run_events = annotations["pgbench run"]["snapshotData"]
    assert len(run_events) == 1 and checkpoint_run in run_events[0]["title"]
    # The manual CHECKPOINT: one region, inside the run, with its reason.
    requested = [e for a in annotations.values() for e in a.get("snapshotData", [])
                 if "immediate" in e["title"] and e["time"] >= run_events[0]["time"] - 1000]
    assert requested and all(e["timeEnd"] >= e["time"] for e in requested)
    assert dash["templating"]["list"][-1]["current"]["value"] == checkpoint_run
    assert body["dashboard"]["time"]["from"].endswith("Z")


def test_summary_numbers_agree_with_pgbench(snapshot, live_stack, checkpoint_run):
    directory, _ = snapshot
    s = json.loads(read(os.path.join(directory, "summary.json")))
    stdout = read(os.path.join(live_stack.state_dir, "runs", checkpoint_run, "stdout.log"))
    assert s["tps"]["pgbench_summary_tps"] == pytest.approx(float(re.search(r"tps = ([\d.]+)", stdout).group(1)))
    stderr = read(os.path.join(live_stack.state_dir, "runs", checkpoint_run, "stderr.log"))
    tps = [float(x) for x in re.findall(r"^progress: [\d.]+ s, ([\d.]+) tps", stderr, re.M)]
    assert s["tps"]["samples"] == len(tps) and s["tps"]["mean"] == pytest.approx(sum(tps) / len(tps))
    assert any("immediate" in c["reason"] and c["completed"] and c["buffers"] is not None for c in s["checkpoints"])
    assert len(s["statements"]) == 11 and s["statements"][4]["statement"] == "BEGIN;"
    md = read(os.path.join(directory, "summary.md"))
    assert "## Checkpoints" in md and "immediate force wait" in md and "![tps.png](tps.png)" in md


def test_no_secret_in_any_file(snapshot, live_stack):
    directory, archive = snapshot
    password = read(os.path.join(live_stack.state_dir, "secrets", "pg_password")).strip()
    assert len(password) >= 8
    for root, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert password.encode() not in f.read(), os.path.join(root, name)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile():
                assert password.encode() not in tar.extractfile(member).read(), member.name


def test_html_opens_offline_with_one_chart_per_panel(snapshot, tmp_path):
    directory, _ = snapshot
    page = os.path.join(directory, "index.html")
    text = read(page)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page must not load anything"
    body = json.loads(read(os.path.join(directory, "grafana-snapshot.json")))
    panels = [p for p in body["dashboard"]["panels"] if p["type"] != "row"]
    charts = [p for p in panels if p["type"] == "timeseries"]
    with_data = [p for p in charts if any(v is not None for f in p["snapshotData"] for v in f["fields"][1]["values"])]
    status, console = render(page, str(tmp_path))
    assert status["errors"] == [] and console == [], (status, console)
    assert status["panels"] == len(panels)
    assert status["charts"] == len(charts)
    assert status["chartsWithData"] == len(with_data) >= 7
    shot = str(tmp_path / "page.png")
    _, console = render(page, str(tmp_path), screenshot=shot)
    assert console == [] and png_size(shot) == (1400, 2600)


# -- rebuilt from the run directory alone ---------------------------------------------------------

def _csv_rows(path: str) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _same(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


def test_rebuilt_snapshot_equals_the_prometheus_one(snapshot, live_stack, checkpoint_run, tmp_path):
    directory, _ = snapshot
    closed = net.free_port()  # nothing listens there: Prometheus "has forgotten" the run
    r = live_stack.benchwatch("snapshot", checkpoint_run, "--out", str(tmp_path), "--prometheus", f"http://127.0.0.1:{closed}")
    assert r.returncode == 0, r.stderr.decode()
    rebuilt = r.stdout.decode().split()[0]
    assert "rebuilding from the run directory" in r.stderr.decode()
    a = json.loads(read(os.path.join(directory, "summary.json")))
    b = json.loads(read(os.path.join(rebuilt, "summary.json")))
    assert (a.pop("source"), b.pop("source")) == ("prometheus", "raw")
    _same(a, b)
    for sub in ("data/series", "data/panels"):
        names = sorted(os.listdir(os.path.join(directory, sub)))
        assert names == sorted(os.listdir(os.path.join(rebuilt, sub))), sub
        for name in names:
            rows_a, rows_b = _csv_rows(os.path.join(directory, sub, name)), _csv_rows(os.path.join(rebuilt, sub, name))
            assert len(rows_a) == len(rows_b), name
            for ra, rb in zip(rows_a, rows_b):
                for x, y in zip(ra, rb):
                    try:
                        assert math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9) or (x == y), (name, ra, rb)
                    except ValueError:
                        assert x == y, (name, ra, rb)
    ga = json.loads(read(os.path.join(directory, "grafana-snapshot.json")))["dashboard"]
    gb = json.loads(read(os.path.join(rebuilt, "grafana-snapshot.json")))["dashboard"]
    _same([p.get("snapshotData") for p in ga["panels"]], [p.get("snapshotData") for p in gb["panels"]])
    _same([a.get("snapshotData") for a in ga["annotations"]["list"]], [a.get("snapshotData") for a in gb["annotations"]["list"]])
    assert "rebuilt from the raw output" in read(os.path.join(rebuilt, "summary.md"))


def test_snapshot_of_a_snapshot_raw_folder(snapshot, live_stack, tmp_path):
    """The raw/ folder of a shared snapshot is a run directory: the receiver rebuilds everything from it."""
    directory, _ = snapshot
    r = live_stack.benchwatch("snapshot", "--run-dir", os.path.join(directory, "raw"), "--source", "raw",
                              "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()
    again_dir = r.stdout.decode().split()[0]
    assert os.path.basename(again_dir) == os.path.basename(directory)  # the run keeps its id
    again = json.loads(read(os.path.join(again_dir, "summary.json")))
    first = json.loads(read(os.path.join(directory, "summary.json")))
    assert again["run_id"] == first["run_id"]
    assert again["tps"] == first["tps"] and again["checkpoints"] == first["checkpoints"]
    assert again["statements"] == first["statements"] and again["settings"] == first["settings"]


# -- upload ------------------------------------------------------------------------------------------

class _SnapshotAPI(http.server.BaseHTTPRequestHandler):
    """Stands in for Grafana's POST /api/snapshots (no Grafana can run here): records the request."""
    received: ClassVar[list] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, dict(self.headers), json.loads(body)))
        answer = json.dumps({"key": "k1", "deleteKey": "d1", "url": f"http://127.0.0.1:{self.server.server_port}/dashboard/snapshot/k1",
                             "deleteUrl": f"http://127.0.0.1:{self.server.server_port}/api/snapshots-delete/d1", "id": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def test_upload_posts_the_snapshot_with_the_token(live_stack, checkpoint_run, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SnapshotAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = "glsa_test_token_0123456789"
    try:
        env = dict(live_stack.env(), GRAFANA_TOKEN=token)
        r = subprocess.run([os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benchwatch"),
                            "snapshot", checkpoint_run, "--out", str(tmp_path), "--upload",
                            f"http://127.0.0.1:{server.server_port}", "--expires", "3600"],
                           env=env, capture_output=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split()
    assert lines[-1] == f"http://127.0.0.1:{server.server_port}/dashboard/snapshot/k1"
    path, headers, body = _SnapshotAPI.received[-1]
    assert path == "/api/snapshots" and headers["Authorization"] == f"Bearer {token}"
    assert body["expires"] == 3600 and body["dashboard"]["panels"][0]["snapshotData"]
    for root, _, files in os.walk(tmp_path):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                assert token.encode() not in f.read(), name


# -- compare ------------------------------------------------------------------------------------------

def test_compare_two_runs_as_a_client_sweep(live_stack, checkpoint_run, tmp_path):
    two_clients = finished_run(live_stack, "-n", "-r", "-P", "1", "-c", "2", "-j", "2", "-T", "8")
    r = live_stack.benchwatch("compare", two_clients, checkpoint_run, "--by", "clients", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr.decode()
    directory, archive = r.stdout.decode().split()
    assert os.path.isfile(archive)
    md = read(os.path.join(directory, "compare.md"))
    table = md.split("## TPS by clients", 1)[1].split("\n## ", 1)[0]
    rows = [l for l in table.splitlines() if re.match(r"\| \d+ \|", l)]
    assert [l.split("|")[1].strip() for l in rows] == ["2", "4"]
    summary_rows = md.split("## Summary", 1)[1]
    tps_line = next(l for l in summary_rows.splitlines() if l.startswith("| TPS (pgbench summary)"))
    assert re.search(r"[+-]\d+\.\d%", tps_line)
    assert png_size(os.path.join(directory, "tps.png")) == (1200, 500)
    assert png_size(os.path.join(directory, "tps-by-clients.png")) == (900, 500)
    with open(os.path.join(directory, "data", "tps-aligned.csv"), newline="") as f:
        aligned = list(csv.reader(f))
    assert aligned[0] == ["seconds", two_clients, checkpoint_run]
    assert float(aligned[1][0]) < 2.0  # aligned at each run's start
    status, console = render(os.path.join(directory, "index.html"), str(tmp_path))
    assert status["errors"] == [] and console == [], (status, console)
    assert status["charts"] == status["chartsWithData"] == 3


def test_unknown_run_is_an_error(live_stack, tmp_path):
    r = live_stack.benchwatch("snapshot", "19990101T000000Z-0000", "--out", str(tmp_path))
    assert r.returncode == 2 and b"no run 19990101T000000Z-0000" in r.stderr
    assert not glob.glob(str(tmp_path / "*"))
