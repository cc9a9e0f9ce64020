"""A sweep's row in the results database (experiment.publish, results.sweeps): what it holds and hides, the
report another host makes of it, its pending markers, and a sweep that goes on while the database is down
(a closed port of 127.0.0.1: a real refusal). The database side is tests/integration/test_sql_panels.py's."""

from __future__ import annotations

import json
import os
import time

from benchwatch.experiment import plan as plans
from benchwatch.experiment import publish, report, spec
from benchwatch.results import sweeps as rows
from benchwatch.results.dsn import local
from benchwatch.util import net

DSN = "host=db.example port=5432 dbname=bench user=bench password=hunter2-dsn"
STACK_SECRET = "s3cret-of-the-stack"


def _plan(secret_settings: bool = True) -> plans.Plan:
    vs = spec.parse_variants(["base", f"other:dsn={DSN}", f"warm:before=psql -c 'select 1' # {STACK_SECRET}",
                              "tuned:synchronous_commit=off" + (",ssl_passphrase_command=echo x" if secret_settings else "")])
    cells = [spec.Cell(1), spec.Cell(4)]
    return plans.Plan("pr", ["/usr/bin/pgbench", "-T", "5", "host=h password=in-argv"], vs, cells, 2, "blocked", 7,
                      plans.order_runs([v.name for v in vs], cells, 2, "blocked", 7), "postgresql",
                      originals={"ssl_passphrase_command": {"value": "echo old", "restart": True},
                                 "synchronous_commit": {"value": "on", "restart": False}})


def _events(p: plans.Plan, done: int) -> list[dict]:
    out = [{"event": "planned", "at": 1.0, "runs": len(p.runs), "seed": p.seed},
           {"event": "watched", "at": 1.5, "variant": "other", "target": "sweep-pr-other", "scope": f"server {DSN}"}]
    tuned = p.variant("tuned").settings
    out += [{"event": "settings_applying", "at": 1.6, "variant": "tuned", "settings": tuned},
            {"event": "settings_applied", "at": 1.7, "variant": "tuned",
             "done": [f"ALTER SYSTEM SET {k} = '{v}'" for k, v in tuned.items()]}]
    for run in p.runs[:done]:
        tps = 1000.0 * (0.8 if run.variant == "other" else 1.0) + run.repeat + run.cell
        out.append({"event": "started", "at": 2.0, "index": run.index, "attempt": 1, "prepared": ["CHECKPOINT"]})
        out.append({"event": "finished", "at": 3.0, "index": run.index, "attempt": 1, "ok": True,
                    "run_id": f"run-{run.index:02d}", "figures": {"run_id": f"run-{run.index:02d}", "tps": tps,
                                                                  "latency_avg_s": 1 / tps}})
    return out


def test_the_row_holds_the_plan_without_a_secret():
    p = _plan()
    events = _events(p, 5)
    row = publish.sweep_row(p, events, "bench-1", rows.RUNNING, publish.needles(p, [STACK_SECRET]))
    text = json.dumps(row)
    assert "ssl_passphrase_command" in text  # (the events with the secret settings are in it)
    for secret in ("hunter2-dsn", DSN, STACK_SECRET, "in-argv", "echo old", "echo x"):
        assert secret not in text, secret
    assert set(row) == set(rows.COLUMNS)
    assert (row["host"], row["sweep"], row["state"], row["tool"], row["engine"], row["baseline"]) == \
        ("bench-1", "pr", "running", "pgbench", "postgresql", "base")
    assert row["variants"][1] == {"name": "other", "what": "dsn=(given)"}
    assert row["plan"]["variants"][1]["dsn"] == "(given)"
    assert row["plan"]["variants"][3]["settings"] == {"synchronous_commit": "off", "ssl_passphrase_command": "<redacted>"}
    assert row["plan"]["originals"]["synchronous_commit"] == {"value": "on", "restart": False}
    assert row["cells"] == ["clients=1", "clients=4"] and row["repeat"] == 2
    assert (row["runs_planned"], row["runs_done"]) == (16, 5)
    assert row["run_ids"] == [f"run-{i:02d}" for i in range(1, 6)]  # as they finished
    assert row["events"][1]["scope"] == "server (secret)"
    json.dumps(row, allow_nan=False)  # JSON as it is, for jsonb


