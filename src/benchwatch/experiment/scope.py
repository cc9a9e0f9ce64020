"""What the why of a difference can compare (the report's ``why_scope``): each side's server as it was
watched while the sweep ran, and the host.

A variant on the stack's server (as it is, settings, target=, before=) is watched by the stack; one on a
server of its own (bindir=, dsn=) is watched from the sweep's start, which records it in the state file
(a ``watched`` event: its target and what of it could be read). A sweep recorded before that has none:
its own servers were not watched, and only the host's signals compare."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchwatch.engines import HOST_ONLY, SERVER_AND_HOST
from benchwatch.experiment.spec import Variant


@dataclass(frozen=True)
class Scope:
    text: str
    host_only: bool


def variant_scope(events: list[dict[str, Any]], v: Variant) -> str:
    if not (v.bindir or v.dsn):
        return SERVER_AND_HOST
    watched = [e for e in events if e.get("event") == "watched" and e.get("variant") == v.name]
    return str(watched[-1].get("scope") or HOST_ONLY) if watched else HOST_ONLY


def why_scope(events: list[dict[str, Any]], baseline: Variant, variant: Variant) -> Scope:
    sides = [variant_scope(events, x) for x in (baseline, variant)]
    if HOST_ONLY in sides:
        return Scope(HOST_ONLY, True)
    partial = list(dict.fromkeys(s for s in sides if s != SERVER_AND_HOST))
    return Scope("; ".join(partial) if partial else SERVER_AND_HOST, False)
