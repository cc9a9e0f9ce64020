"""A saved output as a person reads it: text pasted into Markdown, a README, a mail or a log.

``import`` reads outputs people saved, and people paste them: indented by four
spaces (a Markdown list or an indented code block), between code fences, with a
line wrapped in backticks, with CRLF line ends, with ``...`` where they cut the
head or the middle, with ``set -x`` trace lines of the script that drove the
tool in between. Someone reading such a paste sees the tool's lines through all
that; :func:`read_pasted` gives the tool's parser the same lines, each with its
line number in the file, and says which lines it set aside and why (they are
read, not lost). Nothing here knows any tool: it only undoes the paste.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE = re.compile(rb"^\s*(```|~~~)[\w+-]*\s*$")
_ELISION = re.compile(rb"^\s*(\.\.\.|\xe2\x80\xa6|\[\.\.\.\]|\[\xe2\x80\xa6\])\s*$")
_TRACE = re.compile(rb"^\s*\++ \S")  # bash set -x: "+ cmd", "++ cmd" (nested)
_BACKTICKED = re.compile(rb"^(\s*)`+([^`]+)`+\s*$")


@dataclass
class Pasted:
    """The lines of a saved output as the tool printed them, each with its 1-based line number in the file,
    and the lines set aside with the reason."""

    lines: list[bytes] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    set_aside: list[tuple[int, str]] = field(default_factory=list)


def split_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _indent(line: bytes) -> int:
    return len(line) - len(line.lstrip(b" \t"))


def read_pasted(data: bytes) -> Pasted:
    """The tool's lines of a saved output: CRLF ends, code fences, the common indentation, backticks around
    a whole line, elisions and shell trace lines undone (line numbers kept)."""
    raw = [line[:-1] if line.endswith(b"\r") else line for line in split_lines(data)]
    out = Pasted()
    kept: list[tuple[int, bytes]] = []
    for number, line in enumerate(raw, 1):
        if _FENCE.match(line):
            out.set_aside.append((number, "a Markdown code fence"))
        elif _ELISION.match(line):
            out.set_aside.append((number, "an elision (lines left out where it was pasted)"))
        elif _TRACE.match(line):
            out.set_aside.append((number, "a shell trace line (set -x)"))
        else:
            kept.append((number, line))
    indents = [_indent(line) for _, line in kept if line.strip()]
    common = min(indents) if indents else 0
    for number, line in kept:
        if common and line.strip():
            line = line[common:]
        m = _BACKTICKED.match(line)
        if m:
            line = m.group(1) + m.group(2).rstrip()
        out.lines.append(line)
        out.numbers.append(number)
    return out
