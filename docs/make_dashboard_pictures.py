#!/usr/bin/env python3
"""Pictures of every dashboard from a real run, for docs/dashboards.md.

    .venv/bin/python docs/make_dashboard_pictures.py

Starts a throwaway stack, runs a 40 s pgbench with a per-transaction log, a
manual CHECKPOINT at 12 s and a table lock from 25 s to 28 s
(max_wal_size 1GB, so checkpoints are timed or requested), then renders each
dashboard's panels from Prometheus with the snapshot renderer (the same queries
Grafana runs) and screenshots the page in headless Chromium into docs/dashboards/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # for tests.helpers

from benchwatch.record import rundir
from benchwatch.share.collect import collect
from benchwatch.share.html import snapshot_page
from benchwatch.stack.native import pg_bindir
from benchwatch.util import processes
from tests.helpers import throwaway

OUT = os.path.join(HERE, "dashboards")
DASHBOARDS = ("pgbench-run", "host-io", "checkpoints-wal")


def disturb(live: throwaway.ThrowawayStack) -> None:
    psql = os.path.join(pg_bindir(), "psql")
    env = live.pg_env()
    time.sleep(12)
    subprocess.run([psql, "-X", "-qc", "CHECKPOINT"], env=env, capture_output=True)
    time.sleep(13)
    subprocess.run([psql, "-X", "-qc", "BEGIN; LOCK TABLE pgbench_branches; SELECT pg_sleep(3); COMMIT;"],
                   env=env, capture_output=True)


def screenshot(html_path: str, png_path: str, profile: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        sys.exit("chromium is not installed: apt-get install chromium")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                    "--window-size=1400,1900", "--hide-scrollbars", "--virtual-time-budget=5000",
                    f"--screenshot={png_path}", "file://" + html_path],
                   check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    live = throwaway.start(scale=10)
    work = tempfile.mkdtemp()
    try:
        # At scale 10 the embedded 64MB max_wal_size forces a WAL checkpoint every ~2 s;
        # a larger one leaves timed and requested checkpoints whose dips stand apart.
        live.psql("ALTER SYSTEM SET max_wal_size = '1GB'")
        live.psql("SELECT pg_reload_conf()")
        thread = threading.Thread(target=disturb, args=(live,))
        thread.start()
        r = live.benchwatch("run", "--latency-log", "--", "pgbench", "-M", "prepared", "-n", "-r", "-P", "1",
                            "-c", "4", "-j", "2", "-T", "40")
        thread.join()
        if r.returncode != 0:
            sys.exit(r.stderr.decode(errors="replace"))
        run = rundir.find_run(os.path.join(live.state_dir, "runs"), None)
        processes.wait_until(lambda: os.path.exists(run.file(".ingested")), 30, 0.2)
        time.sleep(7)  # the page shows the run +-5 s: let Prometheus scrape past its end
        for name in DASHBOARDS:
            with open(os.path.join(ROOT, "dashboards", f"{name}.json"), encoding="utf-8") as f:
                dash = json.load(f)
            c = collect(run, live.prometheus, source="prometheus", dashboard=dash)
            html_path = os.path.join(work, f"{name}.html")
            with open(html_path, "w", encoding="utf-8") as f:
                f.write(snapshot_page(c, []).replace(f"pgbench run {c.run_id}</h1>", f"{dash['title']}: run {c.run_id}</h1>", 1))
            screenshot(html_path, os.path.join(OUT, f"{name}.png"), os.path.join(work, "profile"))
            print(os.path.join(OUT, f"{name}.png"))
    finally:
        live.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
