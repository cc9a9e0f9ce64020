"""Benchmark: the cost of profiling a run (``run --profile``, docs/profiles.md), side by side in one run.

Run from the repository root::

    .venv/bin/python bench/bench_profile_cost.py [--seconds 60] [--period 6] [--configs 49:8192,99:8192,49:16384]

Starts its own native stack (temporary state dir, free ports), then, per configuration
(frequency in Hz : DWARF stack bytes), one ``pgbench -n -c 4 -j 2 -P 1 -T SECONDS`` run during which
profiling is switched on and off every --period seconds (off first): ``perf record`` as
``benchwatch.profile.recorder`` starts it, and its process-kind sampler. So the TPS with and
without profiling come from the same run, the same tables and the same neighbours on the machine.

- CPU of profiling: perf record's own while it samples (utime + stime from /proc from 1 s after its
  start to its stop), plus the kind sampler's (this process's CPU during the on periods less during the
  off ones), per second of profiled run and as a share of the machine (cores); perf's start and stop
  apart (wait4's total less the sampling), a fixed cost per run.
- TPS ratio: each on period's mean TPS (pgbench's per-second progress lines placed by arrival, the
  first second after each switch left out) against the mean of the off periods either side; the mean
  ratio with its 95 % t interval over those pairs.
- Disk: perf.data bytes per minute of profiled run (removed once folded), and the kept form
  (slices.tsv.gz) per minute.
- Fold time: perf script folded once the run ended, wall and CPU seconds per minute of profiled run;
  with the share of the database's samples whose leaf function has no name.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench._live import NPROC, BenchStack, cpu_seconds, loadavg, run_main

from benchwatch.profile import fold as folding
from benchwatch.profile import recorder

PROGRESS = re.compile(rb"^progress: [\d.]+ s, ([\d.]+) tps")


def _read_progress(stream, out: list[tuple[float, float]]) -> None:
    for line in stream:
        m = PROGRESS.match(line)
        if m:
            out.append((time.time(), float(m.group(1))))


def measure(live: BenchStack, frequency: int, stack_bytes: int, seconds: int, period: float, work: str) -> dict:
    env = dict(os.environ, **live.pg_env())
    pg = subprocess.Popen([live.pgbench_path(), "-n", "-c", "4", "-j", "2", "-P", "1", "-T", str(seconds)],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tps: list[tuple[float, float]] = []
    reader = threading.Thread(target=_read_progress, args=(pg.stderr, tps), daemon=True)
    reader.start()
    periods: list[tuple[str, float, float]] = []   # (on|off, start, end)
    datas: list[tuple[str, float, float, float]] = []  # (perf.data, offset, start, end)
    perf_cpu = steady_cpu = steady_s = 0.0
    fixed_cpu: list[float] = []
    own_cpu = {"on": 0.0, "off": 0.0}
    on = False
    t0 = time.time()
    deadline = t0 + seconds - period  # the last period ends before pgbench does
    while time.time() < deadline and pg.poll() is None:
        start = time.time()
        cpu0 = sum(os.times()[:2])
        if on:
            data = os.path.join(work, f"perf-{frequency}-{stack_bytes}-{len(datas)}.data")
            sampler = recorder.KindSampler()
            offset = time.time() - time.monotonic()
            proc = subprocess.Popen(recorder.perf_argv("perf", data, frequency, stack_bytes), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            sampler.start()
            time.sleep(1.0)  # perf's start (the host's processes and their maps written out) is over
            steady0, at0 = cpu_seconds(proc.pid) or 0.0, time.monotonic()
            time.sleep(period - 1.0)
            steady1, at1 = cpu_seconds(proc.pid) or 0.0, time.monotonic()
            sampler.stop()
            proc.send_signal(signal.SIGINT)
            _pid, _status, usage = os.wait4(proc.pid, 0)
            perf_cpu += usage.ru_utime + usage.ru_stime
            steady_cpu += steady1 - steady0
            steady_s += at1 - at0
            fixed_cpu.append(usage.ru_utime + usage.ru_stime - (steady1 - steady0) / (at1 - at0) * period)
            datas.append((data, offset, start, time.time()))
        else:
            time.sleep(period)
        own_cpu["on" if on else "off"] += sum(os.times()[:2]) - cpu0
        periods.append(("on" if on else "off", start, time.time()))
        on = not on
    pg.wait()
    reader.join(10)
    # Folding, after the run as the recorder does it.
    fold_wall = fold_cpu = 0.0
    data_bytes = slices_bytes = 0
    db_samples = db_unknown_leaf = 0
    kinds = folding.Kinds(recorder.server_comms(), recorder.load_generator_comms(), {})
    for data, offset, start, _end in datas:
        data_bytes += os.path.getsize(data)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        w0 = time.monotonic()
        script = subprocess.Popen(recorder.script_argv("perf", data), stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, errors="replace")
        assert script.stdout is not None
        folded = folding.fold(script.stdout, kinds, start, lambda t, o=offset: t + o)
        script.wait()
        fold_wall += time.monotonic() - w0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        fold_cpu += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        path = data + ".slices.tsv.gz"
        folded.write(path)
        slices_bytes += os.path.getsize(path)
        for (_i, group, _kind), stacks in folded.slices.items():
            if group == "database":
                db_samples += sum(stacks.values())
                db_unknown_leaf += sum(n for s, n in stacks.items() if s.rsplit(";", 1)[-1] == folding.UNKNOWN)
        os.unlink(data)
    on_s = sum(e - s for k, s, e in periods if k == "on")
    off_s = sum(e - s for k, s, e in periods if k == "off")

    def mean_tps(start: float, end: float) -> float | None:
        values = [v for t, v in tps if start + 1.0 < t <= end]
        return statistics.mean(values) if values else None

    ratios = []
    for i, (kind, s, e) in enumerate(periods):
        if kind != "on" or i + 1 >= len(periods):
            continue
        on_tps = mean_tps(s, e)
        off = [mean_tps(periods[j][1], periods[j][2]) for j in (i - 1, i + 1)]
        off = [x for x in off if x]
        if on_tps and off:
            ratios.append(on_tps / statistics.mean(off))
    sampler_cpu = max(0.0, own_cpu["on"] / max(on_s, 1e-9) - own_cpu["off"] / max(off_s, 1e-9))
    steady = steady_cpu / steady_s if steady_s else 0.0
    fixed = statistics.mean(fixed_cpu) if fixed_cpu else 0.0
    per_s = steady + sampler_cpu
    out = {
        "frequency": frequency, "stack_bytes": stack_bytes, "on_s": round(on_s, 1), "off_s": round(off_s, 1),
        "perf_cpu_per_s_with_start_stop": round(perf_cpu / on_s, 4), "perf_cpu_per_s": round(steady, 4),
        "perf_start_stop_cpu_s": round(fixed, 3), "sampler_cpu_per_s": round(sampler_cpu, 4),
        "machine_share_pct": round(100 * per_s / NPROC, 2),
        "machine_share_pct_60s_run": round(100 * (per_s + fixed / 60) / NPROC, 2),
        "perf_data_mb_per_min": round(data_bytes / on_s * 60 / 1e6, 1),
        "slices_kb_per_min": round(slices_bytes / on_s * 60 / 1e3, 1),
        "fold_s_per_min": round(fold_wall / on_s * 60, 2), "fold_cpu_s_per_min": round(fold_cpu / on_s * 60, 2),
        "database_samples": db_samples,
        "unknown_leaf_pct": round(100 * db_unknown_leaf / db_samples, 1) if db_samples else None,
        "pairs": len(ratios),
    }
    if len(ratios) >= 2:
        from scipy import stats

        m = statistics.mean(ratios)
        half = stats.t.ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
        out["tps_ratio"] = [round(m, 3), round(float(m - half), 3), round(float(m + half), 3)]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--period", type=float, default=6.0)
    p.add_argument("--configs", default=f"{recorder.FREQUENCY}:{recorder.STACK_BYTES}")
    args = p.parse_args()
    configs = [tuple(int(x) for x in c.split(":")) for c in args.configs.split(",")]
    print(f"# {loadavg()}, {NPROC} CPUs", flush=True)
    with BenchStack(scale=10) as live, tempfile.TemporaryDirectory(prefix="bench-profile-") as work:
        for frequency, stack_bytes in configs:
            r = measure(live, frequency, stack_bytes, args.seconds, args.period, work)
            ratio = r.get("tps_ratio")
            print(f"{frequency} Hz, dwarf {stack_bytes}: profiling CPU {r['perf_cpu_per_s']:.4f} s/s (perf) + "
                  f"{r['sampler_cpu_per_s']:.4f} s/s (kinds) = {r['machine_share_pct']:.2f} % of the machine, "
                  f"+ {r['perf_start_stop_cpu_s']:.2f} s at perf's start and stop "
                  f"({r['machine_share_pct_60s_run']:.2f} % over a 60 s run); "
                  f"TPS on/off {ratio[0]:.3f} [{ratio[1]:.3f}, {ratio[2]:.3f}] over {r['pairs']} pairs; "
                  if ratio else f"{frequency} Hz: too few periods for a TPS ratio; ", end="")
            print(f"perf.data {r['perf_data_mb_per_min']} MB/min, kept {r['slices_kb_per_min']} kB/min; "
                  f"fold {r['fold_s_per_min']} s per minute of run ({r['fold_cpu_s_per_min']} CPU s); "
                  f"database samples {r['database_samples']}, unnamed leaf {r['unknown_leaf_pct']} %", flush=True)
            print(f"# {r}", flush=True)
        print(f"# {loadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
