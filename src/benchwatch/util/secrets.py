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


# Server settings whose whole value is a secret (MariaDB's wsrep_sst_auth "user:password", a passphrase command).
_SECRET_SETTING = re.compile(r"password|passwd|passphrase|secret|_auth$", re.I)


def redact_settings(settings: dict[str, str]) -> dict[str, str]:
    """A server's settings as meta.json keeps them: a setting that is a secret replaced whole, passwords in
    connection strings (primary_conninfo) and URLs replaced within the value."""
    out = {}
    for name, value in settings.items():
        if _SECRET_SETTING.search(name) and value not in ("", None):
            out[name] = "<redacted>"
        else:
            out[name] = redact_argv([value])[0] if isinstance(value, str) else value
    return out
