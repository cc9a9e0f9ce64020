"""The causes of a dip as scorers: one registry that refuses a name twice, explain's own and each engine's
from its folder, and evidence that names the run's own tool."""

from __future__ import annotations

import pytest

from benchwatch import causes as kit
from benchwatch import engines
from benchwatch.explain import causes, report
from tests.unit.test_explain import META, T0, gauge, run_with_dip


def test_the_registry_refuses_a_cause_scored_twice():
    class Stall(kit.Scorer):
        name = "client_stall"

    reg = kit.Registry()
    reg.add(Stall())
    with pytest.raises(kit.DuplicateScorer, match="'client_stall' is scored twice"):
        reg.add(Stall())
    with pytest.raises(kit.DuplicateScorer):
        causes.registry().add(Stall())  # explain's own client_stall is there already


def test_each_engines_causes_are_scored_from_its_own_folder():
    scorers = {s.name: s for s in causes.registry()}
    own = set(causes.NEUTRAL) | set(causes.HOST) | {"target_down", "lock"}  # explain's, fed by each engine
    for s in scorers.values():
        where = type(s).__module__
        if s.name in own:
            assert where.startswith("benchwatch.explain."), (s.name, where)
    for e in engines.load_engines().values():
        assert e.cause_modules, e.name
        for signal in set(e.explain_signals) - own:
            assert type(scorers[signal]).__module__.startswith(type(e).__module__ + "."), (signal, e.name)
    # explain_signals still lists every cause an engine brings (its 'absent' reporting reads it)
    assert set(scorers) == own | {s for e in engines.load_engines().values() for s in e.explain_signals}


def test_every_scorer_reads_series_that_are_fetched():
    fetched = set(causes.selectors())
    for s in causes.registry():
        assert {n for n in s.needs if not n.startswith("benchmark_progress_")
                and n != "benchmark_aborted_clients_total"} <= fetched, s.name


@pytest.mark.parametrize("tool, title", [("gotpc", "go-tpc"), ("goycsb", "go-ycsb"), ("sysbench", "sysbench"), ("pgbench", "pgbench")])
def test_a_silence_names_the_runs_own_tool(tool, title):
    tps = gauge("benchmark_progress_tps", {"run_id": "r"},
                [(T0 + t, 500.0) for t in range(1, 11)] + [(T0 + 15, 100.0)] + [(T0 + t, 500.0) for t in range(16, 31)])
    result = report.explain([tps, *run_with_dip()[1:]], {**META, "tool": tool}, "r")
    (d,) = result["dips"]
    assert d["cause"] == "client_stall" and d["evidence"] == f"no progress line from {title} for 5.0 s", d


def test_the_lock_waiter_is_the_statement_the_lock_waits_query_saw():
    """Under load tpcb-like's UPDATE of its one pgbench_branches row waits on row locks in the same seconds as
    the UPDATE pgbench_tellers a LOCK TABLE holds (seen in CI): the waiter named in the details is the one the
    lock-waits query saw, as the evidence says, not the one with more lock samples."""
    from benchwatch.engines.postgresql.statement_causes import _lock_waiter

    def entry(text: str, queryid: str, lock_share: float, calls: float) -> dict:
        return {"text": text, "queryid": queryid, "usual_s": 0.0001, "dip_s": 0.0002, "lock_event": "transactionid",
                "lock_share": lock_share, "spent": 0.1, "calls": calls, "longest_s": 4.0, "in_flight": 2.0}

    tellers = entry("UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2", "1", 0.4, 10)
    branches = entry("UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2", "2", 0.9, 300)
    stmt = {"statement": "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2", "wait_event": "relation",
            "blocker": "idle in transaction: LOCK TABLE pgbench_tellers", "blocker_pid": 42}
    assert _lock_waiter([tellers, branches], stmt)["queryid"] == "1"
    # Without the lock-waits query's statement, the statement most in flight on a lock.
    assert _lock_waiter([tellers, branches], None)["queryid"] == "2"


def test_the_lock_waiter_was_in_flight_as_long_as_any_session_of_its_text():
    """The sessions held by the lock may be under another queryid (or none yet) than the entry with counters
    (seen in CI: 0.9 s in flight named for a 6 s LOCK TABLE): how long they were at it is the longest of
    every entry of the waiter's text."""
    from benchwatch.engines.postgresql.statement_causes import _lock_waiter

    text = "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2"
    counted = {"text": text, "queryid": "1", "usual_s": 0.0001, "dip_s": 0.0002, "lock_event": "relation",
               "lock_share": 0.5, "spent": 0.1, "calls": 10, "longest_s": 0.9, "in_flight": 1.0}
    uncounted = {"text": text, "queryid": "0", "usual_s": None, "dip_s": None, "lock_event": "relation",
                 "lock_share": 0.9, "spent": 0.0, "calls": 0, "longest_s": 6.1, "in_flight": 3.0}
    stmt = {"statement": text, "wait_event": "relation", "blocker": "idle in transaction: LOCK TABLE pgbench_tellers",
            "blocker_pid": 42}
    for given in (stmt, None):
        waiter = _lock_waiter([counted, uncounted], given)
        assert waiter["queryid"] == "1" and waiter["longest_s"] == 6.1, waiter
