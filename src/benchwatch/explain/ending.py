"""How a run ended, when it ended early or badly: ``explain --json``'s ``"end"``.

A run ended early when its tool exited non-zero, when clients aborted, or when its last progress
line came more than two intervals before the end its ``-T``/``--time`` asked for; runs without an
exit code (attach, import) are judged from their output alone. The cause is read, most specific
first, from:

- ``server_restart``: the server went away under the run: a shutdown checkpoint in the server log
  (the checkpoints collector), its exporter's up series at 0, or the tool's output saying the
  server terminated or closed the connections;
- ``crash``: the output says a server process crashed ("terminating connection because of crash
  of another server process", "server process ... was terminated by signal");
- ``out_of_disk``: "No space left on device" or "could not write/extend" in the output;
- ``clients_aborted``: clients aborted for another reason (the first abort's message);
- ``exit_code``: the tool failed without any of those (its last error line);
- "no cause found" otherwise.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from benchwatch.explain import causes
from benchwatch.model.run import ended_short

NO_CAUSE = "no cause found"
# What the tool's output says about the server: each engine's messages (Engine.ending_messages: its
# client library's and its server's, which the tools print). ("terminating connection due to
# administrator command" is a shutdown's and pg_terminate_backend's alike: alone it is an abort,
# with other evidence of the server going away a restart.)
DISK_MESSAGES = (r"No space left on device", r"disk full")


@functools.cache
def messages(cause: str) -> re.Pattern[str]:
    """Every engine's messages of one cause ("terminated", "restart", "crash", "out_of_disk") as one pattern."""
    from benchwatch import engines

    found = [m for e in engines.load_engines().values() for m in e.ending_messages.get(cause, ())]
    if cause == "out_of_disk":
        found = [*DISK_MESSAGES[:1], *found, *DISK_MESSAGES[1:]]
    return re.compile("|".join(found) or "(?!)", re.I)


ABORT_RE = re.compile(r"[Cc]lient \d+ (?:script \d+ )?aborted\b.*")
ERROR_RE = re.compile(r"^.*\b(?:ERROR|FATAL|PANIC|error)\b.*$", re.M)


def _first(regex: re.Pattern[str], text: str) -> str | None:
    m = regex.search(text)
    if m is None:
        return None
    line_start = text.rfind("\n", 0, m.start()) + 1
    line_end = text.find("\n", m.end())
    return text[line_start:line_end if line_end >= 0 else len(text)].strip()[:300]


def planned_seconds(meta: Mapping[str, Any], info_labels: Mapping[str, str]) -> float | None:
    """The run's -T/--time, from its argv as the tool reads it, else its run_info label."""
    from benchwatch import loadgens

    value = info_labels.get("duration_seconds")
    argv = meta.get("argv")
    if not value and argv:
        try:
            value = loadgens.by_name(meta.get("tool")).read_argv(list(argv[1:])).info_labels.get("duration_seconds")
        except Exception:  # a command line this version cannot read: no planned end known
            value = None
    try:
        return float(value) if value else None
    except ValueError:
        return None


def run_end(meta: Mapping[str, Any], signals: causes.Signals | None, ctx: causes.Context, last_line: float | None,
            aborted: float, info_labels: Mapping[str, str], output: str = "") -> dict | None:
    """The contract's ``{"early", "at", "at_s", "exit_code", "cause", "evidence"}``, or None for a run that
    ended as planned (or has not ended)."""
    if not meta.get("ended_at") and meta.get("state") != "finished":
        return None
    exit_code = meta.get("exit_code")
    at = float(last_line or meta.get("ended_at") or ctx.run_end)
    at_s = at - ctx.run_start
    planned = planned_seconds(meta, info_labels)
    short = ended_short(at_s, planned, ctx.interval_s)
    failed = exit_code not in (None, 0)
    if not (failed or aborted > 0 or short):
        return None
    why = []
    if failed:
        why.append(f"{meta.get('tool') or 'the tool'} exited with code {exit_code}")
    if aborted > 0:
        why.append(f"{aborted:.0f} of {ctx.clients or '?'} clients aborted")
    if short:
        why.append(f"its last progress line came {at_s:.0f} s into a {planned:.0f} s run")
    cause, evidence = _cause(signals, ctx, at, output, aborted, failed)
    return {"early": True, "at": round(at, 3), "at_s": round(at_s, 3), "exit_code": exit_code, "cause": cause,
            "evidence": "; ".join([*why, evidence] if evidence else why)}


def _cause(signals: causes.Signals | None, ctx: causes.Context, at: float, output: str, aborted: float,
           failed: bool) -> tuple[str, str]:
    lo, hi = ctx.run_start, max(at, ctx.run_end) + 5.0
    crashed = _first(messages("crash"), output)
    if crashed:
        return "crash", f"the server crashed: {crashed!r}"
    said = []
    if signals is not None:
        said += signals.server_stopped(lo, hi)
    restart = _first(messages("restart"), output)
    if restart:
        said.append(f"the output says {restart!r}")
    if said:
        terminated = _first(messages("terminated"), output)
        if terminated and not restart:
            said.append(f"the output says {terminated!r}")
        return "server_restart", "; ".join(said)
    disk = _first(messages("out_of_disk"), output)
    if disk:
        return "out_of_disk", f"the output says {disk!r}"
    if aborted > 0:
        first = _first(ABORT_RE, output)
        return "clients_aborted", f"first abort: {first!r}" if first else ""
    if failed:
        last = ERROR_RE.findall(output)
        return "exit_code", f"last error: {last[-1].strip()[:300]!r}" if last else ""
    return NO_CAUSE, ""
