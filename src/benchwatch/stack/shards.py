"""Where the sharded demo (``benchwatch demo --shards``) keeps its PostgreSQL instances and their agent,
and how ``benchwatch down`` stops them: the stack's part of the demo, so that ``down`` needs no demo code."""

from __future__ import annotations

import json
import os

SHARDS_DIR = "shards"          # under the stack's state dir
SHARDS_FILE = "shards.json"    # the layout: instances (name, port, directory), bindir


def shards_dir(state_dir: str) -> str:
    return os.path.join(state_dir, SHARDS_DIR)


def stop_shards(state_dir: str) -> list[str]:
    """Stop the sharded demo's agent and PostgreSQL instances (``benchwatch down`` does too); data is kept."""
    from benchwatch.engines.postgresql.local import LocalInstance
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
    for item in layout.get("instances", []):
        inst = LocalInstance(item["directory"], item["port"], item["name"], layout["bindir"])
        if inst.pid() is not None:
            inst.stop()
            stopped.append(item["name"])
    return stopped
