"""Sharing runs: ``benchwatch snapshot`` (one run) and ``benchwatch compare`` (several).

See docs/snapshots.md. Entry point for the run wrapper: :func:`save_run_series`.
"""

from __future__ import annotations


def save_run_series(run_dir: str, prometheus_url: str) -> list[str]:
    """At the end of a run: keep what a later snapshot needs beyond the raw output as
    ``<run_dir>/series/*.csv``, so it rebuilds without Prometheus."""
    from benchwatch.share.collect import save_run_series as save

    return save(run_dir, prometheus_url)
