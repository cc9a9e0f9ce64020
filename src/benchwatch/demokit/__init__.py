"""What every engine's ``benchwatch demo`` uses: the context the demo command hands it, and the
generic steps (install and start, wait for Prometheus to have a run, the figures and links printed).

Each engine's demo lives in its folder (``engines/<family>/demo.py``, ``demo(ctx)``) and is found by
the registry (``Engine.demo``); this module names no engine, and sits below the engine folders: it
imports only ``query`` and ``util``. The stack reaches a demo through the context, not by import."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchwatch.query import prometheus
from benchwatch.util import processes


@dataclass
class DemoContext:
    """What ``benchwatch demo`` gives an engine's demo."""

    stack: Any                          # the stack it runs on: ``cfg`` (urls, runs_dir, state_dir), ``server`` (its engine's part), ``pid``
    args: Any                           # the demo command's arguments (its own and its engine's)
    say: Callable[[str], None]          # benchwatch's own messages (stderr)
    # scripts/install-deps given exactly what this demo uses (with the engine's features named): its exit code
    install: Callable[[tuple[str, ...]], int]
    up: Callable[[], str | None]        # the stack started (idempotent): None, else why not
    # Instances a demo starts beside the stack's server (demo --shards) and the agent watching them, which
    # `benchwatch down` stops: where they live, the layout file naming them, how they stop.
    instances_dir: str
    instances_file: str
    stop_instances: Callable[[], list[str]]
    start_agent: Callable[..., Any]     # an agent on this host (benchwatch.stack.agent.start_agent's arguments)
    # What computes a run's stability profile for its summary.json (benchwatch.stability.runs.stability_profiler, a
    # floor above the engine folders): given to run_benchmark as ``stability``.
    stability: Callable[..., Any] | None = None

    def install_and_start(self, features: tuple[str, ...] = ()) -> int | None:
        """What the demo uses and nothing more (the stack, its engine, the tool its demo runs, the engine's
        ``features``, e.g. "shards") installed where missing, then the stack; None when both are done, else
        the exit code to give."""
        code = self.install(features)
        if code != 0:
            return code
        failed = self.up()
        if failed is not None:
            self.say(failed)
            return 1
        return None

    @property
    def prometheus(self) -> str:
        return str(self.stack.cfg.url("prometheus"))


def value(base: str, promql: str, at: float) -> float | None:
    """One number from an instant query; None when the result is empty."""
    result = prometheus.query(base, promql, at)
    return float(result[0]["value"][1]) if result else None


def newest_by_target(base: str, selector: str) -> dict[str, float]:
    """The newest sample time of each target's series matching ``selector``. A target is its name: one
    restarted on other ports has new series (other ``instance``), and the old ones, still within the
    lookback, do not hold it back."""
    return {r["metric"].get("target", ""): float(r["value"][1])
            for r in prometheus.query(base, f"max by (target) (timestamp({selector}))")}


def runs_ended(base: str, run_ids: list[str], timeout: float = 30.0) -> bool:
    """Whether Prometheus has each run's end (benchmark_running 0) within ``timeout`` seconds."""
    return processes.wait_until(lambda: all(prometheus.query(base, f'benchmark_running{{run_id="{r}"}} == 0')
                                            for r in run_ids), timeout, interval=0.2)


def graph_url(base: str, expr: str) -> str:
    """Prometheus' graph page of ``expr`` over the last 5 minutes."""
    return f"{base}/graph?g0.expr={urllib.parse.quote(expr)}&g0.range_input=5m"
