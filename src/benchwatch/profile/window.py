"""Any window of a profiled run folded again from its slices, and two windows compared.

A dip against the rest of its run (``explain``): how many samples each group and process took per
second in each, and the database's functions whose share of the database's samples changed most,
self (the function itself on the CPU) and total (it or anything it called). Shares are of the
database's samples, so a function keeps its share when the database as a whole merely slows down;
samples per second say that.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from benchwatch.profile import fold as folding
from benchwatch.profile.recorder import DIR, SLICES, read_summary

TOP_FUNCTIONS = 8
TOP_PROCESSES = 4
MIN_SAMPLES = 20   # fewer database samples in a window say nothing of its functions


@dataclass
class Window:
    """The folded samples of a window: per group, per (group, process), and the database's stacks."""
    seconds: float = 0.0
    groups: Counter = field(default_factory=Counter)
    processes: Counter = field(default_factory=Counter)     # (group, kind or comm) -> samples
    stacks: Counter = field(default_factory=Counter)        # the database's folded stacks -> samples

    @property
    def database(self) -> int:
        return self.groups["database"]

    def functions(self) -> tuple[Counter, Counter]:
        """(self, total) samples per function of the database's stacks; total counts a function once per stack."""
        own: Counter = Counter()
        total: Counter = Counter()
        for stack, n in self.stacks.items():
            frames = stack.split(";")
            own[frames[-1]] += n
            for name in set(frames):
                total[name] += n
        return own, total


class Profile:
    """A run's kept profile: its slices (slice, group, kind, count, stack)."""

    def __init__(self, start: float, slice_s: float, rows: list[tuple[int, str, str, int, str]], summary: dict):
        self.start = start
        self.slice_s = slice_s
        self.rows = rows
        self.summary = summary
        self.last = max((r[0] for r in rows), default=-1)

    @property
    def end(self) -> float:
        return self.start + (self.last + 1) * self.slice_s

    def window(self, inside: Iterable[tuple[float, float]], outside: bool = False) -> Window:
        """The slices within any of ``inside`` (epoch intervals), or, ``outside``, all the others."""
        spans = list(inside)
        out = Window()
        chosen = set()
        for index in range(self.last + 1):
            t0 = self.start + index * self.slice_s
            t1 = t0 + self.slice_s
            within = any(t0 >= a - 1e-6 and t1 <= b + 1e-6 for a, b in spans)
            if within != outside:
                chosen.add(index)
        out.seconds = len(chosen) * self.slice_s
        for index, group, kind, count, stack in self.rows:
            if index not in chosen:
                continue
            out.groups[group] += count
            out.processes[(group, kind)] += count
            if group == "database":
                out.stacks[stack] += count
        return out


def load(run_path: str) -> Profile | None:
    """The run's profile, or None when it was not profiled (or its profile cannot be read)."""
    path = os.path.join(run_path, DIR, SLICES)
    if not os.path.exists(path):
        return None
    try:
        start, slice_s, rows = folding.read_slices(path)
    except (OSError, ValueError, EOFError):
        return None
    return Profile(start, slice_s, rows, read_summary(run_path) or {})


def _rate(n: int, seconds: float) -> float:
    return round(n / seconds, 2) if seconds > 0 else 0.0


def _share(n: int, of: int) -> float:
    return round(n / of, 4) if of else 0.0


def function_changes(a: Window, b: Window, top: int = TOP_FUNCTIONS) -> list[dict]:
    """The functions whose share of the database's samples changed most from ``b`` (the rest) to ``a``."""
    a_self, a_total = a.functions()
    b_self, b_total = b.functions()
    rows = []
    for name in set(a_self) | set(b_self) | set(a_total) | set(b_total):
        row = {"function": name,
               "self": [_share(b_self[name], b.database), _share(a_self[name], a.database)],
               "total": [_share(b_total[name], b.database), _share(a_total[name], a.database)]}
        row["self_change"] = round(row["self"][1] - row["self"][0], 4)
        row["total_change"] = round(row["total"][1] - row["total"][0], 4)
        rows.append(row)
    # Ranked by the larger of the two changes: a function that only calls the one that grew ranks below it
    # on self, beside it on total. Ties: by name, for a stable report.
    # The total share of a function on at least half the stacks on both sides (main, PostgresMain) says how far
    # unwinding reached, not where the work went: it does not rank.
    def weight(r: dict) -> float:
        total = abs(r["total_change"]) if min(r["total"]) < 0.5 else 0.0
        return max(abs(r["self_change"]), total)

    rows.sort(key=lambda r: (-weight(r), r["function"]))
    return [r for r in rows if weight(r) > 0][:top]


