"""The wild corpus: real saved outputs, beside the checkout (``<repo>/../shared/corpus/wild``, as CI has it)."""

from __future__ import annotations

import glob
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpus", "wild")


def corpus_files() -> list[str]:
    """Every corpus file; a missing corpus is an error of the test run, never a skip."""
    files = sorted(glob.glob(os.path.join(CORPUS, "[0-9][0-9][0-9]_*.txt")))
    if not files:
        raise FileNotFoundError(f"the wild corpus is missing: no NNN_*.txt in {CORPUS}")
    return files


def corpus(number: str) -> bytes:
    """The bytes of corpus file NNN."""
    found = glob.glob(os.path.join(CORPUS, f"{number}_*.txt"))
    if len(found) != 1:
        raise FileNotFoundError(f"corpus file {number} not found in {CORPUS}")
    with open(found[0], "rb") as f:
        return f.read()
