"""A run's stability profile kept with it, in summary.json (``version`` 2, ``"stability"``).

Who computes what, and when:

- **when the run ends**, whoever writes summary.json (``run``, ``attach``, ``import``, a sweep's runs, the
  demos) passes :func:`stability_profiler` to ``benchwatch.record.outcome``, which computes the profile from the same
  samples as the run's other figures (one replay of the raw output);
- **the dips by cause** need explain over the run's archived series (``series/*.csv``), which the exporter's
  run archiver writes a few seconds after the run ends: the archiver completes summary.json right after
  writing them (:func:`complete`), so the record is whole from then on;
- **a reader** (:func:`outcome`: history, a sweep's report, the snapshot, ``compare``) gets the profile of a
  run stored before version 2 (or whose archiver was not running) computed from its raw output, and its dips
  by cause from its archived series when it has them, without writing anything: the run directory stays as
  it was stored (``keep`` is the archiver's and ``--update``-like callers' choice).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from benchwatch.explain import report as explain_report
from benchwatch.query.archive import SERIES_DIR, is_run_series
from benchwatch.query.series import from_samples, merge, read_csv_dir
from benchwatch.record import outcome as record_outcome
from benchwatch.record import replay, rundir
from benchwatch.stability import CAUSE_SOURCE, LatencyTail, by_cause, latency_from_buckets, profile


def stability_profiler(tps: list[tuple[int, float]], interval_s: float, latency: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`benchwatch.record.outcome.StabilityProfiler` that record's writers are given: the profile of a run's
    progress TPS, its latency tail from the sources record found (``latency_tail_sources``)."""
    tail: LatencyTail | None = None
    if latency.get("buckets"):
        tail = latency_from_buckets(latency["buckets"], str(latency.get("source")), latency.get("max_s"))
    elif latency.get("source"):
        tail = LatencyTail(latency.get("p99_s"), latency.get("p999_s"), latency.get("max_s"), str(latency["source"]))
    return profile(tps, interval_s, latency=tail)


def has_archive(run: rundir.RunDir) -> bool:
    """Whether the run's series were archived (``series/*.csv``)."""
    try:
        return any(n.endswith(".csv") for n in os.listdir(run.file(SERIES_DIR)))
    except OSError:
        return False


def causes_of(run: rundir.RunDir, stability: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> dict | None:
    """``dips_by_cause`` of a run from explain over its raw output and archived series; None without an archive."""
    if not has_archive(run):
        return None
    meta = run.read_meta() if meta is None else meta
    run_id = replay.run_id_of(meta, run.run_id)
    own = from_samples(replay.replay_run_dir(run.path, meta))
    saved = [s for s in read_csv_dir(run.file(SERIES_DIR)) if not is_run_series(s.name)]
    output = replay.saved_output(run.path).decode("utf-8", "replace")
    found = explain_report.explain(merge(own, saved), meta, run_id, output=output)
    return by_cause(found["dips"], stability)


def _with_causes(run: rundir.RunDir, summary: dict[str, Any]) -> bool:
    """Fill the summary's dips by cause when the run has an archive; whether it changed."""
    stab = summary.get("stability")
    if not isinstance(stab, dict) or stab.get("dips_by_cause") is not None or stab.get("intervals", 0) == 0:
        return False
    try:
        found = causes_of(run, stab)
    except (OSError, ValueError, rundir.CorruptMeta):
        return False
    if found is None:
        return False
    summary["stability"] = {**stab, "dips_by_cause": found, "dips_by_cause_source": CAUSE_SOURCE}
    return True


def outcome(run: rundir.RunDir, *, keep: bool = False) -> dict[str, Any]:
    """The run's summary with its stability profile (version 2): summary.json as saved, a run stored before
    computed from its raw output, its dips by cause from its archived series when it has them.
    ``keep``: write summary.json back when something was added (best effort)."""
    saved = record_outcome.read(run)
    if saved is not None and isinstance(saved.get("stability"), dict):
        summary, added = saved, False
    else:  # stored before version 2 (or its profile failed): from the raw output
        summary = record_outcome.outcome(run, stability_profiler)
        added = isinstance(summary.get("stability"), dict)
    added = _with_causes(run, summary) or added
    if keep and added and summary.get("stability") is not None:
        record_outcome.keep(run, summary)
    return summary


def complete(run: rundir.RunDir) -> dict[str, Any]:
    """The archiver's part: once the run's series are written, its summary.json gets the dips by cause (and
    the profile, for a run whose writer gave none)."""
    return outcome(run, keep=True)


def stability_of(run: rundir.RunDir) -> dict[str, Any] | None:
    """Just the run's ``"stability"`` object (None when its output cannot be read)."""
    found = outcome(run).get("stability")
    return found if isinstance(found, dict) else None
