"""The sharded demo's layout and arguments (no server needed)."""

from __future__ import annotations

import pytest

from benchwatch import cli
from benchwatch.commands import Context
from benchwatch.engines.postgresql import plproxy
from benchwatch.engines.postgresql.local import LocalInstance


def test_shards_must_be_a_power_of_two_and_instances_at_most_one_per_shard():
    plproxy.check_layout(16, 4, 8)
    for shards in (0, 3, 12, 17):
        with pytest.raises(plproxy.LayoutError, match="power of 2"):
            plproxy.check_layout(shards, 1)
    with pytest.raises(plproxy.LayoutError, match="between 1 and"):
        plproxy.check_layout(4, 5)
    with pytest.raises(plproxy.LayoutError, match="between 1 and"):
        plproxy.check_layout(4, 0)


def test_clients_are_limited_by_the_connections_an_instance_allows():
    # Each client's proxy backend holds a connection to every shard it called: 4 per instance here.
    allowed = (plproxy.SHARD_MAX_CONNECTIONS - plproxy.RESERVED_CONNECTIONS) // 4
    plproxy.check_layout(16, 4, allowed)
    with pytest.raises(plproxy.LayoutError, match="connections"):
        plproxy.check_layout(16, 4, allowed + 1)
    plproxy.check_layout(16, 16, 45)  # the 45 clients fit with one shard per instance


def test_each_instance_holds_a_contiguous_block_of_shards():
    assert plproxy.shard_placement(16, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    placement = plproxy.shard_placement(16, 5)
    assert sorted(s for block in placement for s in block) == list(range(16))
    assert all(block for block in placement)
    assert [plproxy.database(s) for s in (0, 9, 15)] == ["shard00", "shard09", "shard15"]


def test_partition_connection_strings_name_the_passfile_not_a_password(tmp_path):
    inst = LocalInstance(str(tmp_path / "pg1"), 54321, "shard-pg1", "/nonexistent")
    conninfo = plproxy.partition_conninfo(inst, 3, "/state/shards/proxy.pgpass")
    assert conninfo == ("dbname=shard03 host=127.0.0.1 port=54321 user=shard_rw passfile=/state/shards/proxy.pgpass "
                        "sslmode=disable application_name=plproxy")


def test_passfile_is_0600_with_one_line_per_instance(tmp_path):
    insts = [LocalInstance(str(tmp_path / n), p, n, "/nonexistent") for n, p in (("a", 5001), ("b", 5002))]
    path = tmp_path / "proxy.pgpass"
    plproxy.write_passfile(str(path), [(insts[0], "pw:1"), (insts[1], "pw\\2")], None)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text().splitlines() == ["127.0.0.1:5001:*:shard_rw:pw\\:1", "127.0.0.1:5002:*:shard_rw:pw\\\\2"]


def test_scripts_make_one_proxy_call_per_transaction():
    for script in plproxy.SCRIPTS.values():
        sql = [line for line in script.splitlines() if line and not line.startswith("\\")]
        assert len(sql) == 1 and sql[0].startswith("SELECT ") and "(:aid" in sql[0], script


def test_demo_arguments(monkeypatch, tmp_path):
    from benchwatch.stack.config import load_config
    from benchwatch.stack.native import Stack

    calls = {}
    monkeypatch.setattr("benchwatch.engines.postgresql.shards_demo.demo_shards", lambda ctx, **kw: calls.setdefault("shards", kw) and 0)
    monkeypatch.setattr("benchwatch.engines.postgresql.demo.pgbench_demo", lambda ctx, **kw: calls.setdefault("plain", kw) and 0)
    monkeypatch.delenv("BENCHWATCH_ENGINE", raising=False)
    monkeypatch.setattr(Context, "load_stack", lambda self, starting=False: Stack(load_config(str(tmp_path))))
    parser = cli.build_parser()
    args = parser.parse_args(["demo", "--shards", "16", "--", "-R", "2000"])
    args.func(Context(args))
    assert calls["shards"]["shards"] == 16 and calls["shards"]["instances"] == 4 and calls["shards"]["duration"] == 30
    assert calls["shards"]["extra_args"] == ["-R", "2000"] and calls["shards"]["script"] == "update"
    args = parser.parse_args(["demo"])
    args.func(Context(args))
    assert calls["plain"]["duration"] == 40  # README's first command, as before
    args = parser.parse_args(["demo", "--", "-R", "5"])
    assert args.func(Context(args)) == 2  # extra pgbench arguments only go with --shards
