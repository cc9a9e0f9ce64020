"""What a dashboard query is about, for tests that run every query against a live stack."""

from __future__ import annotations

import functools

from benchwatch import engines


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
