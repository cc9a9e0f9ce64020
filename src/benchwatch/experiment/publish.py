"""A sweep to the results database as it runs (table ``sweeps``, docs/results.md): its plan when it starts,
again as each of its runs ends and when it ends, so that ``report NAME`` on any host reads it; and a sweep
read back from the database as the plan and events ``report`` reads from a sweep's directory.

The sweep never waits on the database: each row is left as a pending marker first (a local file:
benchwatch.results.sweeps), then written by a thread of its own. A database that is down is said once;
the marker stays and is written through by the next attempt, the exporter's retry loop included."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchwatch.experiment.plan import Plan, SweepDir, progress
from benchwatch.experiment.report import shown_argv
from benchwatch.results import sweeps as rows
from benchwatch.util import secrets

GIVEN = "(given)"  # a dsn= variant's DSN, as the report describes it
SECRET = "(secret)"
# What of the sweep's state file moves its row: the plan's start, a variant's server watched, a run's end, its end.
PUBLISHED_EVENTS = frozenset({"planned", "watched", "finished", "completed", "ended"})
# How long the sweep's end waits for its last row when the database answered before (a database that did not
# answer is not waited on: the marker stays for the exporter).
CLOSE_WAIT_S = 10.0


def needles(plan: Plan, stack_secrets: list[str]) -> list[str]:
    """What must not leave the host in the row: the stack's secrets, every dsn= variant's DSN whole, and the values
    of the settings that are secrets (as a variant sets them and as they were: the state file's "settings
    applied" lines quote them)."""
    values = [*stack_secrets, *(v.dsn for v in plan.variants if v.dsn)]
    values += [x for v in plan.variants for k, x in v.settings.items() if _secret_setting(k)]
    values += [str(x) for k, facts in plan.originals.items() if _secret_setting(k) and isinstance(facts, dict)
               for x in facts.values() if isinstance(x, str)]
    # the longest first: a secret inside another is replaced as part of it
    return sorted({s for s in values if s and len(s) >= 4}, key=len, reverse=True)


def _scrub(value: Any, hidden: list[str]) -> Any:
    if isinstance(value, str):
        for s in hidden:
            value = value.replace(s, SECRET)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, hidden) for v in value]
    return value


def public_plan(plan: Plan, hidden: list[str]) -> dict[str, Any]:
    """plan.json as it may leave the host: a dsn= variant's DSN as "(given)", the tool's arguments as the report
    shows them, secret settings redacted, any other occurrence of a secret as "(secret)"."""
    data = plan.to_json()
    data["argv"] = shown_argv(plan.argv)
    for v in data["variants"]:
        if v.get("dsn"):
            v["dsn"] = GIVEN
        if v.get("settings"):
            v["settings"] = secrets.redact_settings(v["settings"])
    data["originals"] = {k: ({f: "<redacted>" if isinstance(x, str) else x for f, x in facts.items()}
                             if _secret_setting(k) else facts)
                         for k, facts in (data.get("originals") or {}).items() if isinstance(facts, dict)}
    return _scrub(data, hidden)


def _secret_setting(name: str) -> bool:
    return secrets.redact_settings({name: "x"})[name] != "x"


def sweep_row(plan: Plan, events: list[dict[str, Any]], host: str, state: str, hidden: list[str]) -> dict[str, Any]:
    """The sweep's ``sweeps`` row (benchwatch.results.sweeps.COLUMNS), JSON-able, without secrets."""
    done = progress(events).done
    public = public_plan(plan, hidden)
    return {"host": host, "sweep": plan.name, "state": state, "tool": public["argv"][0] if public["argv"] else None,
            "engine": plan.engine, "baseline": plan.baseline,
            "variants": [{"name": v["name"], "what": describe(v)} for v in public["variants"]],
            "cells": [c.name for c in plan.cells], "repeat": plan.repeat, "runs_planned": len(plan.runs),
            "runs_done": len(done), "run_ids": list(done.values()), "plan": public,
            "events": _scrub(json.loads(json.dumps(events, default=str)), hidden), "created_at": plan.created_at}


def describe(variant_json: dict[str, Any]) -> str:
    from benchwatch.experiment.spec import Variant

    return Variant.from_json(variant_json).describe


@dataclass
class Stored:
    """A sweep read back from the database: what ``report`` reads of a sweep's directory."""

    host: str
    state: str
    plan: Plan
    events: list[dict[str, Any]]


def stored(row: dict[str, Any]) -> Stored:
    return Stored(str(row["host"]), str(row["state"]), Plan.from_json(row["plan"]), list(row["events"] or []))


class Publisher:
    """Writes one sweep's row as it runs, from a thread of its own (see the module's docstring)."""

    def __init__(self, sdir: SweepDir, plan: Plan, host: str, dsn: str, state_dir: str, stack_secrets: list[str],
                 say: Callable[[str], None]):
        from benchwatch.results.store import Store

        self.sdir, self.plan, self.host, self.say = sdir, plan, host, say
        self.hidden = needles(plan, stack_secrets)
        self.pending = rows.PendingSweeps(state_dir)
        self.store = Store(dsn)
        self.state = rows.RUNNING
        self.failing = False  # the last attempt failed (said once)
        self._said = False
        self._latest: dict[str, Any] | None = None
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweep-results")
        self._thread.start()

    def event(self, record: dict[str, Any]) -> None:
        """SweepDir's listener: a row again when an event moves it."""
        if record.get("event") in PUBLISHED_EVENTS:
            self.update()

    def update(self, state: str | None = None) -> None:
        """The sweep as its directory says now, left as a marker and handed to the writer; never raises."""
        if state is not None:
            self.state = state
        try:
            row = sweep_row(self.plan, self.sdir.events(), self.host, self.state, self.hidden)
            self.pending.mark(row)
        except Exception as e:  # a full disk: the sweep goes on, its directory is the truth
            self._say_once(f"its row could not be prepared ({type(e).__name__}: {e})")
            return
        with self._cond:
            self._latest = row
            self._cond.notify_all()

    def _say_once(self, why: str) -> None:
        if not self._said:
            self._said = True
            self.say(f"sweep {self.plan.name}: not written to the results database yet: {why}; the sweep goes on, "
                     "and its plan is written once the database answers (benchwatch's exporter retries)")

    def _loop(self) -> None:
        while True:
            with self._cond:
                while self._latest is None and not self._closing:
                    self._cond.wait()
                row, self._latest = self._latest, None
                if row is None:
                    return
            try:
                self.store.write_sweep(row)
                self.pending.clear(row)
                self.failing = False
            except Exception as e:  # psycopg.OperationalError (down), RuntimeError (newer schema): kept pending
                self.store.close()
                self.failing = True
                from benchwatch.results.dsn import public

                error = f"{type(e).__name__}: {str(e).strip()[:300]}"
                try:
                    self.pending.failed(row, error)
                except OSError:
                    pass
                self._say_once(f"the results database ({public(self.store.dsn)}): {error}")

    def close(self, state: str) -> bool:
        """The sweep's last row (``state``), waited for at most CLOSE_WAIT_S unless the database was failing;
        whether it was written."""
        self.update(state)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if not self.failing:
            self._thread.join(CLOSE_WAIT_S)
        if self._thread.is_alive():
            return False  # still writing: the marker is there for the exporter, the thread ends with the process
        self.store.close()
        return not self.failing
