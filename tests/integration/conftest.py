"""A real native stack for the integration tests: one per test session, free ports, a temp state dir."""

from __future__ import annotations

import pytest

from tests.helpers import throwaway
from tests.helpers.tools import require_tool


@pytest.fixture(scope="session")
def live_stack():
    live = throwaway.start(scale=2)
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"


# One embedded MariaDB stack per module that asks for it (sysbench tests).
@pytest.fixture(scope="module")
def mariadb_stack():
    for tool in ("sysbench", "mariadbd", "prometheus-mysqld-exporter"):
        require_tool(tool)
    live = throwaway.start(engine="mariadb")
    try:
        yield live
    finally:
        left = live.close()
        assert not left, f"still running after down: {left}"
