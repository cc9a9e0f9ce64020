"""What a dashboard query is about, for tests that run every query against a live stack."""

from __future__ import annotations

import functools

from benchwatch import engines

# Annotations of what other commands record: a plain run has none of them in its range, so there they must
# come back empty (test_sweep and test_history see them drawn).
OTHER_COMMANDS_ANNOTATIONS = ("experiment runs (benchwatch sweep)", "events (benchwatch annotate)")


def other_commands_annotation(source: str) -> bool:
    """True for an annotation that draws what ``benchwatch sweep`` or ``annotate`` recorded."""
    return source.startswith("annotation ") and source.removeprefix("annotation ").strip("'\"") in OTHER_COMMANDS_ANNOTATIONS


@functools.cache
def _annotation_engines() -> dict[str, str]:
    """Annotation name -> the engine family whose regions it draws (each engine brings its own)."""
    return {a.build().name: e.name for e in engines.load_engines().values() for a in e.annotations()}


def other_engines_annotation(source: str, engine: str) -> bool:
    """True for the annotation of an engine other than ``engine`` (e.g. InnoDB's flushing pressure on a
    PostgreSQL stack): the dashboards draw every engine's regions, and a stack of one engine has none of
    the other's, so such a query must come back empty."""
    if not source.startswith("annotation "):
        return False
    name = source.removeprefix("annotation ").strip("'\"")
    owner = _annotation_engines().get(name)
    return owner is not None and owner != engines.get(engine).name
