"""A real native stack for the integration tests: one per test session, free ports, a temp state dir."""

from __future__ import annotations

import pytest

from tests.helpers import throwaway


@pytest.fixture(scope="session")
def live_stack():
    live = throwaway.start(scale=2)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"
