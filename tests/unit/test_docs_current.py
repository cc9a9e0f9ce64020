import json
import os
import re
import shutil

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from benchwatch.exporter import metrics_doc
from benchwatch.exporter.server import Exporter
from benchwatch.record import rundir
from benchwatch.util import net, processes
from tests.helpers.prometheus import REMOTE_WRITE_CONFIG, start_prometheus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# The exporter's clock: after every run below (the running one has gone quiet: a stall).
NOW = 1795370400.0


def test_metrics_doc_is_generated_from_the_catalogue():
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
        assert f.read() == metrics_doc.render(), "regenerate: python -m benchwatch.exporter.metrics_doc > docs/metrics.md"


def documented() -> dict[str, str]:
    """name -> type, from the tables of docs/metrics.md."""
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
        return dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", f.read(), re.M))


def is_documented(name: str, doc: dict[str, str]) -> bool:
    if name in doc:
        return True
    base, _, suffix = name.rpartition("_")
    return suffix in ("bucket", "sum", "count") and doc.get(base) == "histogram"


def add_run(runs_dir: str, run_id: str, fixture: str, start: float, *, running: bool = False,
            txlog: str | None = None) -> None:
    run = rundir.create_run_dir(runs_dir, run_id)
    for ext in ("stdout", "stderr"):
        shutil.copy(os.path.join(FIXTURES, "pgbench", f"{fixture}.{ext}"), run.file(f"{ext}.log"))
    meta = {"run_id": run_id, "mode": "run", "argv": ["pgbench", "-r", "-P", "1", "-T", "5", "postgres"],
            "progress_interval": 1.0, "clock_start_epoch": start, "sql_statements_per_transaction": 7,
            "pgbench_version": "15.18", "server_version": "15.18", "scale": "2"}
    if running:
        meta.update(state=rundir.RUNNING, pid=os.getpid())  # a live pgbench that stopped printing
    else:
        meta.update(state=rundir.FINISHED, pid=None, ended_at=start + 6, exit_code=0)
    if txlog:
        meta["txlog_prefix"] = run.file("pgbench_log")
        shutil.copy(os.path.join(FIXTURES, "pgbench", "txlog", txlog), run.file("pgbench_log.4242"))
    run.write_meta(meta)


def test_every_metric_the_exporter_emits_is_documented(tmp_path):
    # A real scenario: finished runs with every optional progress field, -r tables, aborted
    # clients and transaction logs, a live run that stalled, and a captured server log with
    # checkpoints; the whole exporter remote-writes to a real Prometheus and serves /metrics.
    runs_dir = str(tmp_path / "runs")
    os.makedirs(runs_dir)
    add_run(runs_dir, "report", "pg15_report", 1795370000.0)
    add_run(runs_dir, "max-tries", "pg15_max_tries", 1795370010.0)
    add_run(runs_dir, "max-tries-rate", "pg15_max_tries_rate", 1795370020.0)
    add_run(runs_dir, "abort", "pg15_abort_div0", 1795370030.0)
    add_run(runs_dir, "txlog", "pg15_log", 1795370194.0, txlog="pg15_log.txlog")
    add_run(runs_dir, "txlog-tries", "pg15_log_max_tries", 1795370100.0, txlog="pg15_log_max_tries.txlog")
    add_run(runs_dir, "stalled", "pg15_plain", NOW - 60, running=True)
    server_log = str(tmp_path / "postgresql.log")
    shutil.copy(os.path.join(FIXTURES, "pglog", "pg15_a.log"), server_log)

    with start_prometheus(tmp_path / "prom", REMOTE_WRITE_CONFIG, ["--web.enable-remote-write-receiver"]) as prom:
        exporter = Exporter(runs_dir=runs_dir, remote_write_url=prom.remote_write_url, server_log=server_log,
                            clock=lambda: NOW)
        exporter.poll_once()
        reg = exporter.registry
        # The finished runs go to the archiver: let it be done before Prometheus stops.
        assert processes.wait_until(
            lambda: (reg.get_sample_value("benchwatch_exporter_run_series_saved_total") or 0)
            + (reg.get_sample_value("benchwatch_exporter_run_series_save_failures_total") or 0) >= 6, 60, 0.05)
        assert exporter.writer.pending == 0 and reg.get_sample_value("benchwatch_exporter_remote_write_failed_requests_total") == 0
        status, body = net.http_get(prom.url + "/api/v1/label/__name__/values", timeout=30)
        assert status == 200, body
        written = set(json.loads(body)["data"])  # every name remote-written (this Prometheus scrapes nothing)
        families = list(text_string_to_metric_families(generate_latest(reg).decode()))
    # Sample names, and the names of families without samples yet (no alert received).
    exposed = {s.name for family in families for s in family.samples}
    exposed |= {family.name + "_total" if family.type == "counter" else family.name for family in families}

    # Make sure the scenario reached what it is meant to cover, so the check below means something.
    assert {"benchmark_progress_stalled", "pgbench_statement_failures_total", "benchmark_aborted_clients_total",
            "pgbench_progress_lag_seconds", "benchmark_latency_seconds_bucket", "pg_checkpoint_info",
            "pgbench_txlog_failed_transactions_total", "pg_checkpoints_too_frequent_total"} <= written
    assert "pg_checkpoint_last_duration_seconds" in exposed and "benchwatch_exporter_remote_write_samples_total" in exposed
    doc = documented()
    # client_python's standard process_* and python_* families are described in prose, not listed.
    ours = {name for name in written | exposed if not name.startswith(("process_", "python_"))}
    missing = sorted(name for name in ours if not is_documented(name, doc))
    assert not missing, f"emitted by the exporter but not in docs/metrics.md: {missing}"
