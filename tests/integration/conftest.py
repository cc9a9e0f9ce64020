"""A real native stack for the integration tests: one per test session, free ports, a temp state dir."""

from __future__ import annotations

import pytest

from benchwatch import throwaway
from benchwatch.throwaway import BENCHWATCH, free_ports, make_state_dir  # noqa: F401  (used by the tests)

LiveStack = throwaway.ThrowawayStack


@pytest.fixture(scope="session")
def live_stack():
    live = throwaway.start(scale=2)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"
