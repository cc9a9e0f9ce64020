"""Profiles of runs compared as groups: a sweep's variant against its baseline, per cell (``report``).

Each run's share of the database's CPU samples per function, self (the function on the CPU) and total
(it or anything it called), over the whole run; per function, the variant's mean share less the
baseline's, with a 95 % Welch t interval over the repeats (each run one value). Ranked by how much the
share changed (the total share of a function on at least half the stacks on both sides left out: it
says how far unwinding reached); the text names the top changes in words ("`XLogFlush` 31 % → 2 % of the database's CPU").
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from benchwatch.profile import window
from benchwatch.util import stattools

TOP = 10
WORDS = 3
ANCESTOR_SHARE = 0.5
MIN_DATABASE_SAMPLES = 50   # a run with fewer database samples says nothing of its functions' shares


def run_shares(run_path: str) -> dict | None:
    """{"samples": database samples, "self": {function: share}, "total": {function: share}} of a profiled run."""
    profile = window.load(run_path)
    if profile is None:
        return None
    whole = profile.window([(profile.start, profile.end)])
    if whole.database < MIN_DATABASE_SAMPLES:
        return {"samples": whole.database, "self": {}, "total": {}}
    own, total = whole.functions()
    n = whole.database
    return {"samples": n, "self": {f: c / n for f, c in own.items()}, "total": {f: c / n for f, c in total.items()}}


def _interval(a: Sequence[float], b: Sequence[float]) -> list[float] | None:
    """95 % Welch t interval of mean(b) - mean(a); None with fewer than two runs on a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.mean(b) - statistics.mean(a)
    se = (va + vb) ** 0.5
    if se == 0:
        return [diff, diff]
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if len(a) > 1 else 0) + (vb ** 2 / (len(b) - 1) if len(b) > 1 else 0))
    half = stattools.t_ppf(0.975, df) * se
    return [diff - half, diff + half]


def compare(baseline: Sequence[dict], variant: Sequence[dict], top: int = TOP) -> list[dict]:
    """The functions whose share of the database's samples changed most from the baseline's runs to the variant's
    (each a run_shares()); for each: measure (self or total), the mean shares, the change and its interval."""
    a = [r for r in baseline if r["self"]]
    b = [r for r in variant if r["self"]]
    if not a or not b:
        return []
    rows = []
    for measure in ("self", "total"):
        names: Counter = Counter()
        for r in (*a, *b):
            names.update(r[measure].keys())
        for name in names:
            va = [r[measure].get(name, 0.0) for r in a]
            vb = [r[measure].get(name, 0.0) for r in b]
            change = statistics.mean(vb) - statistics.mean(va)
            if abs(change) < 0.0005:
                continue
            ci = _interval(va, vb)
            rows.append({"function": name, "measure": measure, "baseline": round(statistics.mean(va), 4),
                         "variant": round(statistics.mean(vb), 4), "change": round(change, 4),
                         "change_ci": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
                         "excludes_zero": bool(ci and (ci[0] > 0 or ci[1] < 0))})
    # The total share of a function on most stacks (main, PostgresMain: at least half on both sides) says how
    # far DWARF unwinding reached (an 8 KiB stack copy stops short of main under a deep or large frame), not
    # where the work went: left out.
    ancestors = [r for r in rows if r["measure"] == "total" and min(r["baseline"], r["variant"]) >= ANCESTOR_SHARE]
    rows = [r for r in rows if r not in ancestors]
    # A function's self and total change alike when it calls nothing: shown once, as self.
    seen: set[tuple[str, float]] = set()
    ranked = []
    for row in sorted(rows, key=lambda r: (-abs(r["change"]), r["measure"] != "self", r["function"])):
        key = (row["function"], round(row["change"], 3))
        if key in seen:
            continue
        seen.add(key)
        ranked.append(row)
    return ranked[:top]


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %" if abs(x) < 0.1 else f"{100 * x:.0f} %"


def words(row: dict) -> str:
    """One change in words: "`XLogFlush` 31 % → 2 % of the database's CPU (total; 95 % interval of the
    change −33 to −25 points)"."""
    ci = row.get("change_ci")
    sure = (f"95 % interval of the change {100 * ci[0]:+.1f} to {100 * ci[1]:+.1f} points" if ci
            else "one run a side: no interval")
    return (f"`{row['function']}` {_pct(row['baseline'])} → {_pct(row['variant'])} of the database's CPU "
            f"({row['measure']}; {sure})")


def report_part(groups: Sequence[dict]) -> dict:
    """The report's ``profile`` key from its comparisons: each {"variant", "cell", "baseline_runs": [paths],
    "variant_runs": [paths]}; what was done (every repeat profiled) is said in ``method``."""
    out = []
    for g in groups:
        base = [s for p in g["baseline_runs"] if (s := run_shares(p)) is not None]
        var = [s for p in g["variant_runs"] if (s := run_shares(p)) is not None]
        if not base or not var:
            continue
        functions = compare(base, var)
        named, said = [], set()
        for r in functions:  # [unknown], [other stacks]: no name; a function said once, at its larger change
            if not r["function"].startswith("[") and r["function"] not in said:
                said.add(r["function"])
                named.append(r)
        out.append({"variant": g["variant"], "cell": g["cell"], "profiled_runs": [len(base), len(var)],
                    "database_samples": [sum(s["samples"] for s in base), sum(s["samples"] for s in var)],
                    "functions": functions, "words": [words(r) for r in named[:WORDS]]})
    return {"method": "every repeat profiled (sweep --profile); shares of the database's CPU samples over each whole "
                      "run, the variant's mean less the baseline's with a 95 % Welch t interval over the repeats",
            "differences": out}


def pooled_stacks(run_paths: Sequence[str]) -> Counter:
    """The database's folded stacks over whole runs, each run weighed as one (its stacks as shares of its
    own database samples, scaled to a million), so a longer or busier repeat does not outweigh the others."""
    pooled: Counter = Counter()
    for path in run_paths:
        profile = window.load(path)
        if profile is None:
            continue
        whole = profile.window([(profile.start, profile.end)])
        if whole.database < MIN_DATABASE_SAMPLES:
            continue
        for stack, n in whole.stacks.items():
            pooled[stack] += round(1_000_000 * n / whole.database)
    return pooled


def flame_graphs(groups: Sequence[dict], baseline: str) -> list[tuple[str, str]]:
    """(name, SVG) per comparison of ``report_part``'s groups: a differential flame graph of the database's
    CPU, frames as wide as the variant's samples, red where a frame's share grew against the baseline's
    runs, blue where it fell; none for a side without a usable profile."""
    from benchwatch.profile import flamegraph

    out = []
    for g in groups:
        base, var = pooled_stacks(g["baseline_runs"]), pooled_stacks(g["variant_runs"])
        if not base or not var:
            continue
        where = f"{g['variant']} at {g['cell']}" if g.get("cell") else g["variant"]
        svg = flamegraph.diff_svg(base, var, f"{where} against {baseline}: the database's CPU "
                                  f"({len(g['baseline_runs'])} and {len(g['variant_runs'])} runs, each weighed as one)",
                                  baseline, g["variant"])
        if svg:
            out.append((where, svg))
    return out


def text_lines(part: dict) -> list[str]:
    lines = []
    for d in part.get("differences", []):
        where = f"{d['variant']} at {d['cell']}" if d.get("cell") else d["variant"]
        if not d["words"]:
            lines.append(f"{where}: no function's share of the database's CPU changed")
            continue
        lines.append(f"{where}, where the database's CPU went against the baseline: " + "; ".join(d["words"]))
    return lines
