"""Prometheus for integration tests: the product's own launcher and client.

Usage::

    with start_prometheus(tmp_path, REMOTE_WRITE_CONFIG) as prom:
        query(prom.url, "up")

Each Prometheus listens on 127.0.0.1 only, keeps config, TSDB and log under
the given directory and is stopped by PID; readiness is polled with a deadline
(benchwatch.query.launch). A missing prometheus binary fails the test.
"""

from __future__ import annotations

import os

from benchwatch.query import launch
from benchwatch.query.launch import PRIVATE_CONFIG, PrometheusProcess, wait_ready
from benchwatch.query.prometheus import PrometheusError, query, query_range, series_values
from benchwatch.util.net import free_port
from tests.helpers.tools import require_tool

PROMETHEUS_BIN = os.environ.get("BENCHWATCH_PROMETHEUS", "prometheus")
PROMTOOL_BIN = os.environ.get("BENCHWATCH_PROMTOOL", "promtool")

# Nothing to scrape, out-of-order samples accepted up to 30 years back (fixtures
# from 2016 can be remote-written): the snapshot rebuild's private Prometheus.
REMOTE_WRITE_CONFIG = PRIVATE_CONFIG
PrometheusHandle = PrometheusProcess

__all__ = ["PROMETHEUS_BIN", "PROMTOOL_BIN", "REMOTE_WRITE_CONFIG", "PrometheusError", "PrometheusHandle",
           "free_port", "query", "query_range", "series_values", "start_prometheus", "wait_ready"]


def start_prometheus(directory, config_text: str, extra_args=(), *, port: int | None = None,
                     ready_timeout_s: float = 60.0) -> PrometheusProcess:
    """The product's launcher, with the remote-write receiver only when asked for in ``extra_args``
    (tests also need a Prometheus that refuses pushes)."""
    binary = require_tool(PROMETHEUS_BIN, "prometheus")
    return launch.start_prometheus(directory, config_text, [a for a in extra_args if a != launch.RECEIVER_FLAG],
                                   port=port, ready_timeout_s=ready_timeout_s, binary=binary,
                                   remote_write_receiver=launch.RECEIVER_FLAG in extra_args)


def baseline_recorded(prometheus_url: str, run_id: str | None) -> bool:
    """Whether PgbenchTPSDrop can fire for the run: its baseline is recorded (10 progress lines, then the
    5 s group pgbench_baseline's next evaluation). Tests that make a drop wait for this, not for a count of lines."""
    if not run_id:
        return False
    try:
        return bool(query(prometheus_url, f'run_id:benchmark_progress_tps:baseline{{run_id="{run_id}"}}'))
    except PrometheusError:
        return False
