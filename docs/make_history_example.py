#!/usr/bin/env python3
"""The worked example of docs/history.md, from real runs, and its picture.

    .venv/bin/python docs/make_history_example.py

Starts a throwaway stack, runs 12 pgbench runs of 3 s (one client) on the embedded server, the last 6 with
commit_delay = 10 ms (commit_siblings = 0 from the start), records an annotation between them, then keeps
what ``benchwatch history`` says (text, --json, --fail-on-regression) in docs/history/example.txt and
example.json and draws docs/history/history.png: one point per run, the change point with its step and
interval, what changed.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)  # for tests.helpers

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from tests.helpers import throwaway

OUT = os.path.join(HERE, "history")


def main() -> int:
    live = throwaway.start(scale=1)
    shown: list[str] = []

    def bw(*args: str, show: bool = True):
        r = live.benchwatch(*args)
        if show:
            shown.append(f"$ benchwatch {' '.join(args)}    # exit {r.returncode}")
            shown.extend(r.stdout.decode().splitlines())
            shown.extend(line for line in r.stderr.decode().splitlines() if line.startswith("benchwatch: "))
            shown.append("")
        return r

    try:
        live.psql("ALTER SYSTEM SET commit_siblings = 0")
        live.psql("SELECT pg_reload_conf()")
        for i in range(12):
            if i == 6:
                bw("annotate", "raised commit_delay to 10 ms")
                live.psql("ALTER SYSTEM SET commit_delay = 10000")
                live.psql("SELECT pg_reload_conf()")
            bw("run", "--", "pgbench", "-c", "1", "-T", "3", "-P", "1", show=False)
        last = sorted(os.listdir(os.path.join(live.state_dir, "runs")))[-1]
        bw("history")
        got = json.loads(bw("history", last, "--name", "nightly-c1", "--json", show=False).stdout)
        bw("history", "nightly-c1")
        bw("history", "nightly-c1", "--fail-on-regression", "5")
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "example.json"), "w", encoding="utf-8") as f:
            json.dump(got, f, indent=2)
            f.write("\n")
        with open(os.path.join(OUT, "example.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(shown).replace(live.state_dir, "~/.local/state/benchwatch") + "\n")
        draw(got, os.path.join(OUT, "history.png"))
    finally:
        live.close()
    return 0


def draw(got: dict, path: str) -> None:
    values = [r["value"] for r in got["runs"]]
    fig, ax = plt.subplots(figsize=(9, 4), dpi=100)
    ax.plot(range(1, len(values) + 1), values, "o-", color="#5794F2", label=f"{got['metric']} per run")
    bounds = [0, *[cp["index"] for cp in got["change_points"]], len(values)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        mean = sum(values[a:b]) / (b - a)
        ax.hlines(mean, a + 0.6, b + 0.4, colors="#8F8F8F", linestyles="dashed")
    for cp in got["change_points"]:
        x = cp["index"] + 0.5
        ax.axvline(x, color="#F2495C")
        lo, hi = cp["step_ci"]
        what = "\n".join(f"  {k}: {_text(v[0])} → {_text(v[1])}" for k, v in cp["changed"].items())
        ax.text(0.98, 0.95, f"{cp['verdict']} from run {cp['index'] + 1}: {cp['step_pct']:+.1f} %\n"
                f"95 % CI {lo:+.1f} … {hi:+.1f} %, p = {cp['p_value']:.2g}\nwhat changed:\n{what}",
                transform=ax.transAxes, fontsize=8, va="top", ha="right", color="#C4162A")
    ax.set_xlabel("run")
    ax.set_ylabel("TPS")
    ax.set_ylim(0, max(values) * 1.05)
    ax.set_title(f"benchwatch history {got['name'] or got['workload']}\n{got['description']}", fontsize=9)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def _text(value: object) -> str:
    if isinstance(value, list):
        return "; ".join(map(str, value))
    return "(none)" if value is None else str(value)


if __name__ == "__main__":
    if sys.argv[1:] == ["--draw"]:  # the picture again from example.json, without new runs
        with open(os.path.join(OUT, "example.json"), encoding="utf-8") as f:
            draw(json.load(f), os.path.join(OUT, "history.png"))
        sys.exit(0)
    sys.exit(main())
