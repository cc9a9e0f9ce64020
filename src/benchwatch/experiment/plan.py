"""An experiment's directory: ``plan.json`` (what to run, in which order, written once) and ``state.jsonl``
(what happened, one JSON object per line, appended and fsynced), so that a sweep killed at any moment
(kill -9 included) resumes with only what is missing, the interrupted run redone.

Order: each repeat round runs every variant x cell once. ``interleaved`` shuffles each round with a
seed that is printed and recorded (drift over hours favours no variant); cells of one ``--scale`` stay
together within a round, since a scale is a re-initialisation of the tables. ``blocked`` runs each
variant's cells and rounds in turn.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchwatch.experiment.spec import Cell, Variant
from benchwatch.util.private import append_private, write_private

PLAN = "plan.json"
STATE = "state.jsonl"
ORDERS = ("interleaved", "blocked")
FORMAT = 1


@dataclass(frozen=True)
class PlannedRun:
    index: int      # 1-based position in the sweep
    variant: str
    cell: int       # index into Plan.cells
    repeat: int     # round, 1-based

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "variant": self.variant, "cell": self.cell, "repeat": self.repeat}


@dataclass
class Plan:
    name: str
    argv: list[str]
    variants: list[Variant]
    cells: list[Cell]
    repeat: int
    order: str
    seed: int
    runs: list[PlannedRun]
    engine: str
    warmup_s: float = 0.0
    min_effect_pct: float = 2.0
    reinit: str = ""          # "", "cell" (tables made again when the cell changes) or "run" (before every run)
    checkpoint: bool = True
    latency_log: bool = False  # pgbench -l for each run (latency percentiles)
    profile: bool = False  # perf record beside every run, folded before the next starts (benchwatch.profile)
    created_at: float = field(default_factory=time.time)
    originals: dict[str, dict[str, Any]] = field(default_factory=dict)  # setting -> its value before the sweep

    @property
    def baseline(self) -> str:
        return self.variants[0].name

    def variant(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "name": self.name, "argv": self.argv, "engine": self.engine,
                "variants": [v.to_json() for v in self.variants], "cells": [c.to_json() for c in self.cells],
                "repeat": self.repeat, "order": self.order, "seed": self.seed, "warmup_s": self.warmup_s,
                "min_effect_pct": self.min_effect_pct, "reinit": self.reinit, "checkpoint": self.checkpoint,
                "latency_log": self.latency_log, "profile": self.profile,
                "created_at": self.created_at, "originals": self.originals,
                "runs": [r.to_json() for r in self.runs]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Plan:
        return cls(name=d["name"], argv=list(d["argv"]), variants=[Variant.from_json(v) for v in d["variants"]],
                   cells=[Cell.from_json(c) for c in d["cells"]], repeat=int(d["repeat"]), order=d["order"],
                   seed=int(d["seed"]), runs=[PlannedRun(**r) for r in d["runs"]], engine=d["engine"],
                   warmup_s=float(d.get("warmup_s") or 0), min_effect_pct=float(d.get("min_effect_pct", 2.0)),
                   reinit=_reinit(d.get("reinit")), checkpoint=bool(d.get("checkpoint", True)), latency_log=bool(d.get("latency_log")),
                   profile=bool(d.get("profile")),
                   created_at=float(d.get("created_at") or 0), originals=dict(d.get("originals") or {}))


def _reinit(value: Any) -> str:
    if value is True:
        return "run"
    return value if value in ("cell", "run") else ""


def order_runs(variants: list[str], cells: list[Cell], repeat: int, order: str, seed: int) -> list[PlannedRun]:
    """The sweep's runs in the order they run (see the module's docstring)."""
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: use one of {', '.join(ORDERS)}")
    pairs: list[tuple[str, int, int]] = []
    if order == "blocked":
        pairs = [(v, c, r) for v in variants for c in range(len(cells)) for r in range(1, repeat + 1)]
    else:
        rng = random.Random(seed)
        scales: list[int | None] = []
        for cell in cells:
            if cell.scale not in scales:
                scales.append(cell.scale)
        for r in range(1, repeat + 1):
            for scale in scales:
                group = [(v, c, r) for c, cell in enumerate(cells) if cell.scale == scale for v in variants]
                rng.shuffle(group)
                pairs += group
    return [PlannedRun(i, v, c, r) for i, (v, c, r) in enumerate(pairs, 1)]


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


class SweepDir:
    """<state_dir>/sweeps/<name>/: plan.json and state.jsonl."""

    def __init__(self, path: str):
        self.path = path
        # Told of each event once it is on the disk (the sweep's row in the results database: experiment.publish)
        self.listener: Callable[[dict[str, Any]], None] | None = None

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def exists(self) -> bool:
        return os.path.exists(os.path.join(self.path, PLAN))

    def write_plan(self, plan: Plan) -> None:
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        write_private(os.path.join(self.path, PLAN), json.dumps(plan.to_json(), indent=1) + "\n", fsync=True)

    def read_plan(self) -> Plan:
        with open(os.path.join(self.path, PLAN), encoding="utf-8") as f:
            return Plan.from_json(json.load(f))

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """One event, on a line of its own, on the disk before this returns."""
        record = {"event": event, "at": time.time(), **fields}
        append_private(os.path.join(self.path, STATE), json.dumps(record, default=str) + "\n", fsync=True)
        if self.listener is not None:
            self.listener(record)
        return record

    def events(self) -> list[dict[str, Any]]:
        """Every event; a line cut by a kill (the last one, without its newline) is not one."""
        try:
            with open(os.path.join(self.path, STATE), encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in text.split("\n")[:-1] if not text.endswith("\n") else text.splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


@dataclass
class Progress:
    """What the state file says of each planned run: its good run, or its attempts that failed."""

    done: dict[int, str] = field(default_factory=dict)            # index -> run_id of the run that counts
    failed: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # index -> failed attempts
    interrupted: list[int] = field(default_factory=list)           # started, never finished (a kill)

    def missing(self, plan: Plan) -> list[PlannedRun]:
        return [r for r in plan.runs if r.index not in self.done]


def progress(events: list[dict[str, Any]]) -> Progress:
    out = Progress()
    open_runs: dict[int, dict[str, Any]] = {}
    for e in events:
        kind, index = e.get("event"), e.get("index")
        if not isinstance(index, int):
            continue
        if kind == "started":
            open_runs[index] = e
        elif kind == "finished":
            open_runs.pop(index, None)
            if e.get("ok") and index not in out.done:
                out.done[index] = str(e.get("run_id"))
            elif not e.get("ok"):
                out.failed.setdefault(index, []).append(e)
    out.interrupted = sorted(i for i in open_runs if i not in out.done)
    return out


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "ETA unknown"
    return f"ETA {max(1, round(seconds / 60))} min" if seconds >= 30 else "ETA <1 min"


Clock = Callable[[], float]
