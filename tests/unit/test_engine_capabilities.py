"""Capabilities of a server for meta.json, from the version and settings its engine describes."""

from __future__ import annotations

import pytest

from benchwatch import engines
from benchwatch.engines.mysql import server as mysql_server
from benchwatch.engines.postgresql import settings


@pytest.mark.parametrize(("version", "major"), [("15.4", 15), ("15.4 (Debian 15.4-1.pgdg120+1)", 15), ("9.6.24", 9),
                                                ("17beta1", 17), ("18devel", 18), ("10.23", 10), ("", None), (None, None)])
def test_major_version(version, major):
    assert settings.major_version(version) == major


@pytest.mark.parametrize(("version", "wal", "io", "checkpointer", "io_wal"), [
    ("9.6.24", False, False, False, False),
    ("13.14", False, False, False, False),
    ("14.0", True, False, False, False),
    ("15.4", True, False, False, False),
    ("16.2", True, True, False, False),
    ("17beta1", True, True, True, False),
    ("17.5", True, True, True, False),
    ("18devel", True, True, True, True),
])
def test_postgresql_capabilities_follow_the_version(version, wal, io, checkpointer, io_wal):
    caps = settings.capabilities(version, "")
    assert (caps["pg_stat_wal"], caps["pg_stat_io"], caps["pg_stat_checkpointer"], caps["pg_stat_io_wal"]) == (
        wal, io, checkpointer, io_wal)
    assert caps["pg_stat_statements"] is False


def test_pg_stat_statements_when_preloaded():
    assert settings.capabilities("15.4", "auto_explain, pg_stat_statements")["pg_stat_statements"]
    assert settings.capabilities("15.4", '"pg_stat_statements"')["pg_stat_statements"]
    assert not settings.capabilities("15.4", "pg_stat_statements_x")["pg_stat_statements"]
    assert settings.capabilities(None, "pg_stat_statements") == {}  # version unknown: nothing said


def test_pg_stat_statements_preloaded_without_its_extension_says_what_is_missing():
    caps = settings.capabilities("15.4", "pg_stat_statements", statements_view=False)
    assert caps["pg_stat_statements"] is False
    assert "not created in the benchmark's database" in engines.get("postgresql").capability_missing(
        "pg_stat_statements", {"server_version": "15.4", "capabilities": caps})
    assert settings.capabilities("15.4", "pg_stat_statements", statements_view=True)["pg_stat_statements"]
    assert engines.get("postgresql").capability_missing("pg_stat_statements", {"server_version": "15.4"}) == (
        "pg_stat_statements is not in shared_preload_libraries")


def test_mysql_performance_schema():
    assert mysql_server.capabilities({"performance_schema": "OFF"}) == {"performance_schema": False}
    assert mysql_server.capabilities({"performance_schema": "ON"}) == {"performance_schema": True}
    assert mysql_server.capabilities({}) == {}


def test_engines_read_recorded_capabilities_or_derive_them_for_older_runs():
    pg, my = engines.get("postgresql"), engines.get("mysql")
    assert pg.capabilities({"capabilities": {"pg_stat_wal": False}}) == {"pg_stat_wal": False}
    older = pg.capabilities({"server_version": "16.1", "settings": {}})
    assert older["pg_stat_io"] and not older["pg_stat_checkpointer"] and "pg_stat_statements" not in older
    assert pg.capabilities({}) == {}
    assert my.capabilities({"server_version": "10.11.6-MariaDB", "settings": {"performance_schema": "OFF"}}) == {
        "performance_schema": False}
