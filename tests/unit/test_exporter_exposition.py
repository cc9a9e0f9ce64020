"""The whole exporter's /metrics: golden file, promtool-clean, sample values, self-metrics, collector flags."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from benchwatch.exporter import enabled_collectors, load_collectors, server
from benchwatch.exporter.pgbench_runs import PgbenchRunsCollector
from benchwatch.exporter.self_metrics import SELF_METRICS
from benchwatch.exporter.server import Exporter
from benchwatch.record import rundir
from benchwatch.util import processes
from tests.helpers.promtool import promtool_problems

HERE = os.path.dirname(os.path.dirname(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "pgbench")
SERVER_LOG = os.path.join(HERE, "fixtures", "pglog", "pg15_a.log")
GOLDEN = os.path.join(HERE, "golden", "exporter.prom")
START = 1_700_000_000.0
RUN_ID = "20231114T221320Z-0001"
POLL_SECONDS = 0.25  # what the test timer says every poll took
# Families whose values (and python_info's labels) depend on the machine and the moment:
# left out of the golden file, checked by test_process_metrics instead; so are the CPU times per
# collector (test_cpu_per_collector).
VARYING = re.compile(r"(process|python)_\w+|benchwatch_exporter_(collector|remote_write)_cpu_seconds_total")


def make_run(runs_dir: str, run_id: str, fixture: str, argv: list[str], start: float = START) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir, run_id)
    for ext in ("stdout", "stderr"):
        shutil.copy(os.path.join(FIXTURES, f"{fixture}.{ext}"), run.file(f"{ext}.log"))
    run.write_meta({"run_id": run_id, "mode": "run", "state": rundir.FINISHED, "pid": None, "argv": argv,
                    "progress_interval": 1.0, "clock_start_epoch": start, "ended_at": start + 6,
                    "exit_code": 0, "pgbench_version": "15.18", "server_version": "15.18", "scale": "2"})
    return run


@pytest.fixture
def refused_url():
    """A remote-write URL nobody answers: the port is held by a socket that does not listen."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}/api/v1/write"


def steady_timer():
    """perf_counter stand-in: every poll takes POLL_SECONDS, so durations are the same on every machine."""
    ticks = itertools.count()
    return lambda: next(ticks) * POLL_SECONDS


def make_exporter(tmp_path, url: str, server_log: str | None = SERVER_LOG, archive_runs: bool = False, **kw) -> Exporter:
    runs = tmp_path / "runs"
    runs.mkdir(parents=True)
    make_run(str(runs), RUN_ID, "pg15_report", ["pgbench", "-n", "-r", "-c", "1", "-j", "1", "-T", "5", "-P", "1"])
    if server_log and os.path.isfile(server_log):
        server_log = str(shutil.copy(server_log, tmp_path / "postgresql.log"))
    return Exporter(runs_dir=str(runs), remote_write_url=url, server_log=server_log, clock=lambda: START + 10,
                    registry=CollectorRegistry(), archive_runs=archive_runs, timer=steady_timer(), **kw)


@pytest.fixture
def exporter(tmp_path, refused_url):
    # The statements collector connects to a port nobody answers: it says so once and retries, and its poll succeeds.
    # It finds the server in the daemon's environment, as the stack gives it (libpq's variables).
    refused_pg = {"PGHOST": "127.0.0.1", "PGPORT": refused_url.split(":")[2].split("/")[0], "PGDATABASE": "pgbench",
                  "PGUSER": "postgres"}
    e = make_exporter(tmp_path, refused_url, archive_runs=True, environ=refused_pg)
    e.poll_once()
    # The finished run goes to the archiver's thread, which finds no Prometheus: wait for its verdict.
    archiver = e.collectors["pgbench_runs"].on_finished
    assert processes.wait_until(lambda: archiver.failed == 1, 10, 0.01)
    # And Alertmanager's webhook has called once (the fields the receiver reads of its message).
    alert = {"status": "firing", "labels": {"alertname": "PgbenchStalled", "run_id": RUN_ID},
             "annotations": {"summary": f"Run {RUN_ID} has printed no progress for 3 intervals"}}
    assert e.alert_receiver.receive(json.dumps({"version": "4", "status": "firing", "alerts": [alert]}).encode())
    return e


def without_varying(text: str) -> str:
    """The exposition without the process_* and python_* families (HELP, TYPE and samples)."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not VARYING.match(line.removeprefix("# HELP ").removeprefix("# TYPE ")))


def test_cpu_per_collector(exporter):
    """Every collector's CPU time, and the remote write's, where the exporter's CPU goes (the cost benchmark reads them)."""
    text = generate_latest(exporter.registry).decode()
    cpu = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
           if line.startswith("benchwatch_exporter_collector_cpu_seconds_total{")}
    assert set(cpu) == set(exporter.collectors) and all(v >= 0 for v in cpu.values())
    # The runs collector read a whole run's output in that poll: CPU it cannot have done in no time.
    assert cpu["pgbench_runs"] > 0
    assert any(line.startswith("benchwatch_exporter_remote_write_cpu_seconds_total ") for line in text.splitlines())