def test_another_hosts_report_of_the_row_is_the_same():
    """What report builds from the row read back (plan and events) equals what it builds from the directory
    (but for a secret setting's value, which the row does not carry: test above)."""
    p = _plan(secret_settings=False)
    events = _events(p, len(p.runs))
    row = json.loads(json.dumps(publish.sweep_row(p, events, "bench-1", rows.COMPLETED, publish.needles(p, []))))
    back = publish.stored(row)
    assert (back.host, back.state) == ("bench-1", "completed")
    here = report.build(p, events, report.collect(p, events, "/nonexistent"))
    there = report.build(back.plan, back.events, report.collect(back.plan, back.events, "/nonexistent"))
    assert there["differences"] == here["differences"] and there["cells"] == here["cells"]
    assert here["differences"][0]["verdict"] == "slower"  # the check can fail: there is a verdict to keep
    # the report's own account of the plan too: variants described, argv shown, runs
    assert {k: there[k] for k in ("variants", "argv", "tool", "runs", "seed", "repeat", "between_runs")} == \
        {k: here[k] for k in ("variants", "argv", "tool", "runs", "seed", "repeat", "between_runs")}


def test_a_pending_marker_is_cleared_only_by_the_row_it_holds(tmp_path):
    pending = rows.PendingSweeps(str(tmp_path))
    older = {"sweep": "pr", "host": "h", "runs_done": 1}
    newer = {"sweep": "pr", "host": "h", "runs_done": 2}
    pending.mark(older)
    pending.mark(newer, "OperationalError: down")
    assert pending.names() == ["pr"] and pending.row("pr") == newer
    assert pending.summary() == {"pending_sweeps": 1, "sweeps_last_error": "OperationalError: down"}
    assert not pending.clear(older)  # written late: the newer row still waits
    assert pending.names() == ["pr"]
    assert pending.clear(newer) and pending.names() == [] and pending.summary()["pending_sweeps"] == 0
    assert oct(os.stat(pending.dir).st_mode & 0o777) == "0o700"


def test_a_sweep_name_may_name_its_host():
    assert rows.split_name("pr") == ("pr", None)
    assert rows.split_name("pr@bench-2") == ("pr", "bench-2")
    assert rows.split_name("pr@ci.runner@x") == ("pr", "ci.runner@x")


def test_a_database_that_is_down_neither_stops_nor_slows_the_sweep(tmp_path):
    """A closed port: each event still returns at once, the refusal is said once, the latest row waits as a
    marker, and the sweep's end does not wait on the database."""
    state = str(tmp_path / "state")
    p = _plan()
    sdir = plans.SweepDir(os.path.join(state, "sweeps", p.name))
    sdir.write_plan(p)
    said: list[str] = []
    pgpass = tmp_path / "pgpass"
    pgpass.write_text("*:*:*:*:x\n")
    pgpass.chmod(0o600)
    publisher = publish.Publisher(sdir, p, "bench-1", local(net.free_port(), str(pgpass)), state, [], said.append)
    sdir.listener = publisher.event
    publisher.update()
    for e in _events(p, 4):
        sdir.append(e.pop("event"), **{k: v for k, v in e.items() if k != "at"})
    started = time.monotonic()
    assert publisher.close(rows.INTERRUPTED) is False
    print(f"the sweep's end with the database down: {time.monotonic() - started:.3f} s")
    assert len(said) == 1 and "not written to the results database yet" in said[0] and "the sweep goes on" in said[0]
    pending = rows.PendingSweeps(state)
    row = pending.row(p.name)
    assert row is not None and row["state"] == "interrupted" and row["runs_done"] == 4
    assert pending.summary()["pending_sweeps"] == 1
