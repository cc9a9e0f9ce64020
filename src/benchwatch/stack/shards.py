"""Where the sharded demo (``benchwatch demo --shards``) keeps its server instances and their agent,
and how ``benchwatch down`` stops them: the stack's part of the demo, so that ``down`` needs no demo code."""

from __future__ import annotations

import json
import os

SHARDS_DIR = "shards"          # under the stack's state dir
SHARDS_FILE = "shards.json"    # the layout: its engine, instances (name, port, directory), bindir


def shards_dir(state_dir: str) -> str:
    return os.path.join(state_dir, SHARDS_DIR)


def stop_shards(state_dir: str) -> list[str]:
    """Stop the sharded demo's agent and server instances (``benchwatch down`` does too); data is kept. The
    instances are their engine's to stop, each engine asked through the registry (the layout says whose)."""
    from benchwatch import engines
    from benchwatch.stack import agent as agent_mod

    base = shards_dir(state_dir)
    try:
        with open(os.path.join(base, SHARDS_FILE), encoding="utf-8") as f:
            layout = json.load(f)
    except (FileNotFoundError, ValueError):
        return []
    stopped = []
    cfg = agent_mod.load_agent_config(os.path.join(base, "agent"))
    if cfg:
        stopped += [f"agent {c}" for c in agent_mod.Agent(cfg).down()]
    for engine in engines.load_engines().values():
        stopped += engine.stop_local_instances(layout)
    return stopped