def test_exposition_matches_golden_file(exporter):
    text = without_varying(generate_latest(exporter.registry).decode())
    if os.environ.get("BENCHWATCH_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(text)
    with open(GOLDEN, encoding="utf-8") as f:
        assert text == f.read(), "exposition changed: rerun with BENCHWATCH_UPDATE_GOLDEN=1 and review the diff"


def test_golden_file_passes_promtool():
    with open(GOLDEN, "rb") as f:
        assert promtool_problems(f.read()) == []


def test_live_exposition_passes_promtool(exporter):
    # The families left out of the golden file too.
    assert promtool_problems(generate_latest(exporter.registry)) == []


def test_golden_file_covers_every_collector_and_self_metric():
    with open(GOLDEN, encoding="utf-8") as f:
        text = f.read()
    for name, spec in load_collectors().items():
        # The golden file is the daemon as started without flags: every collector on by default is in it.
        assert (f'benchwatch_exporter_collector_success{{collector="{name}"}} 1.0' in text) == spec.default, name
    for family in ("benchmark_running", "pg_checkpoints_completed_total", "benchwatch_exporter_checkpoints_log_present",
                   "benchwatch_exporter_collector_duration_seconds", "benchwatch_exporter_collector_errors_total",
                   "benchwatch_exporter_remote_write_samples_total", "benchwatch_exporter_remote_write_failed_requests_total",
                   "benchwatch_exporter_remote_write_rejected_samples_total",
                   "benchwatch_exporter_remote_write_dropped_samples_total",
                   "benchwatch_exporter_remote_write_pending_samples",
                   "benchwatch_exporter_run_series_save_failures_total", "benchwatch_exporter_alert_notifications_total"):
        assert f"\n{family}" in text, family


def test_self_metrics_are_the_documented_catalogue(exporter):
    types = dict(re.findall(r"^# TYPE (benchwatch_exporter_\w+) (\w+)$", generate_latest(exporter.registry).decode(), re.M))
    exposed = {name: kind for name, kind in types.items() if not name.startswith("benchwatch_exporter_checkpoints_")}
    assert exposed == {name: kind for name, (kind, _) in SELF_METRICS.items()}


def test_process_metrics(exporter):
    get = exporter.registry.get_sample_value
    assert get("process_resident_memory_bytes") > 1 << 20
    assert get("process_cpu_seconds_total") > 0
    assert get("process_open_fds") > 0
    assert get("python_gc_objects_collected_total", {"generation": "0"}) >= 0
    names = {m.name for m in exporter.registry.collect()}
    assert "python_info" in names


def test_sample_values(exporter):
    get = exporter.registry.get_sample_value
    labels = {"run_id": RUN_ID, "tool": "pgbench"}
    assert get("benchmark_running", labels) == 0.0
    assert get("benchmark_exit_code", labels) == 0.0
    with open(os.path.join(FIXTURES, "pg15_report.stdout")) as f:
        processed = int(re.search(r"actually processed: (\d+)", f.read()).group(1))
    assert get("benchmark_transactions_total", labels) == processed
    assert get("benchmark_unparsed_lines_total", labels) == 0.0
    assert get("benchmark_progress_interval_seconds", labels) == 1.0
    assert get("pg_checkpoints_too_frequent_total") == 4
    for name in ("pgbench_runs", "checkpoints"):
        assert get("benchwatch_exporter_collector_success", {"collector": name}) == 1.0
        assert get("benchwatch_exporter_collector_duration_seconds", {"collector": name}) == POLL_SECONDS
        assert get("benchwatch_exporter_collector_errors_total", {"collector": name}) == 0.0
    # What /metrics shows is what was queued for Prometheus, last value per series.
    assert any(s.name == "benchmark_progress_tps" for s in exporter.writer._pending)
    runs_dir = exporter.collectors["pgbench_runs"].runs_dir
    # Queued is not delivered: nobody answers here, so the run is not done (issue 12).
    assert not os.path.exists(os.path.join(runs_dir, RUN_ID, ".ingested"))


def test_pending_samples_are_the_queued_ones(exporter):
    # Nobody answers: everything the collectors produced waits in the queue.
    get = exporter.registry.get_sample_value
    queued = exporter.writer.pending
    assert queued > 100  # the run's lines and the log's checkpoints
    assert get("benchwatch_exporter_remote_write_pending_samples") == queued
    assert get("benchwatch_exporter_remote_write_failed_requests_total") == 1
    assert get("benchwatch_exporter_remote_write_samples_total") == 0
    assert get("benchwatch_exporter_remote_write_rejected_samples_total") == 0
    exporter.poll_once()  # nothing new from the collectors, the same queue
    assert get("benchwatch_exporter_remote_write_pending_samples") == queued
    assert get("benchwatch_exporter_remote_write_failed_requests_total") == 2


def test_failing_collector_is_counted_and_the_others_go_on(tmp_path, refused_url, caplog):
    # A server log that cannot be read (here: a directory) fails every poll of that collector.
    bad_log = tmp_path / "log-is-a-directory"
    bad_log.mkdir()
    e = make_exporter(tmp_path, refused_url, server_log=str(bad_log))
    for _ in range(3):
        e.poll_once()
    get = e.registry.get_sample_value
    assert get("benchwatch_exporter_collector_success", {"collector": "checkpoints"}) == 0.0
    assert get("benchwatch_exporter_collector_errors_total", {"collector": "checkpoints"}) == 3
    assert get("benchwatch_exporter_collector_duration_seconds", {"collector": "checkpoints"}) == POLL_SECONDS
    assert get("benchwatch_exporter_collector_success", {"collector": "pgbench_runs"}) == 1.0
    assert get("benchmark_running", {"run_id": RUN_ID, "tool": "pgbench"}) == 0.0
    # One traceback when it starts failing, not one per poll.
    assert [r.getMessage() for r in caplog.records if r.exc_info] == [
        "collector checkpoints failed (benchwatch_exporter_collector_errors_total counts the next)"]


def test_collectors_switched_off_or_without_input_are_not_built(tmp_path, refused_url):
    e = make_exporter(tmp_path, refused_url, collectors={"pgbench_runs": False})
    assert list(e.collectors) == ["checkpoints", "processes"]
    e = make_exporter(tmp_path / "b", refused_url, server_log=None)
    assert list(e.collectors) == ["pgbench_runs", "processes"]  # nothing to follow for checkpoints
    e.poll_once()
    assert e.registry.get_sample_value("benchwatch_exporter_collector_success", {"collector": "checkpoints"}) is None
    with pytest.raises(ValueError, match="unknown collectors"):
        make_exporter(tmp_path / "c", refused_url, collectors={"pgbench_run": False})


def test_collector_flags_come_from_the_registry():
    parser = server.build_parser()
    base = ["--runs-dir", "r", "--remote-write-url", "http://127.0.0.1:9/api/v1/write"]
    assert enabled_collectors(parser.parse_args(base)) == {name: spec.default for name, spec in load_collectors().items()}
    assert list(load_collectors()) == ["pgbench_runs", "host", "checkpoints", "dips", "processes", "statements"]
    args = parser.parse_args(base + ["--no-collector.checkpoints", "--collector.pgbench_runs"])
    assert enabled_collectors(args) == {"pgbench_runs": True, "host": False, "checkpoints": False, "dips": True,
                                        "processes": True, "statements": True}
    args = parser.parse_args(base + ["--no-collector.pgbench_runs", "--no-collector.dips", "--no-collector.processes",
                                     "--collector.host"])
    assert enabled_collectors(args) == {"pgbench_runs": False, "host": True, "checkpoints": True, "dips": False,
                                        "processes": False, "statements": True}


def test_collector_flags_in_the_daemon_help():
    help_text = subprocess.run([sys.executable, "-m", "benchwatch", "exporter", "--help"], capture_output=True, text=True,
                               check=True).stdout
    for flag in ("--collector.pgbench_runs, --no-collector.pgbench_runs", "--collector.checkpoints, --no-collector.checkpoints"):
        assert flag in help_text


def test_building_the_cli_loads_no_collector():
    # Every command builds the whole parser: the collectors' imports (prometheus_client,
    # the run model) wait until the exporter parses its arguments.
    code = ("import sys; from benchwatch.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'benchwatch.exporter.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ingested_and_imported_runs_are_not_followed_again(tmp_path):
    run = make_run(str(tmp_path), "20231114T221320Z-0002", "pg15_plain", ["pgbench"])
    open(run.file(".ingested"), "w").close()
    imported = make_run(str(tmp_path), "20231114T221320Z-0003", "pg15_plain", ["pgbench"])
    imported.update_meta(mode="import")
    sent = []
    c = PgbenchRunsCollector(str(tmp_path), sent.extend, clock=lambda: START)
    c.poll()
    assert sent == [] and c.following == {}


def test_a_run_is_live_while_its_tps_lines_are_sent(tmp_path, refused_url, monkeypatch):
    """ExporterOptions.run_live, which the processes and statements collectors slow down by between runs."""
    from benchwatch.exporter import server
    from benchwatch.model.samples import sample

    e = make_exporter(tmp_path, refused_url, server_log=None)
    t = [500.0]
    monkeypatch.setattr(server.time, "monotonic", lambda: t[0])
    assert e.collectors["processes"].run_live is not None and not e.run_live()
    e.send([sample("benchmark_transactions_total", {"run_id": "r"}, 1.0, 1000)])
    assert not e.run_live()  # not a progress line
    e.send([sample("benchmark_progress_tps", {"run_id": "r"}, 100.0, 1000)])
    assert e.run_live()
    t[0] += server.RUN_LIVE_HOLD_S + 0.1
    assert not e.run_live()
    # Without the runs collector (an agent's log follower) nothing is slowed down.
    other = tmp_path / "other"
    other.mkdir()
    f = make_exporter(other, refused_url, server_log=None, collectors={"pgbench_runs": False})
    assert f.collectors["processes"].run_live is None
