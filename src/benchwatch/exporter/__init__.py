"""The benchwatch exporter: one collector per module, switched like node_exporter's."""

from __future__ import annotations

import argparse

# collector name -> what it does; each is on by default, --no-collector.NAME turns it off.
COLLECTORS = {
    "pgbench_runs": "follow pgbench run directories and remote-write their series",
    "checkpoints": "follow the PostgreSQL server log for checkpoints",
}


def add_collector_flags(parser: argparse.ArgumentParser) -> None:
    for name, help_text in COLLECTORS.items():
        parser.add_argument(f"--collector.{name}", dest=f"collector_{name}", action=argparse.BooleanOptionalAction,
                            default=True, help=help_text)
