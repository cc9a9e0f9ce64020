"""A pull request gated with its why: ``report NAME --fail-on ... --comment FILE`` (a sweep of two builds) and
``history WORKLOAD --fail-on-regression PCT --comment FILE`` (the candidate's runs against the workload's
history). Each decides the exit code from the verdicts alone and writes a Markdown comment: the verdicts with
their intervals, the why (server measures, dips by cause, profile changes where profiled) and links.

Exit codes shared by both: :data:`PASSED` 0, :data:`FAILED` 1 (the verdict, and nothing else); every other
failure of these commands (bad input, a bundle refused for a secret) has a code of its own, 2.
"""

from __future__ import annotations

import os

PASSED = 0
FAILED = 1  # the verdict only: a gate's caller reads 1 as "the candidate is worse", never as "broken"


def write_comment(path: str, text: str) -> None:
    """The comment written whole or not at all (a CI step posting it must never read half of one)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
