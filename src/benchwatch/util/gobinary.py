"""A Go program's binary: where ``go install`` puts it, and the module version Go records in it.

A tool built with ``go install`` lands in $GOBIN, else each $GOPATH's bin, else ~/go/bin, seldom on PATH.
Go writes the build info (``go version -m``) into the binary: ``mod<TAB>PATH<TAB>VERSION`` for the main
module, ``dep<TAB>PATH<TAB>VERSION`` for each dependency; a program built as a dependency of a small
wrapper module (as scripts/install-deps builds some) has its version on a ``dep`` line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence


def locate(program: str, env: Mapping[str, str]) -> str | None:
    """The executable ``program`` (a bare name) in Go's install directories by ``env``; None: not there, or a path."""
    if os.path.basename(program) != program:
        return None
    home = env.get("HOME") or os.path.expanduser("~")
    candidates = [env.get("GOBIN", "")] + [os.path.join(p, "bin") for p in env.get("GOPATH", "").split(os.pathsep) if p]
    candidates.append(os.path.join(home, "go", "bin"))
    for directory in candidates:
        path = os.path.join(directory, program) if directory else ""
        if path and os.access(path, os.X_OK):
            return path
    return None


def module_pattern(module: str, kinds: Sequence[str] = ("mod",)) -> re.Pattern[bytes]:
    """The build-info line of ``module`` (``github.com/owner/name``) as one of ``kinds`` (mod, dep): its version is group 1."""
    alternatives = "|".join(re.escape(k) for k in kinds)
    return re.compile(rb"(?:^|\s)(?:" + alternatives.encode() + rb")\t" + re.escape(module).encode() + rb"\t(v[0-9][^\s]*)")


def module_version(path: str, pattern: re.Pattern[bytes]) -> str | None:
    """The version the binary at ``path`` records for the module ``pattern`` matches, without its ``v``
    (``1.0.7``); None when the file cannot be read or records none (a build inside the module's own source
    tree records ``(devel)``)."""
    try:
        with open(path, "rb") as f:
            m = pattern.search(f.read())
    except OSError:
        return None
    return m.group(1).decode().removeprefix("v") if m else None
