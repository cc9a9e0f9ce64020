#!/usr/bin/env python3
"""Detection latency of a TPS drop: from the moment a lock stops pgbench to the webhook.

    .venv/bin/python bench/bench_alert_latency.py [--drops 5] [--hold 8] [--rate 200]

Starts a native stack of its own (temporary state dir, free ports) whose
Alertmanager posts to a webhook receiver in this process, runs one
``benchwatch run -- pgbench -R RATE`` and, once the run has a baseline, holds
``LOCK TABLE pgbench_accounts`` for HOLD seconds, DROPS times, at a random
point of pgbench's progress interval, waiting for the resolution between drops. For each drop it prints:

  lock->fired    lock acquired (psql returned) until Prometheus fired the alert
                 (startsAt of the notified alert);
  fired->hook    Alertmanager's share: group_wait and the POST;
  lock->hook     the figure the target is about (<= 5 s): lock acquired until
                 the webhook received PgbenchTPSDrop or PgbenchStalled for the run;
  unlock->resolved  lock released until the resolved notification arrived;

then the median of lock->hook. The rate limit (-R) keeps TPS steady on a shared
machine so that the only drops are the locks; without it a noisy neighbour's
dip can fire the alert before the lock does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _live import BENCHWATCH, BenchStack, loadavg, pg_bindir
from tests.helpers.webhook import WebhookReceiver

DROP_ALERTS = ("PgbenchTPSDrop", "PgbenchStalled")
BASELINE_LINES = 15  # the baseline needs 10 lines (thresholds.yml); a few more for a steady median


def parse_ts(text: str) -> float:
    # Alertmanager: RFC 3339 with up to nanoseconds; Python takes microseconds.
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", text)
    base = datetime.datetime.fromisoformat(m.group(1) + (m.group(3).replace("Z", "+00:00")))
    return base.timestamp() + (float("0" + m.group(2)) if m.group(2) else 0.0)


class Lock:
    """A psql session holding ACCESS EXCLUSIVE on pgbench_accounts until release()."""

    def __init__(self, env: dict[str, str]):
        self.proc = subprocess.Popen([os.path.join(pg_bindir(), "psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, text=True, bufsize=1)

    def acquire(self) -> float:
        self.proc.stdin.write("BEGIN; LOCK TABLE pgbench_accounts IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()  # psql prints once the lock is granted
        if line.strip() != "locked":
            raise RuntimeError(f"lock failed: {line!r} {self.proc.stderr.read()}")
        return time.time()

    def release(self) -> float:
        self.proc.stdin.write("COMMIT;\n")
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return time.time()


def start_run(live: BenchStack, rate: int, duration: int) -> tuple[subprocess.Popen, str, list[bytes]]:
    proc = subprocess.Popen([BENCHWATCH, "run", "--", "pgbench", "-n", "-c", "2", "-j", "1", "-P", "1",
                             "-R", str(rate), "-T", str(duration)],
                            env=live.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines: list[bytes] = []
    found = threading.Event()
    run_id: list[str] = []

    def read():
        for line in proc.stderr:
            lines.append(line)
            m = re.match(rb"benchwatch: run (\S+):", line)
            if m and not run_id:
                run_id.append(m.group(1).decode())
                found.set()

    threading.Thread(target=read, daemon=True).start()
    if not found.wait(30):
        proc.kill()
        raise RuntimeError("benchwatch run printed no run id: " + b"".join(lines).decode(errors="replace"))
    return proc, run_id[0], lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--drops", type=int, default=5)
    ap.add_argument("--hold", type=float, default=8.0, help="seconds each lock is held (default 8)")
    ap.add_argument("--rate", type=int, default=200, help="pgbench -R (default 200 tps)")
    ap.add_argument("--gap", type=float, default=8.0, help="seconds of normal TPS after a resolution (default 8)")
    args = ap.parse_args()

    print(f"before: {loadavg()}")
    rows = []
    with WebhookReceiver() as hook:
        os.environ["BENCHWATCH_ALERT_WEBHOOK_URL"] = hook.url  # read by the stack when it starts Alertmanager
        with BenchStack(scale=2) as live:
            env = live.pg_env()
            duration = int(BASELINE_LINES + 5 + args.drops * (args.hold + 30 + args.gap))
            proc, run_id, _ = start_run(live, args.rate, duration)
            print(f"run {run_id}: pgbench -c 2 -j 1 -P 1 -R {args.rate} -T {duration} (stops early when done)")
            run_dir = os.path.join(live.state_dir, "runs", run_id)
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if os.path.exists(os.path.join(run_dir, "stderr.log")):
                        with open(os.path.join(run_dir, "stderr.log"), "rb") as f:
                            if sum(1 for l in f if l.startswith(b"progress:")) >= BASELINE_LINES:
                                break
                    time.sleep(0.2)
                for i in range(args.drops):
                    # Where in pgbench's 1 s progress interval the lock falls decides whether the
                    # next line already shows it: spread the locks over the interval.
                    time.sleep(random.uniform(0.0, 1.0))
                    mark = len(hook.snapshot())
                    lock = Lock(env)
                    locked = lock.acquire()
                    fired = hook.wait_for(lambda n: any(n.matching(a, status="firing", run_id=run_id) for a in DROP_ALERTS),
                                          timeout=args.hold + 20, since=mark)
                    # Hold the lock for the rest of --hold: the drop must outlast detection.
                    time.sleep(max(0.0, locked + args.hold - time.time()))
                    unlocked = lock.release()
                    if fired is None:
                        rows.append((i + 1, None, None, None, None))
                        print(f"drop {i + 1}: NO ALERT within {args.hold + 20:.0f} s")
                        continue
                    alert = next(a for name in DROP_ALERTS for a in fired.matching(name, status="firing", run_id=run_id))
                    fired_at = parse_ts(alert["startsAt"])
                    resolved = hook.wait_for(lambda n: bool(n.matching(alert["labels"]["alertname"], status="resolved", run_id=run_id)),
                                             timeout=60, since=mark)
                    res = resolved.received_at - unlocked if resolved else None
                    row = (i + 1, fired_at - locked, fired.received_at - fired_at, fired.received_at - locked, res)
                    rows.append(row)
                    print(f"drop {i + 1}: {alert['labels']['alertname']}  lock->fired {row[1]:.2f} s  fired->hook {row[2]:.2f} s  "
                          f"lock->hook {row[3]:.2f} s  unlock->resolved " + (f"{res:.2f} s" if res is not None else "none in 60 s"))
                    time.sleep(args.gap)
            finally:
                if proc.poll() is None:
                    proc.terminate()  # the wrapper passes SIGTERM on to pgbench and records the end
                proc.wait(timeout=60)
    latencies = [r[3] for r in rows if r[3] is not None]
    print(f"after: {loadavg()}")
    if latencies:
        print(f"detection latency lock->webhook: median {statistics.median(latencies):.2f} s, "
              f"min {min(latencies):.2f} s, max {max(latencies):.2f} s over {len(latencies)} of {len(rows)} drops (target <= 5 s)")
        resolutions = [r[4] for r in rows if r[4] is not None]
        if resolutions:
            print(f"resolution latency unlock->webhook: median {statistics.median(resolutions):.2f} s")
    print(json.dumps({"drops": rows}))
    return 0 if latencies and len(latencies) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
