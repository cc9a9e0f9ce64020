"""history over run directories: workloads, the JSON contracts, what changed, CI's verdict, accept, annotate."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from benchwatch import cli
from benchwatch.history import changed, events, index, workload
from benchwatch.record import outcome, rundir
from benchwatch.util.net import free_port

ARGV = ["pgbench", "-c", "4", "-j", "2", "-T", "3", "-P", "1", "-M", "prepared"]


def _run(runs_dir: str, started: float, tps: float, settings: dict[str, str], argv=ARGV, **meta) -> str:
    run = rundir.create_run_dir(runs_dir, rundir.new_run_id(started))
    run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "pgbench", "state": rundir.FINISHED,
                    "argv": argv, "started_at": started, "ended_at": started + 3, "exit_code": 0, "scale": "1",
                    "hostname": "db1", "server_version": "15.4", "pgbench_version": "15.4", "engine": "postgresql",
                    "server_settings": settings, "host": {"kernel": "6.1", "cpus": 2}, **meta})
    outcome.write(run, {"version": 1, "tps": tps, "latency_avg_s": 4 / tps})
    return run.run_id


def _history(tmp_path, n: int = 12, change_at: int = 6) -> list[str]:
    runs_dir = str(tmp_path / "runs")
    rng = np.random.default_rng(5)
    ids = []
    for i in range(n):
        slow = i >= change_at
        ids.append(_run(runs_dir, 1_760_000_000 + i * 86400, 1000 * (0.7 if slow else 1.0) * (1 + 0.01 * rng.standard_normal()),
                        {"synchronous_commit": "on" if slow else "off", "max_connections": "100"}))
    return ids


def _cli(tmp_path, capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["history", "--state-dir", str(tmp_path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_workload_key_leaves_out_length_and_reporting(tmp_path):
    base = {"tool": "pgbench", "argv": ARGV, "scale": "10", "hostname": "db1", "engine": "postgresql"}
    longer = {**base, "argv": ["pgbench", "-c", "4", "-j", "2", "-T", "600", "-P", "10", "-M", "prepared"]}
    assert workload.key(base) == workload.key(longer)
    assert workload.key(base)["clients"] == "4" and workload.key(base)["scale"] == "10"
    for other in ({**base, "argv": [*ARGV, "-S"]}, {**base, "scale": "100"}, {**base, "hostname": "db2"},
                  {**base, "argv": ["pgbench", "-c", "8", "-T", "3"]}, {**base, "info": {"variant": "wal_compression=on"}}):
        assert workload.workload_id(workload.key(other)) != workload.workload_id(workload.key(base)), other
    # A sweep's runs (issue 21's info labels): per sweep and variant, repeats together, warm-ups apart.
    swept = [{**base, "info": {"sweep": "s1", "variant": "on", "cell": "c4", "repeat": r}} for r in ("1", "2")]
    assert workload.key(swept[0]) == workload.key(swept[1])
    assert workload.key({**base, "info": {**swept[0]["info"], "warmup": "1"}}) != workload.key(swept[0])
    assert workload.key({**base, "info": {**swept[0]["info"], "sweep": "s2"}}) != workload.key(swept[0])


def test_history_lists_workloads_exactly_as_the_contract(tmp_path, capsys):
    ids = _history(tmp_path)
    _run(str(tmp_path / "runs"), 1_770_000_000, 500, {}, argv=["pgbench", "-S", "-c", "1", "-T", "3"])
    code, out, _ = _cli(tmp_path, capsys, "--json")
    assert code == 0
    listing = json.loads(out)
    assert list(listing) == ["workloads"]
    assert {"workload", "runs", "first", "last"} <= set(listing["workloads"][0])
    mine = next(w for w in listing["workloads"] if w["runs"] == 12)
    assert mine["first"].startswith("2025-10-09") and mine["latest_run"] == ids[-1]
    assert len(listing["workloads"]) == 2


def test_a_workload_by_run_id_with_its_change_point_and_what_changed(tmp_path, capsys):
    ids = _history(tmp_path)
    events.annotate(events.history_dir(str(tmp_path)), "remounted /data with barrier", now=1_760_000_000 + 5.5 * 86400)
    code, out, _ = _cli(tmp_path, capsys, ids[3], "--json")
    assert code == 0
    got = json.loads(out)
    assert list(got)[:4] == ["workload", "metric", "runs", "change_points"]
    assert got["metric"] == "tps" and [r["run_id"] for r in got["runs"]] == ids
    assert set(got["runs"][0]) == {"run_id", "started_at", "value"}
    (cp,) = got["change_points"]
    assert {"run_id", "index", "step_pct", "step_ci", "p_value", "verdict", "changed"} <= set(cp)
    assert cp["index"] == 6 and cp["run_id"] == ids[6] and cp["verdict"] == "regression"
    assert cp["step_ci"][0] <= cp["step_pct"] <= cp["step_ci"][1] < -25
    assert cp["changed"]["synchronous_commit"] == ["off", "on"]
    assert cp["changed"]["annotations"] == [None, ["remounted /data with barrier"]]
    assert "max_connections" not in cp["changed"]
    code, out, _ = _cli(tmp_path, capsys, ids[3], "--json", "--metric", "latency_avg")
    assert json.loads(out)["change_points"][0]["verdict"] == "regression"  # latency went up
    code, out, err = _cli(tmp_path, capsys, ids[3], "--json", "--metric", "latency_p95")
    assert code == 0 and json.loads(out)["runs"] == [] and "need pgbench's per-transaction log" in err


def test_fail_on_regression_and_accept(tmp_path, capsys):
    ids = _history(tmp_path)
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5")
    assert code == 1 and "regression of more than 5 %" in err and "synchronous_commit off → on" in err
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "40")
    assert code == 0 and "no regression" in err
    code, _, err = _cli(tmp_path, capsys, "accept", ids[6])
    assert code == 0
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5")
    assert code == 0, err


def test_fail_on_regression_by_the_recent_runs_before_a_change_point_can_be_found(tmp_path, capsys):
    ids = _history(tmp_path, n=8, change_at=6)  # two slow runs: too few after it for a change point
    code, out, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5", "--recent", "2", "--json")
    assert json.loads(out)["change_points"] == []
    assert code == 1 and "latest 2 runs" in err


def test_the_first_runs_alone_pass(tmp_path, capsys):
    ids = _history(tmp_path, n=6, change_at=6)
    code, _, err = _cli(tmp_path, capsys, ids[0], "--fail-on-regression", "5")
    assert code == 0, err


def test_names_and_unknown_workloads(tmp_path, capsys):
    ids = _history(tmp_path, n=4)
    code, _, _ = _cli(tmp_path, capsys, ids[0], "--name", "nightly-rw")
    assert code == 0
    code, out, _ = _cli(tmp_path, capsys, "nightly-rw", "--json")
    assert code == 0 and json.loads(out)["name"] == "nightly-rw"
    code, _, err = _cli(tmp_path, capsys, "no-such-thing")
    assert code == 2 and "no workload or run 'no-such-thing'" in err


def test_annotate_keeps_the_event(tmp_path, capsys):
    # A port nothing listens on: another stack on this machine must not receive the test's note.
    code = cli.main(["annotate", "--state-dir", str(tmp_path), "--prometheus-port", str(free_port()),
                     "firmware 2.1", "--run", "r1"])
    _, err = capsys.readouterr()
    assert code == 0 and "not on the dashboards yet" in err  # no stack here: kept, said
    (event,) = events.read_annotations(events.history_dir(str(tmp_path)))
    assert event["text"] == "firmware 2.1" and event["run_id"] == "r1"


def test_the_index_follows_changes_and_old_run_directories_still_open(tmp_path):
    runs_dir, hdir = str(tmp_path / "runs"), str(tmp_path / "history")
    ids = _history(tmp_path, n=3)
    idx = index.Index(runs_dir, hdir)
    assert [e.run_id for e in idx.entries()] == ids
    assert os.path.exists(os.path.join(hdir, index.INDEX))
    run = rundir.RunDir(os.path.join(runs_dir, ids[1]))
    outcome.write(run, {"version": 1, "tps": 1.0})
    os.utime(run.file(outcome.SUMMARY), ns=(1, 1))  # a changed file: another mtime
    assert idx.entries()[1].value("tps") == 1.0
    old = rundir.create_run_dir(runs_dir, "20200101T000000Z-abcd")  # an old id, no summary.json, no settings
    old.write_meta({"run_id": old.run_id, "state": rundir.FINISHED})
    assert idx.entries()[0].run_id == old.run_id


def test_what_changed_between_two_runs():
    a = {"tool": "pgbench", "server_version": "17.2", "argv": ["pgbench", "-c", "4"],
         "server_settings": {"wal_compression": "off", "work_mem": "4096 kB"},
         "host": {"kernel": "6.1", "cpus": 2}, "data_filesystem": {"type": "ext4", "mount_options": "rw,relatime"}}
    b = {**a, "server_version": "17.3", "server_settings": {"wal_compression": "lz4"},
         "host": {"kernel": "6.1", "cpus": 4}, "data_filesystem": {"type": "ext4", "mount_options": "rw,noatime"}}
    assert changed.diff(a, b) == {"server_version": ["17.2", "17.3"], "wal_compression": ["off", "lz4"],
                                  "work_mem": ["4096 kB", changed.DEFAULT], "cpus": [2, 4],
                                  "mount_options": ["rw,relatime", "rw,noatime"]}
    imported = {"tool": "pgbench", "mode": "import"}  # knows none of it: nothing is said to change
    assert changed.diff(imported, b) == {}


def test_where_the_server_listens_is_no_change():
    """Runs pooled over hosts (history --all-hosts) come from servers on other ports and sockets: not a change in how
    they run, so left out of what changed (the engine's address_settings, as report --comment leaves them out)."""
    a = {"tool": "pgbench", "engine": "postgresql",
         "server_settings": {"port": "5432", "unix_socket_directories": "/tmp/a", "synchronous_commit": "off"}}
    b = {**a, "server_settings": {"port": "6432", "unix_socket_directories": "/tmp/b", "synchronous_commit": "on"}}
    assert changed.diff(a, b) == {"synchronous_commit": ["off", "on"]}


@pytest.mark.parametrize("metric", sorted(outcome.METRICS))
def test_every_metric_has_a_direction(metric):
    assert outcome.METRICS[metric][1] in (1, -1)


def test_import_places_each_file_at_its_own_time(tmp_path, capsys, monkeypatch):
    """import FILE… of many saved outputs: each at its own time, by its timestamps, its name or its mtime,
    saying which; the imported runs make a history."""
    from benchwatch.record import importer
    from benchwatch.sink import remote_write

    monkeypatch.setattr(remote_write.RemoteWriter, "send", lambda self, samples: None)
    fixtures = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "pgbench")
    with open(os.path.join(fixtures, "pg15_plain.stderr"), "rb") as f:
        plain = f.read()
    with open(os.path.join(fixtures, "pg15_plain.stdout"), "rb") as f:
        plain += f.read()
    with open(os.path.join(fixtures, "pg15_progress_timestamp.stderr"), "rb") as f:
        stamped = f.read()
    named = [tmp_path / f"nightly-2026-01-0{d}T02:00:00.log" for d in (1, 2, 3)]
    for p in named:
        p.write_bytes(plain)
    by_mtime = tmp_path / "undated.log"
    by_mtime.write_bytes(plain)
    os.utime(by_mtime, (1_790_000_000, 1_790_000_000))
    by_stamps = tmp_path / "stamped.log"
    by_stamps.write_bytes(stamped)
    state = tmp_path / "state"
    code = cli.main(["import", "--state-dir", str(state), *map(str, named), str(by_mtime), str(by_stamps)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.count("the date in the file name places") == 3 and "last modified" in err
    assert "placed by its own progress timestamps" in err
    runs = rundir.list_runs(str(state / "runs"))
    placed = {r.read_meta()["source_file"].rsplit("/", 1)[1]: r.read_meta() for r in runs}
    assert placed[named[0].name]["started_at"] == importer.name_date(str(named[0])) == 1767232800.0
    assert placed[named[2].name]["placed_by"] == importer.BY_NAME
    assert placed["undated.log"]["placed_by"] == importer.BY_MTIME
    assert placed["stamped.log"]["placed_by"] == importer.BY_TIMESTAMPS
    code, out, _ = _cli(state, capsys, "--json")
    (mine,) = [w for w in json.loads(out)["workloads"] if w["first"].startswith("2026-01-01")]
    assert mine["runs"] == 4 and mine["last"] >= "2026-01-03"  # the named three and the undated one: one workload


def test_dates_in_file_names():
    from benchwatch.record.importer import name_date

    assert name_date("/x/pgbench-20240105.log") == 1704412800.0
    assert name_date("run_2024-01-05_0230.txt") == 1704412800.0 + 2.5 * 3600
    assert name_date("/r/018_pgbench.txt") is None and name_date("2023-02-30.log") is None


def test_all_hosts_pool_names_accepted_changes_and_annotations_of_every_host(tmp_path):
    """history --all-hosts reads every host's state from the results database's history_state rows: names and
    accepted runs under pooled workload ids, each annotation once; this host's own files first (newest)."""
    from benchwatch.history import events

    own = str(tmp_path / "history")
    events.name(own, "w-a1", "nightly")
    events.accept(own, "w-a1", "run-a7")
    mine = events.annotate(own, "remounted /data noatime", None)
    pooled_of = {"w-a1": "p-1", "w-b1": "p-1", "w-b2": "p-2"}
    states = [
        ("host-b", "names", {"nightly": "w-b2", "tpcb-b": "w-b1"}),  # "nightly" is this host's: its own wins
        ("host-b", "accepted", {"w-b1": ["run-b3"]}),
        ("host-b", "annotations", [{"at": 100.0, "text": "kernel 6.1.0-27"}, mine]),  # mine again: once
        ("host-c", "names", {"pooled-name": "p-2"}),  # a name given under --all-hosts: already pooled
        ("host-c", "accepted", "damaged"),
        ("host-c", "unknown kind", {"x": 1}),
    ]
    shared = events.pool(states, own, pooled_of)
    assert shared.names == {"nightly": "p-1", "tpcb-b": "p-1", "pooled-name": "p-2"}
    assert shared.accepted == {"p-1": ["run-a7", "run-b3"]}
    assert [e["text"] for e in shared.annotations] == ["kernel 6.1.0-27", "remounted /data noatime"]


def test_the_history_gate_reads_what_differs_and_the_dips_by_cause_through_its_readers():
    """--all-hosts: the runs compared may be another host's, not in this runs directory: the gate reads their
    meta.json and stability profile through gate.history.Runs (the results database's, in the command)."""
    from benchwatch.gate import history as history_gate

    values = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 800.0, 805.0, 795.0]
    result = {"metric": "tps", "workload": "p-1", "runs": [{"run_id": f"r{i}", "value": v} for i, v in enumerate(values)],
              "change_points": [], "baseline": None}
    metas = {"r5": {"settings": {"shared_buffers": "128MB"}, "hostname": "host-b"},
             "r6": {"settings": {"shared_buffers": "16MB"}, "hostname": "host-c"}}
    cause = {"checkpoint": {"dips": 2, "seconds": 4, "lost_transactions": 900}}
    stabilities = {f"r{i}": {"dips_by_cause": cause if i >= 6 else {}} for i in range(9)}
    asked: list[str] = []

    def meta(run_id):
        asked.append(run_id)
        return metas.get(run_id, {})

    out = history_gate.assess(result, 5, 3, history_gate.Runs(meta, stabilities.get),
                              [{"at": 1.0, "text": "an old note"}])
    assert out["failed"] and out["comparison"]["kind"] == "latest runs", out
    assert asked == ["r5", "r6"] and out["changed"]["from_run"] == "r5" and out["changed"]["to_run"] == "r6"
    assert "shared_buffers" in json.dumps(out["changed"]["what"]), out["changed"]
    assert out["dips_by_cause"], out
