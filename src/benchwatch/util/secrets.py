"""Secrets kept out of what benchwatch saves and shows: argv and URLs with their passwords replaced."""

from __future__ import annotations

import re

_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)")
# scheme://user:password@host (postgresql://, mysql://, http:// ...)
_URL_AUTH = re.compile(r"([a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+@", re.I)


def redact_argv(argv: list[str]) -> list[str]:
    """argv with passwords in connection strings (password=...) and URLs (user:password@) replaced,
    for meta.json and anything shown (a load generator's own password options are its folder's business)."""
    out = []
    for arg in argv:
        if "password" in arg and "=" in arg:
            arg = _KEYWORD.sub(r"\1<redacted>", arg)
        out.append(_URL_AUTH.sub(r"\1<redacted>@", arg))
    return out
