"""What a run costs the long-term store (docs/long-term.md#sizing): a stack of its own remote-writing to a
VictoriaMetrics of its own, one pgbench run of --seconds, then

- the run's own series (run_id) and every series the stack stored during the run,
- the samples per second the stack's Prometheus appended during the run,
- what the run's completion found (long-term.json: forwarded by Prometheus, written directly),
- VictoriaMetrics' bytes per sample: after a flush, and after a forced merge of its parts.

    .venv/bin/python bench/bench_long_term.py [--seconds 120] [--clients 4]

Everything on 127.0.0.1, free ports, a temp dir, stopped by PID at the end (Ctrl-C too).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchwatch.stack.config import load_config
from benchwatch.stack.native import Stack
from benchwatch.util import net, processes
from tests.helpers import throwaway


def get(url: str, timeout: float = 60) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def query(base: str, promql: str, at: float) -> list:
    return json.loads(get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})))["data"]["result"]


def metric(text: str, name: str, label: str = "") -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if re.match(rf"{name}(\{{|\s)", line) and label in line)


def vm_size(vm: str) -> tuple[float, float]:
    text = get(vm + "/metrics").decode()
    return metric(text, "vm_rows", 'type="storage/'), metric(text, "vm_data_size_bytes", 'type="storage/')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    binary = shutil.which("victoria-metrics")
    if not binary:
        print("victoria-metrics is not installed: apt-get install victoria-metrics", file=sys.stderr)
        return 1
    directory = tempfile.mkdtemp(prefix="benchwatch-bench-lt-", dir="/tmp")
    port = net.free_port()
    vm = f"http://127.0.0.1:{port}"
    log = open(os.path.join(directory, "vm.log"), "ab")
    proc = subprocess.Popen([binary, f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={directory}/data",
                             "-retentionPeriod=100y"], stdout=log, stderr=subprocess.STDOUT)
    live = None
    try:
        if not processes.wait_until(lambda: net.http_ok(vm + "/health", timeout=2.0), 60, 0.1):
            raise RuntimeError("victoria-metrics did not start")
        state_dir = throwaway.make_state_dir()
        cfg = load_config(state_dir, throwaway.free_ports(), engine="postgres",
                          long_term={"long_term_write_url": vm + "/api/v1/write", "long_term_query_url": vm})
        live = throwaway.ThrowawayStack(Stack(cfg), state_dir)
        live.bring_up(scale=10)
        before = get(live.prometheus + "/metrics").decode()
        began = time.time()
        r = live.benchwatch("run", "--", "pgbench", "-n", "-P", "1", "-c", str(args.clients), "-j", "2",
                            "-T", str(args.seconds), timeout=args.seconds + 300)
        ended = time.time()
        after = get(live.prometheus + "/metrics").decode()
        if r.returncode != 0:
            raise RuntimeError(r.stderr.decode())
        run_id = re.search(rb"benchwatch: run (\S+):", r.stderr).group(1).decode()
        result = os.path.join(state_dir, "runs", run_id, "long-term.json")
        if not processes.wait_until(lambda: os.path.exists(result), 300, 0.5):
            raise RuntimeError("the run was not completed in the store")
        with open(result) as f:
            done = json.load(f)
        appended = metric(after, "prometheus_tsdb_head_samples_appended_total") - metric(before, "prometheus_tsdb_head_samples_appended_total")
        seconds = ended - began
        own = query(vm, f'{{run_id="{run_id}"}}[{args.seconds + 600}s]', ended + 5)
        stored = json.loads(get(f"{live.prometheus}/api/v1/series?" + urllib.parse.urlencode(
            {"match[]": '{__name__=~".+"}', "start": f"{began:.3f}", "end": f"{ended:.3f}"})))["data"]
        print(f"run of {args.seconds} s ({seconds:.0f} s with its start and end), {args.clients} clients")
        print(f"its own series (run_id): {len(own)}, {sum(len(s['values']) for s in own)} samples")
        print(f"series the stack stored during it: {len(stored)}")
        print(f"samples appended by the stack's Prometheus: {appended:.0f}, {appended / seconds:.0f} per second")
        print(f"completion: {json.dumps({k: v for k, v in done.items() if k != 'checked_at'})}")
        get(vm + "/internal/force_flush")
        time.sleep(2)
        rows, size = vm_size(vm)
        print(f"VictoriaMetrics after a flush: {rows:.0f} samples, {size:.0f} bytes, {size / rows:.2f} bytes per sample")
        get(vm + "/internal/force_merge", timeout=300)
        processes.wait_until(lambda: False, 20, 1.0)  # the merge runs in the background
        rows, size = vm_size(vm)
        print(f"VictoriaMetrics after a forced merge: {rows:.0f} samples, {size:.0f} bytes, {size / rows:.2f} bytes per sample")
        return 0
    finally:
        if live is not None:
            live.close()
        proc.terminate()
        proc.wait(30)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