def compare_windows(profile: Profile, start: float, end: float) -> dict:
    """A dip [start, end] of a profiled run against the rest of the run: explain's ``profile`` object."""
    dip = profile.window([(start, end)])
    rest = profile.window([(start, end)], outside=True)
    groups = []
    for group in folding.GROUPS:
        groups.append({"group": group, "per_second": [_rate(rest.groups[group], rest.seconds),
                                                      _rate(dip.groups[group], dip.seconds)]})
    movers = []
    for key in set(dip.processes) | set(rest.processes):
        before, during = _rate(rest.processes[key], rest.seconds), _rate(dip.processes[key], dip.seconds)
        if key[0] != "idle":
            movers.append({"group": key[0], "process": key[1], "per_second": [before, during],
                           "change": round(during - before, 2)})
    movers.sort(key=lambda m: (-abs(m["change"]), m["group"], m["process"]))
    out: dict = {
        "window": [round(start, 3), round(end, 3)],
        "seconds": [rest.seconds, dip.seconds],
        "database_samples": [rest.database, dip.database],
        "groups": groups,
        "processes": movers[:TOP_PROCESSES],
        "order": "each pair: [the rest of the run, the dip]",
    }
    if dip.seconds == 0:
        out["functions"] = []
        out["functions_note"] = "the profile covers no whole second of the dip"
    elif min(dip.database, rest.database) < MIN_SAMPLES:
        out["functions"] = []
        out["functions_note"] = (f"too few samples of the database to compare its functions ({dip.database} in the "
                                 f"dip, {rest.database} in the rest; at least {MIN_SAMPLES} each)")
    else:
        out["functions"] = function_changes(dip, rest)
    a_self, _ = dip.functions()
    b_self, _ = rest.functions()
    out["unknown_leaf_share"] = [_share(b_self[folding.UNKNOWN], rest.database),
                                 _share(a_self[folding.UNKNOWN], dip.database)]
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %" if abs(x) < 0.1 else f"{100 * x:.0f} %"


def text_lines(p: dict) -> list[str]:
    """A dip's profile section in words, for explain's text."""
    by = {g["group"]: g["per_second"] for g in p["groups"]}
    db = by.get("database", [0, 0])
    lines = [f"  CPU samples per second, rest of the run → dip: database {db[0]:g} → {db[1]:g}, load generator "
             f"{by.get('load_generator', [0, 0])[0]:g} → {by.get('load_generator', [0, 0])[1]:g}, other "
             f"{by.get('other', [0, 0])[0]:g} → {by.get('other', [0, 0])[1]:g}, idle {by.get('idle', [0, 0])[0]:g} → "
             f"{by.get('idle', [0, 0])[1]:g}"]
    if p["processes"]:
        lines.append("  processes that changed most: " + "; ".join(
            f"{m['process']} ({m['group'].replace('_', ' ')}) {m['per_second'][0]:g} → {m['per_second'][1]:g}/s"
            for m in p["processes"]))
    if p.get("functions_note"):
        lines.append(f"  functions: {p['functions_note']}")
    for f in p.get("functions", [])[:5]:
        lines.append(f"  {f['function']}: self {_pct(f['self'][0])} → {_pct(f['self'][1])}, total "
                     f"{_pct(f['total'][0])} → {_pct(f['total'][1])} of the database's CPU")
    unknown = p.get("unknown_leaf_share") or [0, 0]
    lines.append(f"  samples whose function has no name ([unknown]): {_pct(unknown[0])} → {_pct(unknown[1])} "
                 "of the database's (static functions: the binary's symbols name its exported ones only)")
    return lines
