"""The recording rules on the live stack: node rules against `iostat -x 1` on
the same disk at the same time, PostgreSQL rules against SQL and pgbench.

A real pgbench run plus two dd loops with direct I/O (a 1 MiB writer and a
64 KiB reader) keep the disk busy while iostat reports ten one-second
intervals in JSON. iostat is started just after one of Prometheus's scrapes
of node_exporter, so its one-second windows and the scrape-to-scrape windows
the rules use (irate over the last two scrapes) cover the same second, a few
milliseconds apart. For every report each rule, as Prometheus loaded it from
prometheus/rules/node.yml, is evaluated half a second after the scrape that
ends the matching window and compared with iostat's column.

Agreement: |rule - iostat| <= max(10 % of iostat, floor). The floors cover
what is not the rule's doing: iostat's two decimals, the kernel's counters in
whole milliseconds (disk) and hundredths of a second (CPU), the few
milliseconds between iostat's and node_exporter's reads of the counters, and
/proc/uptime's centiseconds that iostat divides by:
  r/s, w/s, rrqm/s, wrqm/s   2 per second
  rkB/s, wkB/s               256 kB/s (a quarter of one 1 MiB write)
  r_await, w_await, await    0.05 ms
  rareq-sz, wareq-sz, areq-sz 2 kB
  aqu-sz                     0.05
  %util                      2 points
  avg-cpu columns            2 points (4 jiffies of 200 on two CPUs)
Per-I/O means (await, request size) are compared only in seconds with at
least 20 I/Os of that kind: with fewer, one I/O more or less on either side
of the window moves the mean more than the rule could be wrong by.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from benchwatch.stack.native import pg_bindir
from benchwatch.util import processes
from tests.helpers.prometheus import query, query_range
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

REPORTS = 10
RELATIVE = 0.10
MIN_IOS_FOR_MEANS = 20

# iostat JSON column -> (recording rule, factor from the rule's unit to iostat's, floor in iostat's unit)
DISK_COLUMNS = {
    "r/s": ("instance_device:node_disk_reads_completed:rate1s", 1.0, 2.0),
    "w/s": ("instance_device:node_disk_writes_completed:rate1s", 1.0, 2.0),
    "rrqm/s": ("instance_device:node_disk_reads_merged:rate1s", 1.0, 2.0),
    "wrqm/s": ("instance_device:node_disk_writes_merged:rate1s", 1.0, 2.0),
    "rkB/s": ("instance_device:node_disk_read_bytes:rate1s", 1 / 1024, 256.0),
    "wkB/s": ("instance_device:node_disk_written_bytes:rate1s", 1 / 1024, 256.0),
    "r_await": ("instance_device:node_disk_read_await_seconds:mean1s", 1000.0, 0.05),
    "w_await": ("instance_device:node_disk_write_await_seconds:mean1s", 1000.0, 0.05),
    "rareq-sz": ("instance_device:node_disk_read_request_size_bytes:mean1s", 1 / 1024, 2.0),
    "wareq-sz": ("instance_device:node_disk_write_request_size_bytes:mean1s", 1 / 1024, 2.0),
    "aqu-sz": ("instance_device:node_disk_io_time_weighted_seconds:rate1s", 1.0, 0.05),
    "util": ("instance_device:node_disk_io_time_seconds:rate1s", 100.0, 2.0),
}
# iostat -x without -s prints no combined await / areq-sz: derived from its own
# per-kind columns (computed from the same counters), see combined_figures().
COMBINED_COLUMNS = {
    "await": ("instance_device:node_disk_await_seconds:mean1s", 1000.0, 0.05),
    "areq-sz": ("instance_device:node_disk_request_size_bytes:mean1s", 1 / 1024, 2.0),
}
# Which I/O count a per-I/O mean is taken over.
MEAN_COUNT = {"r_await": ("r/s",), "rareq-sz": ("r/s",), "w_await": ("w/s",), "wareq-sz": ("w/s",),
              "await": ("r/s", "w/s", "d/s"), "areq-sz": ("r/s", "w/s", "d/s")}
CPU_COLUMNS = {
    "user": "instance:node_cpu_user:ratio1s",
    "nice": "instance:node_cpu_nice:ratio1s",
    "system": "instance:node_cpu_system:ratio1s",
    "iowait": "instance:node_cpu_iowait:ratio1s",
    "steal": "instance:node_cpu_steal:ratio1s",
    "idle": "instance:node_cpu_idle:ratio1s",
}
CPU_FLOOR = 2.0  # percentage points

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def block_device_of(path: str) -> str | None:
    """The whole-disk kernel name (vda, sda, nvme0n1, dm-0) holding ``path``, as iostat and node_exporter name it."""
    st = os.stat(path)
    sys_path = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(sys_path):
        return None  # overlay, tmpfs, ...: no block device of its own
    real = os.path.realpath(sys_path)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    return os.path.basename(real)


def loaded_rules(prometheus: str, file_suffix: str) -> dict[str, str]:
    """record name -> PromQL, as the running Prometheus loaded them from a rule file."""
    with _OPENER.open(f"{prometheus}/api/v1/rules?type=record", timeout=10) as r:
        groups = json.load(r)["data"]["groups"]
    rules = {}
    for group in groups:
        if group["file"].endswith(file_suffix):
            for rule in group["rules"]:
                assert rule["health"] == "ok", rule
                rules[rule["name"]] = rule["query"]
    return rules


def scrape_times(prometheus: str, device: str, start: float, end: float) -> list[float]:
    """Timestamps of Prometheus's scrapes of node_exporter between start and end."""
    window = max(2, int(end - start) + 2)
    result = query(prometheus, f'node_disk_io_time_seconds_total{{job="node",device="{device}"}}[{window}s]', end)
    assert len(result) <= 1, result
    return [float(t) for t, _ in (result[0]["values"] if result else []) if start <= float(t) <= end]


