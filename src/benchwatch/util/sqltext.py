"""SQL statement texts fit for a label, and compared across the ways PostgreSQL shows them.

pg_stat_statements shows a statement with its constants as ``$1``; pg_stat_activity shows it as the
client sent it (pgbench -M simple: ``tbalance + -4017``); benchwatch's lock-waits query replaces the
literals by ``?``. ``normalize`` makes any of them safe for a label (no value left), ``key`` makes
them compare equal.
"""

from __future__ import annotations

import re

TEXT_CHARS = 100

_QUOTED = re.compile(r"'(?:[^']|'')*'")
_NUMBER = re.compile(r"(?<![$\w.])\d+(?:\.\d+)?\b")
_SPACE = re.compile(r"\s+")
_PARAMETERS = re.compile(r"\$\d+|-?\?|-?\d+(\.\d+)?|[\s;…]")


def normalize(text: str, limit: int = TEXT_CHARS) -> str:
    """Literals as ``?``, one space between words, at most ``limit`` characters."""
    text = _SPACE.sub(" ", _NUMBER.sub("?", _QUOTED.sub("?", text))).strip()
    return text if len(text) <= limit else text[:limit - 1] + "…"


def key(text: str) -> str:
    """The text without its parameters and literals ($1, ?, -42), spaces or final ";", cut at 60 characters:
    the same statement in pg_stat_statements, pg_stat_activity and the lock-waits query compares equal."""
    return _PARAMETERS.sub("", normalize(text))[:60]
