"""The long-term store's pure parts (docs/long-term.md): up's settings checked, the remote_write entry Prometheus
gets (the token's file, never the token), what Prometheus says it forwarded, which samples the store lacks, and
the archive's list covering every series the why reads (a run read back from the store is asked for no other)."""

from __future__ import annotations

import math
import os
import re
import threading

import pytest

from benchwatch import evidence, resources
from benchwatch.model.samples import is_stale_marker
from benchwatch.query import archive, longterm, prometheus, promql
from benchwatch.query.series import Series
from benchwatch.stack.config import LONG_TERM_KEYS, check_long_term, load_config
from benchwatch.stack.native import long_term_remote_write, render_remote_write
from tests.unit.test_archive import covers

# Prometheus 2.42's /metrics lines about remote write, as a stack with the long-term store shows them.
METRICS = """\
# HELP prometheus_remote_storage_highest_timestamp_in_seconds Highest timestamp that has come into the remote storage via the Appender interface, in seconds since epoch.
# TYPE prometheus_remote_storage_highest_timestamp_in_seconds gauge
prometheus_remote_storage_highest_timestamp_in_seconds 1.795886446e+09
# HELP prometheus_remote_storage_queue_highest_sent_timestamp_seconds Timestamp from a WAL sample, the highest timestamp successfully sent by this queue, in seconds since epoch.
# TYPE prometheus_remote_storage_queue_highest_sent_timestamp_seconds gauge
prometheus_remote_storage_queue_highest_sent_timestamp_seconds{remote_name="long_term",url="http://127.0.0.1:8428/api/v1/write"} 1.795886441e+09
prometheus_remote_storage_samples_total{remote_name="long_term",url="http://127.0.0.1:8428/api/v1/write"} 5120
"""


@pytest.fixture
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text("s3cret\n")
    path.chmod(0o600)
    return str(path)


def config(tmp_path, monkeypatch, **given):
    for key in LONG_TERM_KEYS:
        monkeypatch.delenv(f"BENCHWATCH_{key.upper()}", raising=False)
    return load_config(str(tmp_path / "state"), long_term=given)


def test_settings_from_flags_environment_and_stack_json(tmp_path, monkeypatch, token):
    cfg = config(tmp_path, monkeypatch, long_term_write_url="http://vm:8428/api/v1/write",
                 long_term_query_url="http://vm:8428/", long_term_bearer_token_file=token)
    assert check_long_term(cfg) is None
    assert cfg.long_term_query_url == "http://vm:8428"
    cfg.save()
    with open(cfg.stack_file) as f:
        saved = f.read()
    assert "s3cret" not in saved and token in saved
    # The commands after up read them back; up itself (starting) takes only its flags and the environment.
    assert load_config(cfg.state_dir).long_term_write_url == "http://vm:8428/api/v1/write"
    assert load_config(cfg.state_dir, starting=True).long_term_write_url is None
    monkeypatch.setenv("BENCHWATCH_LONG_TERM_QUERY_URL", "http://other:9009/prometheus")
    assert load_config(cfg.state_dir).long_term_query_url == "http://other:9009/prometheus"


@pytest.mark.parametrize("given, message", [
    ({"long_term_write_url": "http://vm:8428/api/v1/write"}, "give both"),
    ({"long_term_write_url": "ftp://vm/x", "long_term_query_url": "http://vm:8428"}, "http:// or https://"),
    ({"long_term_write_url": "http://u:pw@vm:8428/api/v1/write", "long_term_query_url": "http://vm:8428"},
     "no credentials in the URL"),
    ({"long_term_write_url": "http://vm/w", "long_term_query_url": "http://vm", "long_term_bearer_token_file": "/nonexistent"},
     "does not exist"),
])
def test_bad_settings_say_why(tmp_path, monkeypatch, given, message):
    assert message in (check_long_term(config(tmp_path, monkeypatch, **given)) or "")


def test_a_token_file_others_can_read_is_refused(tmp_path, monkeypatch, token):
    os.chmod(token, 0o644)
    cfg = config(tmp_path, monkeypatch, long_term_write_url="http://vm/w", long_term_query_url="http://vm",
                 long_term_bearer_token_file=token)
    assert "readable by others" in (check_long_term(cfg) or "")


def test_prometheus_gets_a_remote_write_with_the_token_file_only(tmp_path, monkeypatch, token):
    cfg = config(tmp_path, monkeypatch, long_term_write_url="https://mimir:9009/api/v1/push",
                 long_term_query_url="https://mimir:9009/prometheus", long_term_bearer_token_file=token)
    remote = long_term_remote_write(cfg)
    assert remote == {"url": "https://mimir:9009/api/v1/push", "name": "long_term", "queue_config": {"batch_send_deadline": "1s"},
                      "authorization": {"type": "Bearer", "credentials_file": token}}
    with open(resources.path("prometheus", "prometheus.yml")) as f:
        text = f.read()
    rendered = render_remote_write(text, remote)
    assert rendered.startswith(text.rstrip("\n")) and "s3cret" not in rendered
    assert re.search(r"^remote_write:\n  - \{.*credentials_file", rendered, re.M)
    assert long_term_remote_write(config(tmp_path, monkeypatch)) is None


