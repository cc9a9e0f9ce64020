"""promtool check metrics on an exposition, less the lints the metric contract causes on purpose.

Those lints are about names and labels users' queries rely on, never about a number or the format:
- "metric name should not include type 'summary'" / "'histogram'": pgbench_summary_* (issue 2's names) and
  benchmark_result_latency_histogram_events (sysbench's histogram, issue 19);
- 'non-summary metrics should not have "quantile" label': the tools' latency percentiles are gauges with a
  ``quantile`` label (sysbench's --percentile, go-tpc's and go-ycsb's percentiles, min and max);
- 'non-histogram metrics should not have "le" label': per-interval histogram counts kept as gauges with ``le``
  (sysbench's histogram events, pgbench's per-transaction log histogram).
Which of them an exposition shows depends on which tools' runs the exporter still serves, so every test that
checks an exporter's /metrics accepts the same ones.
"""

from __future__ import annotations

import re
import subprocess

from tests.helpers.tools import require_tool

CONTRACT_LINT = re.compile(r"\w+ (metric name should not include type '(summary|histogram)'"
                           r'|non-summary metrics should not have "quantile" label'
                           r'|non-histogram metrics should not have "le" label)')


def promtool_problems(exposition: bytes) -> list[str]:
    """What promtool finds wrong beyond the contract's lints; fails the test when promtool cannot parse it
    (exit 1) rather than returning the parse error as one more line."""
    check = subprocess.run([require_tool("promtool"), "check", "metrics"], input=exposition, capture_output=True)
    lines = [l for l in (check.stdout + check.stderr).decode().splitlines() if l]
    assert check.returncode in (0, 3), lines  # 3: lint findings only
    return [l for l in lines if not CONTRACT_LINT.fullmatch(l)]
