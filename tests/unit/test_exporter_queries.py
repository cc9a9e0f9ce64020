"""postgres_exporter's queries file per server version (benchwatch.engines.postgresql.exporter_queries): the same
metrics, without the DO blocks a known version does not need."""

from __future__ import annotations

import os
import stat

import yaml

from benchwatch.engines.postgresql import exporter_queries


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_an_unknown_version_or_18_gets_the_file_as_it_is(tmp_path):
    target = str(tmp_path / "q.yaml")
    assert exporter_queries.for_version(None, target) == exporter_queries.universal()
    assert exporter_queries.for_version(180000, target) == exporter_queries.universal()
    assert exporter_queries.for_version(180003, target) == exporter_queries.universal()
    assert not os.path.exists(target)


def test_15_asks_pg_stat_wal_directly_and_leaves_out_the_checkpointer(tmp_path):
    universal = _load(exporter_queries.universal())
    assert "DO $$" in universal["pg_stat_wal"]["query"] and "DO $$" in universal["pg_stat_checkpointer"]["query"]
    path = exporter_queries.for_version(150010, str(tmp_path / "q.yaml"))
    assert path == str(tmp_path / "q.yaml")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    derived = _load(path)
    assert "pg_stat_checkpointer" not in derived
    assert not any("DO $$" in q["query"] for q in derived.values())
    # Every other query, and every metric of pg_stat_wal, as the file has them.
    assert derived["pg_stat_wal"]["metrics"] == universal["pg_stat_wal"]["metrics"]
    assert {k: v for k, v in derived.items() if k != "pg_stat_wal"} == \
        {k: v for k, v in universal.items() if k not in ("pg_stat_wal", "pg_stat_checkpointer")}
    # The direct query's columns are the metrics' names, in their order.
    columns = [c.strip() for c in derived["pg_stat_wal"]["query"].split("FROM")[0].replace("SELECT", "").split(",")]
    assert columns == [next(iter(m)) for m in universal["pg_stat_wal"]["metrics"]]


def test_17_keeps_the_checkpointer_and_14_asks_pg_stat_wal_directly(tmp_path):
    derived = _load(exporter_queries.for_version(170000, str(tmp_path / "17.yaml")))
    assert "DO $$" in derived["pg_stat_checkpointer"]["query"] and "DO $$" not in derived["pg_stat_wal"]["query"]
    derived = _load(exporter_queries.for_version(140000, str(tmp_path / "14.yaml")))
    assert "pg_stat_checkpointer" not in derived and "DO $$" not in derived["pg_stat_wal"]["query"]
    # Before 14 there is no pg_stat_wal to ask directly: that query stays as the file has it.
    derived = _load(exporter_queries.for_version(130000, str(tmp_path / "13.yaml")))
    assert "pg_stat_checkpointer" not in derived and "DO $$" in derived["pg_stat_wal"]["query"]


def test_a_server_that_cannot_be_asked_gets_the_file_as_it_is(tmp_path):
    from benchwatch.util.net import free_port

    params = {"host": "127.0.0.1", "port": str(free_port()), "user": "nobody", "dbname": "x", "connect_timeout": "2"}
    assert exporter_queries.for_server(params, str(tmp_path / "q.yaml")) == exporter_queries.universal()