def test_what_prometheus_says_it_forwarded():
    assert longterm.forwarding(METRICS) == (1795886446.0, 1795886441.0)
    assert longterm.forwarding("up 1\n") == (None, None)


def test_missing_samples_are_those_the_store_lacks_by_series_and_millisecond():
    have = [Series("benchmark_progress_tps", {"run_id": "r"}, [(1000, 5.0), (2000, 6.0), (3000, math.nan)]),
            Series("node_cpu_seconds_total", {"cpu": "0"}, [(1000, 1.0)])]
    stored = [Series("benchmark_progress_tps", {"run_id": "r"}, [(1000, 5.0)])]
    lacking = longterm.missing(have, stored)
    # the NaN is not asked for: VictoriaMetrics drops a NaN sample when it takes it
    assert [(s.name, s.timestamp_ms, s.value) for s in lacking] == [
        ("benchmark_progress_tps", 2000, 6.0), ("node_cpu_seconds_total", 1000, 1.0)]
    assert longterm.missing(have[1:], have[1:]) == []


def test_a_nan_from_the_store_is_its_staleness_marker(monkeypatch):
    found = [Series("up", {"job": "node"}, [(1000, 1.0), (2000, math.nan)]), Series("x", {}, [(5, math.nan)])]
    monkeypatch.setattr(longterm, "series_fetch", lambda *a: [Series(s.name, s.labels, list(s.samples)) for s in found])
    assert [(s.name, s.samples) for s in longterm.fetch("http://vm", ["up"], 0, 3)] == [("up", [(1000, 1.0)])]
    marked = longterm.fetch("http://vm", ["up"], 0, 3, markers=True)
    assert marked[0].samples[0] == (1000, 1.0) and is_stale_marker(marked[0].samples[1][1]) and is_stale_marker(marked[1].samples[0][1])


def test_the_bearer_token_is_the_files_first_line(token):
    assert longterm.bearer_headers(token) == {"Authorization": "Bearer s3cret"}
    assert longterm.bearer_headers(None) == {}
    store = longterm.Store("http://vm/api/v1/write", "http://vm", longterm.bearer_headers(token))
    assert "s3cret" not in repr(store) + str(store)


@pytest.mark.parametrize("engine", ["postgresql", "mysql"])
def test_the_archive_keeps_every_series_the_why_reads(engine):
    """A run read back from the long-term store is copied by the archive's list: a why signal outside it would
    read nothing there."""
    archived = archive.archived_selectors()
    for signal in evidence.signals_for(engine):
        for wanted in promql.selectors(signal.promql.replace("{w}", "60s").replace("{target}", "")):
            assert any(covers(a, wanted) for a in archived), (signal.name, wanted)


class FakeMirror:
    """Stands for the private Prometheus a run is copied into (a real one is the integration test's)."""

    def __init__(self, store):
        self.store, self.loads = store, []
        self.prometheus = type("P", (), {"url": "http://127.0.0.1:1/mirror"})()

    def load(self, run_id, start, end):
        if run_id == "broken":
            raise RuntimeError("prometheus exited")
        self.loads.append(run_id)


def test_a_run_is_read_where_it_is(monkeypatch):
    local, store = "http://127.0.0.1:19090", longterm.Store("http://vm/api/v1/write", "http://vm")
    monkeypatch.setattr(longterm, "_stores", {})
    monkeypatch.setattr(longterm, "_mirrors", {})
    monkeypatch.setattr(longterm, "_Mirror", FakeMirror)
    monkeypatch.setattr(prometheus, "_headers", {})
    where = {(local, "here"), ("http://vm", "gone"), ("http://vm", "broken")}
    monkeypatch.setattr(longterm, "has_run", lambda base, run_id, start, end: (base, run_id) in where)
    assert longterm.base_for_run(local, "gone", 0, 1) is None  # no store configured for it
    longterm.configure(local + "/", store)
    assert longterm.base_for_run(local, "here", 0, 1) == local
    mirror_url = longterm.base_for_run(local, "gone", 0, 1)
    assert mirror_url == "http://127.0.0.1:1/mirror" and longterm.source_of(mirror_url) is store
    assert longterm.source_of(local) is None
    assert longterm.base_for_run(local, "nowhere", 0, 1) is None
    assert longterm.base_for_run(local, "broken", 0, 1) is None  # said in the log; the caller rebuilds instead
    assert longterm.base_for_run(None, "here", 0, 1) is None
    assert longterm._mirrors["http://vm"].loads == ["gone"]


def test_a_run_the_store_was_away_for_is_completed_later(monkeypatch):
    from benchwatch.exporter import run_archiver

    calls: list[str] = []
    done = threading.Event()

    def complete_run(path, local, store):
        calls.append(path)
        if len(calls) < 3:
            raise OSError("connection refused")
        done.set()
        return longterm.Completion(local=1, forwarded=1)

    monkeypatch.setattr(longterm, "complete_run", complete_run)
    monkeypatch.setattr(run_archiver.LongTermCompleter, "RETRY_S", (0.05, 0.05))
    completer = run_archiver.LongTermCompleter("http://127.0.0.1:19090", longterm.Store("http://vm/w", "http://vm"))
    completer.add("/runs/R", "R")
    assert done.wait(10), calls
    assert calls == ["/runs/R"] * 3