def spawn_loop(command: str) -> subprocess.Popen:
    # Own process group: the shell and its current dd are ended together, by this group's id.
    return subprocess.Popen(["sh", "-c", f"while :; do {command}; done"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def combined_figures(disk: dict) -> dict[str, float]:
    """iostat -x -s's await and areq-sz, from the per-kind columns iostat -x prints."""
    ios = disk["r/s"] + disk["w/s"] + disk["d/s"]
    if ios == 0:
        return {"await": 0.0, "areq-sz": 0.0}
    ticks = disk["r_await"] * disk["r/s"] + disk["w_await"] * disk["w/s"] + disk["d_await"] * disk["d/s"]
    return {"await": ticks / ios, "areq-sz": (disk["rkB/s"] + disk["wkB/s"] + disk["dkB/s"]) / ios}


def agree(rule: float, iostat: float, floor: float) -> bool:
    return abs(rule - iostat) <= max(RELATIVE * abs(iostat), floor)


@pytest.fixture
def busy_disk(live_stack, tmp_path):
    """pgbench and two direct-I/O dd loops on the disk under tmp_path, for the duration of the test;
    yields that disk's kernel name."""
    if shutil.which("dd") is None:
        pytest.fail("dd not found")
    device = block_device_of(str(tmp_path))
    if device is None:
        pytest.skip(f"{tmp_path} is on no block device (overlay or tmpfs): nothing for iostat to report")
    read_file = tmp_path / "read.bin"
    prep = subprocess.run(["dd", "if=/dev/zero", f"of={read_file}", "bs=1M", "count=64", "oflag=direct", "status=none"],
                          capture_output=True, timeout=120)
    assert prep.returncode == 0, prep.stderr
    pgbench = subprocess.Popen([os.path.join(pg_bindir(), "pgbench"), "-n", "-c", "2", "-j", "1", "-T", str(REPORTS + 12)],
                               env=live_stack.pg_env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer = spawn_loop(f"dd if=/dev/zero of={tmp_path / 'write.bin'} bs=1M count=32 oflag=direct conv=notrunc status=none")
    reader = spawn_loop(f"dd if={read_file} of=/dev/null bs=64k iflag=direct status=none")
    try:
        yield device
    finally:
        stop_group(writer)
        stop_group(reader)
        if pgbench.poll() is None:
            pgbench.send_signal(signal.SIGINT)
        _out, err = pgbench.communicate(timeout=60)
        for name in ("read.bin", "write.bin"):
            (tmp_path / name).unlink(missing_ok=True)
        assert pgbench.returncode in (0, -signal.SIGINT), err


def test_rules_match_iostat(live_stack, busy_disk):
    require_tool("iostat")
    device = busy_disk
    prom = live_stack.prometheus
    rules = loaded_rules(prom, "rules/node.yml")
    for name, _, _ in list(DISK_COLUMNS.values()) + list(COMBINED_COLUMNS.values()):
        assert name in rules, f"{name} not loaded from prometheus/rules/node.yml"
    assert set(CPU_COLUMNS.values()) <= set(rules)

    # Scrape phase: start iostat a few milliseconds after a scrape of node_exporter.
    assert processes.wait_until(lambda: len(scrape_times(prom, device, time.time() - 5, time.time())) >= 3, 30, 0.2)
    last_scrape = max(scrape_times(prom, device, time.time() - 5, time.time()))
    launch_at = last_scrape + 0.005
    while launch_at < time.time() + 0.2:
        launch_at += 1.0  # scrapes come every second on the second's same fraction
    time.sleep(launch_at - time.time())  # waiting for a point in time, not for readiness
    launched = time.time()
    iostat = subprocess.run(["iostat", "-x", "-y", "-o", "JSON", "1", str(REPORTS), device],
                            env=dict(os.environ, LC_ALL="C", S_TIME_FORMAT="ISO"),
                            capture_output=True, text=True, timeout=REPORTS + 30)
    assert iostat.returncode == 0, iostat.stderr
    reports = json.loads(iostat.stdout)["sysstat"]["hosts"][0]["statistics"]
    assert len(reports) == REPORTS

    # Report j covers [launched + j - 1, launched + j] (iostat rearms a 1 s alarm each time).
    ends = [launched + j for j in range(1, REPORTS + 1)]
    assert processes.wait_until(lambda: bool(scrape_times(prom, device, ends[-1] + 0.2, ends[-1] + 5)), 30, 0.2)
    scrapes = scrape_times(prom, device, launched - 3, ends[-1] + 2)
    matched = []
    for end in ends:
        nearest = min(scrapes, key=lambda s: abs(s - end))
        assert abs(nearest - end) < 0.1, f"iostat read at {end:.3f} but the nearest scrape is {nearest:.3f}"
        assert any(0.9 < nearest - s < 1.1 for s in scrapes), f"no scrape one second before {nearest:.3f}"
        matched.append(nearest)
    offsets = [round((end - s) * 1000) for end, s in zip(ends, matched)]
    assert all(abs(b - a - 1.0) < 0.05 for a, b in zip(matched, matched[1:])), matched

    def evaluated(name: str, labels: dict[str, str]) -> list[float]:
        # The rule's own expression, half a second after each matched scrape.
        result = query_range(prom, rules[name], matched[0] + 0.5, matched[-1] + 0.5, 1)
        series = [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]
        assert len(series) == 1, (name, result)
        values = [float(v) for _, v in series[0]["values"]]
        assert len(values) == REPORTS, (name, series[0]["values"])
        return values

    node = {"job": "node", "device": device}
    failures, compared, table = [], 0, []
    disks = []
    for report in reports:
        [disk] = [d for d in report["disk"] if d["disk_device"] == device]
        disks.append(disk)
    for column, (name, factor, floor) in {**DISK_COLUMNS, **COMBINED_COLUMNS}.items():
        values = evaluated(name, node)
        for j, (disk, value) in enumerate(zip(disks, values)):
            expected = combined_figures(disk)[column] if column in COMBINED_COLUMNS else disk[column]
            if column in MEAN_COUNT and sum(disk[c] for c in MEAN_COUNT[column]) < MIN_IOS_FOR_MEANS:
                continue
            compared += 1
            table.append((j + 1, column, expected, value * factor))
            if not agree(value * factor, expected, floor):
                failures.append(f"second {j + 1} {column}: iostat {expected:.2f}, {name} {value * factor:.4f}")
    for column, name in CPU_COLUMNS.items():
        values = evaluated(name, {"job": "node"})
        for j, (report, value) in enumerate(zip(reports, values)):
            compared += 1
            expected = report["avg-cpu"][column]
            table.append((j + 1, "%" + column, expected, value * 100))
            if not agree(value * 100, expected, CPU_FLOOR):
                failures.append(f"second {j + 1} %{column}: iostat {expected:.2f}, {name} {value * 100:.2f}")

    # Shown by pytest on failure (or with -rP): every pair compared.
    print(f"iostat read {offsets} ms after the scrapes")
    for row in table:
        print("second {:2d} {:<9} iostat {:10.2f} rule {:12.4f}".format(*row))

    # The load must have reached the disk, or the comparison proves little.
    mean = lambda column: sum(d[column] for d in disks) / len(disks)  # noqa: E731
    assert mean("r/s") > 50 and mean("w/s") > 50, (mean("r/s"), mean("w/s"))
    assert mean("util") > 10, mean("util")
    means_compared = sum(1 for d in disks if d["r/s"] >= MIN_IOS_FOR_MEANS and d["w/s"] >= MIN_IOS_FOR_MEANS)
    assert means_compared >= REPORTS // 2, "too few seconds with enough I/O to compare await and request sizes"
    assert not failures, f"{len(failures)} of {compared} figures disagree (iostat read {offsets} ms after the scrapes):\n" + "\n".join(failures)

    # The recorded series are live too: one per second for the device over the window.
    for name, _, _ in DISK_COLUMNS.values():
        result = query(prom, f'count_over_time({name}{{device="{device}"}}[{REPORTS}s])', matched[-1] + 0.5)
        assert result and float(result[0]["value"][1]) >= REPORTS - 2, (name, result)


# -- PostgreSQL rules, live -----------------------------------------------------

def _value(prom: str, promql: str) -> float | None:
    result = query(prom, promql)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def test_postgres_rules_live(live_stack):
    """The custom queries run cleanly on this server, and the unified checkpoint,
    pg_control and server-side TPS rules read what PostgreSQL and pgbench say."""
    prom, live = live_stack.prometheus, live_stack
    server = 'job="postgres"'
    assert processes.wait_until(lambda: _value(prom, f"pg_control_checkpoint_max_wal_size_bytes{{{server}}}") is not None, 30, 0.2)
    # A failing custom query would set this on every scrape (postgres_exporter 0.11.1).
    assert _value(prom, "pg_exporter_last_scrape_error") == 0
    assert _value(prom, f"pg_control_checkpoint_max_wal_size_bytes{{{server}}}") == \
        float(live.psql("SELECT pg_size_bytes(current_setting('max_wal_size'))"))

    # A CHECKPOINT is a requested checkpoint on every version; the unified series follow it.
    v17 = int(live.psql("SHOW server_version_num")) >= 170000
    stats = ("SELECT num_requested, write_time, sync_time, buffers_written FROM pg_stat_checkpointer" if v17 else
             "SELECT checkpoints_req, checkpoint_write_time, checkpoint_sync_time, buffers_checkpoint FROM pg_stat_bgwriter")
    before = int(live.psql(stats).split("|")[0])
    live.psql("CHECKPOINT")
    rows = {}

    def unified_matches() -> bool:
        req, write_ms, sync_ms, buffers = (float(x) for x in live.psql(stats).split("|"))
        rows["sql"] = (req, write_ms / 1000, sync_ms / 1000, buffers)
        rows["rules"] = tuple(_value(prom, f"instance:{n}:total{{{server}}}") for n in (
            "pg_checkpoints_requested", "pg_checkpoint_write_seconds", "pg_checkpoint_sync_seconds",
            "pg_checkpoint_buffers_written"))
        return rows["sql"] == rows["rules"]
    assert processes.wait_until(unified_matches, 30, 0.2), rows
    assert rows["sql"][0] >= before + 1

    control = "SELECT pg_wal_lsn_diff(redo_lsn, '0/0'), extract(epoch FROM checkpoint_time) FROM pg_control_checkpoint()"
    redo, at = (float(x) for x in live.psql(control).split("|"))
    assert processes.wait_until(lambda: _value(prom, f"pg_control_checkpoint_redo_lsn_bytes{{{server}}}") == redo, 30, 0.2)
    assert _value(prom, f"pg_control_checkpoint_timestamp_seconds{{{server}}}") == at

    # Server-side TPS against pgbench. The server's counters trail pgbench's
    # -P lines by up to a second (backends flush them at most once a second)
    # and move in lumps, so compare counts: the rule, evaluated once per scrape
    # pair of the postgres job, times each pair's interval, summed over the run,
    # is every transaction the server ended, pgbench's plus the exporters' own.
    db = live.stack.cfg.pg_database
    labels = {"job": "postgres", "datname": db}
    pg_rules = loaded_rules(prom, "rules/postgres.yml")
    counter = f'pg_stat_database_xact_commit{{job="postgres",datname="{db}"}}'

    def postgres_scrapes(start: float, end: float) -> list[float]:
        result = query(prom, f"{counter}[{int(end - start) + 3}s]", end)
        return [float(t) for t, _ in (result[0]["values"] if result else []) if start <= float(t) <= end]

    # The exporters' own transactions, measured before the run (after the load of
    # any earlier test has drained).
    tps_rule = f'instance_datname:pg_xact:rate1s{{job="postgres",datname="{db}"}}'
    assert processes.wait_until(lambda: (_value(prom, f"max_over_time({tps_rule}[3s])") or 1e9) < 100, 60, 0.2)
    background = _value(prom, f"avg_over_time({tps_rule}[3s])")
    lsn = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
    lsn_before = float(live.psql(lsn))
    launched = time.time()
    run = live.pgbench("-n", "-c", "2", "-j", "1", "-T", "6", timeout=120)
    assert run.returncode == 0, run.stderr
    ended = time.time()
    processed = int(re.search(rb"number of transactions actually processed: (\d+)", run.stdout).group(1))
    assert processes.wait_until(lambda: bool(postgres_scrapes(ended + 2, ended + 5)), 30, 0.2)
    wal_written = float(live.psql(lsn)) - lsn_before
    scrapes = postgres_scrapes(launched - 1.5, ended + 2)
    assert all(0.5 < b - a < 1.5 for a, b in zip(scrapes, scrapes[1:])), scrapes

    def per_pair(record: str, match: dict[str, str]) -> list[float | None]:
        values = []
        for pair_end in scrapes[1:]:  # each pair once: half a second after its second scrape
            found = [r for r in query(prom, pg_rules[record], pair_end + 0.5)
                     if all(r["metric"].get(k) == v for k, v in match.items())]
            assert len(found) <= 1, found
            values.append(float(found[0]["value"][1]) if found else None)
        return values

    def integral(rates: list[float]) -> float:
        return sum(rate * (b - a) for rate, a, b in zip(rates, scrapes, scrapes[1:]))

    rates = per_pair("instance_datname:pg_xact:rate1s", labels)
    counted = integral(rates)
    expected = processed + background * (scrapes[-1] - scrapes[0])
    wal = integral(per_pair("instance:pg_wal_bytes:rate1s", {"job": "postgres"}))
    print(f"server-side {counted:.0f} transactions, pgbench {processed} + background {background:.1f}/s "
          f"over {scrapes[-1] - scrapes[0]:.1f} s; peak {max(rates):.0f}/s; WAL {wal:.0f} B by the rule, "
          f"{wal_written:.0f} B by the insert LSN")
    assert abs(counted - expected) <= 0.05 * processed, (counted, processed, background, rates)
    assert max(rates) > 10 * background
    # WAL: the same integral against how far the WAL insert position moved
    # (which also counts page headers: a fraction of a percent).
    assert abs(wal - wal_written) <= RELATIVE * wal_written, (wal, wal_written)
    fpi = [v for v in per_pair("instance:pg_wal_fpi_per_record:ratio1s", {"job": "postgres"}) if v is not None]
    # a WAL record carries a few block images at most
    assert fpi and all(0 <= v <= 4 for v in fpi), fpi
