"""Which runs did the same work: a run's workload key, and the workload's id.

The key is what determines the work: the tool, its script or test and the options that change the
work (clients, threads, mode, read-only, rate, scale, table sizes, warehouses), the engine and the
host, plus a sweep's variant (each variant is a workload of its own, so a sweep never looks like a
regression). Not the run's length (duration, transactions per client, events), its progress interval
nor output options: two nightly runs of different lengths still do the same work per second.

The tool's version, the server's version and settings are deliberately not in the key: they are what
"what changed" reports between the runs of one workload.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from benchwatch import loadgens
from benchwatch.record import replay

# run_info labels that say how long or how the run reports, not what it does. Each tool's version key
# (LoadGenerator.version_key) and the labels a tool leaves out itself (LoadGenerator.not_work) are added by
# not_work(): a new tool needs no line here.
NOT_WORK = frozenset({"duration_seconds", "transactions_per_client", "transactions", "interval_seconds",
                      "percentile", "args", "mode", "target", "experiment", "server_version", "hostname", "engine",
                      "database"})


@functools.cache
def not_work() -> frozenset[str]:
    """NOT_WORK, every tool's version key and what each tool says is not work: left out of every key (a label
    one tool leaves out, another never writes)."""
    out = set(NOT_WORK)
    for generator in loadgens.load_generators().values():
        out.add(generator.version_key)
        out |= generator.not_work
    return frozenset(out)


def _clean(value: object) -> str:
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    return f"{number:g}" if number.is_integer() or "." in text else text  # "4" and "4.0" alike


def key(meta: Mapping[str, Any]) -> dict[str, str]:
    """The workload key of a run from its meta.json (every value a string; absent facts are left out)."""
    generator = loadgens.by_name(meta.get("tool"))
    argv = meta.get("argv") or []
    labels: dict[str, str] = {}
    if argv:
        labels.update(_argv_labels(generator.name, tuple(str(a) for a in argv[1:])))
    else:  # attach without arguments, import: what the output's summary said (saved by import)
        labels.update({str(k): str(v) for k, v in (meta.get("info_labels") or {}).items()})
    out = {k: _clean(v) for k, v in labels.items() if k not in not_work() and v not in (None, "")}
    out["tool"] = generator.name
    out["engine"] = replay.run_engine(meta)
    if meta.get("scale") is not None:
        out["scale"] = _clean(meta["scale"])
    host = meta.get("hostname") or (meta.get("host") or {}).get("nodename")
    if host:
        out["host"] = str(host)
    info = meta.get("info") or {}
    variant = meta.get("variant") or info.get("variant")
    if variant:
        # A sweep's runs (benchwatch sweep, issue 21: info "sweep", "variant", "warmup"): each variant of each
        # sweep is a workload, its warm-up runs one apart (not measurements); the cell is in the argv.
        out["variant"] = str(variant)
        for label in ("sweep", "warmup"):
            if info.get(label):
                out[label] = str(info[label])
    return out


@functools.lru_cache(maxsize=4096)
def _argv_labels(tool: str, args: tuple[str, ...]) -> dict[str, str]:
    """The run_info labels of an argv; the runs of a workload mostly share theirs (listing 10,000 runs reads
    each argv once)."""
    return dict(loadgens.by_name(tool).read_argv(list(args)).info_labels)


def workload_id(k: Mapping[str, str]) -> str:
    """A short stable id for a key: the tool, the script, and a digest of the whole key."""
    digest = hashlib.sha1(json.dumps(dict(sorted(k.items())), separators=(",", ":")).encode()).hexdigest()[:8]
    parts = [k.get("tool", "run"), k.get("script") or k.get("command", "").replace(" ", "-")]
    return "-".join(p for p in parts if p) + "-" + digest


def describe(k: Mapping[str, str]) -> str:
    """The key in words, for people: "pgbench tpcb-like clients=4 threads=1 scale=10 on postgresql@host"."""
    head = " ".join(v for v in (k.get("tool"), k.get("script") or k.get("command")) if v)
    rest = " ".join(f"{n}={v}" for n, v in sorted(k.items()) if n not in ("tool", "script", "command", "engine", "host"))
    where = k.get("engine", "") + (f"@{k['host']}" if k.get("host") else "")
    return " ".join(p for p in (head, rest, f"on {where}" if where else "") if p)


def pooled_key(k: Mapping[str, str]) -> dict[str, str]:
    """The key with its host left out: the same work on every host (``history --all-hosts``)."""
    return {n: v for n, v in k.items() if n != "host"}


def pooled_id(k: Mapping[str, str]) -> str:
    """The id of a workload pooled over hosts: :func:`workload_id` of the key without its host, so it is the
    same on every host and differs from each host's own id (which digests the host too)."""
    return workload_id(pooled_key(k))
