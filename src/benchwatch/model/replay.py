"""The one way a recorded run becomes samples: live, on ``import``, and in a snapshot rebuild.

A run is its raw output plus what ``meta.json`` says about it (see
benchwatch.record.rundir). The live exporter feeds lines as they are written;
``import`` and the rebuild feed a whole saved output at once. All three build
the model with :func:`model_for_run` or :func:`model_for_output`, feed lines
in :data:`FILE_ORDER`, and end with :func:`close`, so a backfilled or rebuilt
run is sample for sample the run Prometheus had live.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.model.run import METRICS, RunModel
from benchwatch.model.samples import Sample


def run_metrics() -> dict[str, tuple[str, str]]:
    """Every run series any tool's model writes: name -> (type, help)."""
    out = dict(METRICS)
    for generator in loadgens.load_generators().values():
        out.update(generator.metrics)
    return out


# Arrival time of each progress line of a tool whose lines carry no time (written by benchwatch.record.stream).
ARRIVALS = "arrivals.log"

# stderr first: progress lines come from there, the summary from stdout at the end.
# output.log holds both streams of an attached or imported run.
FILE_ORDER = ("stderr.log", "output.log", "stdout.log")

# Labels of the run_info series that meta.json carries beside the argv (and the tool's version).
_META_LABELS = ("server_version", "scale", "mode", "hostname")


def run_id_of(meta: Mapping[str, Any], fallback: str) -> str:
    """The id a run was recorded under (a copied run directory, e.g. a snapshot's raw/, keeps it in meta.json)."""
    return str(meta.get("run_id") or fallback)


def info_labels(meta: Mapping[str, Any]) -> dict[str, str]:
    """The run_info labels of a recorded run: from its argv (read by its load generator) and what the wrapper learnt."""
    generator = loadgens.by_name(meta.get("tool"))
    argv = meta.get("argv") or []
    labels = dict(generator.read_argv(argv[1:]).info_labels) if argv else {}
    if argv:
        labels["args"] = " ".join(argv[1:])  # already without passwords (see record.wrapper)
    labels.update({k: str(v) for k, v in (meta.get("info") or {}).items()})
    for key in (generator.version_key, *_META_LABELS):
        if meta.get(key) is not None:
            labels[key] = str(meta[key])
    labels["engine"] = run_engine(meta)  # which run dashboard shows it
    return labels


def run_engine(meta: Mapping[str, Any]) -> str:
    """The engine family a recorded run drove: as its meta.json says, else (runs recorded before engines
    were) the one its tool's argv drives, the tool's first for a run without argv (attach, import)."""
    recorded = meta.get("engine")
    if isinstance(recorded, str) and recorded:
        try:
            return engines.get(recorded).name
        except engines.UnknownEngine:
            return recorded
    argv = meta.get("argv") or []
    return loadgens.by_name(meta.get("tool")).engine_of([str(a) for a in argv[1:]])


def model_for_run(run_id: str, meta: Mapping[str, Any]) -> RunModel:
    """The model of a run recorded by ``run`` or ``attach``, as its meta.json describes it."""
    return loadgens.by_name(meta.get("tool")).run_model(run_id, meta, info_labels(meta))


def feed_lines(model: RunModel, lines: Iterable[bytes], arrival_epoch: float | None) -> list[Sample]:
    out: list[Sample] = []
    for line in lines:
        out.extend(model.feed_line(line, arrival_epoch))
    return out


def close(model: RunModel, end_epoch: float | None, exit_code: int | None) -> list[Sample]:
    """The end of a run: summary, running=0, then the staleness markers that end its curves."""
    return model.finish(end_epoch, exit_code) + model.end_markers()


def split_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


# -- a saved output (``import``) ------------------------------------------------

def last_progress_time(data: bytes) -> float | None:
    """The time of a saved output's last progress line (elapsed, or epoch above 1e8), whichever tool printed it."""
    elapsed = loadgens.for_output(data).progress_elapsed
    last = None
    for line in split_lines(data):
        t = elapsed(line)
        if t is not None:
            last = t
    return last


def model_for_output(data: bytes, run_id: str, start_epoch: float | None, *,
                     extra_labels: Mapping[str, str] | None = None) -> tuple[RunModel, list[bytes], float | None]:
    """The model of a saved output (of the tool that printed it), its lines, and when it ended (its last progress line)."""
    lines = split_lines(data)
    read = loadgens.for_output(data).output_model(lines, run_id, start_epoch, {"mode": "import", **(extra_labels or {})})
    return read.model, lines, read.last_progress_time


def replay_output(data: bytes, run_id: str, start_epoch: float | None, *,
                  extra_labels: Mapping[str, str] | None = None) -> tuple[RunModel, list[Sample]]:
    """A saved pgbench or sysbench output as the series of a live run, ended with the run (markers excluded:
    ``model.end_markers()`` adds them for Prometheus; OpenMetrics has no staleness)."""
    model, lines, last_time = model_for_output(data, run_id, start_epoch, extra_labels=extra_labels)
    samples = feed_lines(model, lines, None)
    if model.start_epoch is None:
        model.start_epoch = start_epoch or 0.0
    end = None
    if last_time is not None:
        end = last_time if last_time > 1e8 else model.start_epoch + last_time
    samples.extend(model.finish(end, None))
    return model, samples


# -- a run directory (snapshot rebuild) -----------------------------------------

def replay_run_dir(path: str, meta: Mapping[str, Any]) -> list[Sample]:
    """Every pgbench sample of a finished run directory, end markers included, as Prometheus got them."""
    run_id = run_id_of(meta, os.path.basename(os.path.normpath(path)))
    if meta.get("mode") == "import":
        model, samples = replay_output(saved_output(path), run_id, meta.get("clock_start_epoch"))
        return samples + model.end_markers()  # as import wrote them
    model = model_for_run(run_id, meta)
    model.add_arrivals(read_arrivals(_read(os.path.join(path, ARRIVALS)) or b""))
    end = meta.get("ended_at")
    out: list[Sample] = []
    for name in FILE_ORDER:  # the order the live follower reads them in
        chunk = _read(os.path.join(path, name))
        if chunk is not None:
            out.extend(feed_lines(model, split_lines(chunk), end))
    return out + close(model, end, meta.get("exit_code"))


def read_arrivals(data: bytes) -> list[float]:
    """The epochs of an arrivals file's complete lines."""
    out = []
    for line in split_lines(data[:data.rfind(b"\n") + 1]):
        try:
            out.append(float(line))
        except ValueError:
            pass
    return out


def saved_output(path: str) -> bytes:
    """A run directory's raw output as one stream: output.log (attach, import), else stderr then stdout,
    each ended with a newline; empty when there is none."""
    names = ("output.log",) if os.path.exists(os.path.join(path, "output.log")) else ("stderr.log", "stdout.log")
    data = b""
    for name in names:
        chunk = _read(os.path.join(path, name)) or b""
        data += chunk if chunk.endswith(b"\n") or not chunk else chunk + b"\n"
    return data


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
