"""A sweep's variant servers watched as targets of their own (issue 29): the evidence of a run reads the
target that served it, the report's why_scope says what of each side could be read, and a server idle
during another's run is checkpointed before it."""

from __future__ import annotations

import pytest

from benchwatch import engines, evidence
from benchwatch.engines import HOST_ONLY, SERVER_AND_HOST
from benchwatch.experiment import plan as plans
from benchwatch.experiment import spec
from benchwatch.experiment.scope import why_scope
from tests.unit.test_experiment import make_sweep


def test_a_signal_reads_the_target_that_served_the_run():
    promql = "sum(increase(pg_stat_wal_wal_sync{target}[{w}]))"
    assert evidence.with_target(promql, "sweep-s-pg16") == 'sum(increase(pg_stat_wal_wal_sync{target="sweep-s-pg16"}[{w}]))'
    assert evidence.with_target(promql, 'a"b\\c') == 'sum(increase(pg_stat_wal_wal_sync{target="a\\"b\\\\c"}[{w}]))'
    # A run recorded before says no target: every target's series, summed, as before.
    assert evidence.with_target(promql, None) == "sum(increase(pg_stat_wal_wal_sync[{w}]))"
    assert evidence.run_target({"info": {"sweep": "s", "target": "sweep-s-pg16"}}) == "sweep-s-pg16"
    assert evidence.run_target({"info": {"sweep": "s"}}) is None and evidence.run_target({}) is None


@pytest.mark.parametrize("engine", sorted(engines.load_engines()))
def test_every_server_signal_of_every_engine_is_read_per_target(engine):
    for fields in engines.get(engine).evidence_signals:
        promql = fields[1]
        # Each selector of a server's series is followed by {target}: one "[{w}]" per "{target}[{w}]".
        assert promql.count("[{w}]") == promql.count("{target}[{w}]"), (engine, fields[0])


def test_the_run_evidence_query_carries_the_runs_target():
    asked = []

    def query(prom, promql, at):
        asked.append(promql)
        return [{"metric": {}, "value": [at, "10"]}]

    signals = evidence.signals_for("postgresql")
    meta = {"started_at": 100.0, "ended_at": 110.0, "info": {"target": "sweep-s-pg16"}}
    values = evidence.run_evidence("http://unused", meta, 5.0, signals, query=query)
    assert values["WAL syncs per transaction"] == 2.0
    server = [q for q in asked if "pg_" in q]
    assert server and all('{target="sweep-s-pg16"}[10s]' in q for q in server), server
    assert not any("{target" in q for q in asked if "node_" in q)  # the host's signals are the host's


def variants(*texts):
    return [spec.parse_variant(t) for t in texts]


def test_why_scope_of_each_kind_of_variant():
    base, settings, build, existing = variants("A", "B:x=1", "P:bindir=/b", "D:dsn=host=/tmp")
    assert why_scope([], base, settings).text == SERVER_AND_HOST
    # A sweep recorded before its own servers were watched: the host's signals alone.
    old = why_scope([], base, build)
    assert old.text == HOST_ONLY and old.host_only
    events = [{"event": "watched", "variant": "P", "target": "sweep-s-P", "scope": SERVER_AND_HOST},
              {"event": "watched", "variant": "D", "target": "sweep-s-D",
               "scope": "server (no server log: its logging_collector is off) and host"}]
    assert why_scope(events, base, build) == why_scope(events, build, base)
    assert why_scope(events, base, build).text == SERVER_AND_HOST and not why_scope(events, base, build).host_only
    partial = why_scope(events, build, existing)
    assert partial.text == "server (no server log: its logging_collector is off) and host" and not partial.host_only
    # Resumed: the last time it was watched counts.
    again = [*events, {"event": "watched", "variant": "D", "target": "sweep-s-D", "scope": SERVER_AND_HOST}]
    assert why_scope(again, base, existing).text == SERVER_AND_HOST


class Control:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def before_run(self, checkpoint=True):
        return ["CHECKPOINT"] if checkpoint else []

    def settle(self):
        self.log.append(self.name)
        return ["CHECKPOINT"]


def test_a_server_idle_during_anothers_run_is_checkpointed_before_it(tmp_path):
    sweep, _control, _recorded, _said, sdir = make_sweep(tmp_path, ["pg15_plain"] * 4,
                                                          variants=("A:bindir=/a", "B:bindir=/b"))
    settled: list[str] = []
    controls = {"A": Control("A", settled), "B": Control("B", settled)}
    sweep.hooks.control = lambda v: controls[v.name]
    assert not sweep.run().failed
    order = [sweep.plan.runs[e["index"] - 1].variant for e in sdir.events() if e["event"] == "started"]
    prepared = [e["prepared"] for e in sdir.events() if e["event"] == "started"]
    assert order == ["A", "A", "B", "B"]
    # A's server once before B's first run (after A's runs), none before a run on the server that ran last.
    assert prepared[0] == prepared[1] == ["CHECKPOINT"]
    assert prepared[2] == ["CHECKPOINT on A's server (idle during this run)", "CHECKPOINT"]
    assert prepared[3] == ["CHECKPOINT"] and settled == ["A"]
    assert plans.progress(sdir.events()).done.keys() == {1, 2, 3, 4}


def test_a_sweeps_variant_server_silent_after_its_sweep_is_not_a_failing_target():
    from benchwatch.query.targets import summarize

    now = 10_000.0

    def up(target, last, **extra):
        labels = {"__name__": "up", "job": "postgres", "instance": "127.0.0.1:1", "target": target, "host": "h", **extra}
        return frozenset(labels.items()), (labels, last)

    newest = dict([up("local", now - 1), up("sweep-s-pg16", now - 600, sweep="s"), up("gone", now - 600)])
    values = {newest_key: (labels, 1.0) for newest_key, (labels, last) in newest.items() if last > now - 5}
    listed = {t["target"]: t["healthy"] for t in summarize(newest, values, now)}
    # The sweep's target is over; a target that went silent otherwise is still said.
    assert listed == {"local": True, "gone": False}
    # While its sweep runs it is a target like any other.
    running = dict([up("sweep-s-pg16", now - 1, sweep="s")])
    assert [t["healthy"] for t in summarize(running, {k: (v[0], 1.0) for k, v in running.items()}, now)] == [True]
