"""The one way a recorded run becomes samples: live, on ``import``, and in a snapshot rebuild.

A run is its raw output plus what ``meta.json`` says about it (see
benchwatch.record.rundir). The live exporter feeds lines as they are written;
``import`` and the rebuild feed a whole saved output at once. All three build
the model with :func:`model_for_run` or :func:`model_for_output`, feed lines
in :data:`FILE_ORDER`, and end with :func:`close`, so a backfilled or rebuilt
run is sample for sample the run Prometheus had live.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.model import pasted as _pasted
from benchwatch.model.run import MAX_TIME_S, METRICS, RunModel, figure_problem
from benchwatch.model.samples import Sample
from benchwatch.util import bounds


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

# Where a saved output gives no time of its own for run k+1, it starts when run k ended.
PLACED_AFTER_PREVIOUS = "placed right after the previous run's end (the file gives no start of its own)"


@dataclass
class SavedRun:
    """One run of a saved output: its tool, its lines (as read through the paste) and their line numbers."""

    generator: loadgens.LoadGenerator
    lines: list[bytes]
    numbers: list[int]
    length_s: float | None = None   # its last progress time or its summary's duration, the longer; None: epochs
    # The file's only run: the parser that cut the file, fed every line, and its events per line, so
    # that the replay does not parse the lines again (a third of a 12-hour import's time).
    parser: object | None = None
    events: list[list[object]] | None = None


@dataclass
class ReadRun:
    """One run of a saved output replayed: its model and samples, where it sits in time, and what was not read."""

    index: int                 # 1-based, in file order
    run_id: str
    model: RunModel
    samples: list[Sample]
    start_epoch: float
    end_epoch: float
    first_line: int            # its first and last line numbers in the file
    last_line: int
    unread: list[tuple[int, str, str]] = field(default_factory=list)   # (line number, reason, text)
    placed_after_previous: bool = False
    # Why the run was not imported (its place in time is none a clock has): it has no id, no samples.
    skipped: str | None = None

    @property
    def read_nothing(self) -> bool:
        return self.model.progress_lines == 0 and not any(k in self.model.summary for k in _RESULT_KEYS)


# Summary facts that are a run's results (not its header): a run with none of these and no progress line read nothing.
_RESULT_KEYS = ("tps", "latency_avg_s", "transactions", "transactions_processed")


def _kind(event: object) -> str:
    """What a parser event is for cutting a file into runs: every tool's parser names its events alike."""
    return type(event).__name__


# A progress time beyond MAX_TIME_S (seconds, elapsed or epoch: the year 2286) is a corrupted line's, not a
# clock's: it neither starts a run nor ends one.


def _plausible(time_s: object) -> float | None:
    if isinstance(time_s, (int, float)) and math.isfinite(time_s) and 0 <= time_s <= MAX_TIME_S:
        if time_s > 1e8 and bounds.future_problem("time", time_s) is not None:
            return None  # a Unix time after now is a damaged line's (the run model refuses it too)
        return float(time_s)
    return None


def _progress_time(event: object) -> float | None:
    """The time of a progress line that can carry a run's clock: none for a bad line (its tps nan, inf,
    negative or absurd: the run model counts it and writes nothing), whose time may be as damaged."""
    if figure_problem("tps", getattr(event, "tps", None)) is not None:
        return None
    return _plausible(getattr(event, "time_s", None))


def split_runs(pasted: _pasted.Pasted, generator: loadgens.LoadGenerator) -> list[SavedRun]:
    """A saved output cut into its runs. A new run begins where the elapsed time starts again or its
    lines switch between elapsed seconds and Unix times, where a progress line follows a summary, or
    where a header or summary fact already seen comes again (a new banner or header); the cut goes
    right after the last line the run before read."""
    parser = generator.output_model([], "split", None, {}).model.new_parser()
    runs: list[tuple[int, int, float | None]] = []
    begin = 0
    length: float | None = 0.0
    last_read = -1             # index of the current run's last line that carried something
    seen: set[str] = set()
    has_progress = has_end = False
    last_time: float | None = None
    first_run_events: list[list[object]] | None = []
    for i, line in enumerate(pasted.lines):
        events = parser.feed(line)
        if first_run_events is not None:
            first_run_events.append(events)
        cut = False
        times = []             # each event's kind and, for progress, its time: worked out once
        for event in events:
            kind = _kind(event)
            time_s = None
            if kind == "Progress":
                time_s = _progress_time(event)
                if has_end or (last_time is not None and time_s is not None
                               and (time_s < last_time or (time_s > 1e8) != (last_time > 1e8)
                                    or time_s > last_time + bounds.MAX_STEP_S)):
                    # Its clock starts again, switches between elapsed seconds and Unix times, or jumps
                    # further than a run's clock goes at one line (benchwatch.util.bounds): another run.
                    cut = True
            elif kind == "Summary":
                key = str(getattr(event, "key", ""))
                if key in seen and (has_progress or has_end):
                    cut = True
            times.append((kind, time_s))
        if cut and last_read >= begin:
            runs.append((begin, last_read + 1, length))
            begin = last_read + 1
            seen, has_progress, has_end, last_time, length = set(), False, False, None, 0.0
            parser = generator.output_model([], "split", None, {}).model.new_parser()
            events = parser.feed(line)
            first_run_events = None
            times = [(_kind(e), _progress_time(e) if _kind(e) == "Progress" else None) for e in events]
        for event, (kind, time_s) in zip(events, times, strict=True):
            if kind not in ("Ignored", "Unparsed"):
                last_read = i
            if kind == "Progress":
                has_progress = True
                last_time = time_s if time_s is not None else last_time
                if time_s is not None and length is not None:
                    length = None if time_s > 1e8 else max(length, time_s)
            elif kind == "Summary":
                key = str(getattr(event, "key", ""))
                seen.add(key)
                if key == "tps":
                    has_end = True
                value = getattr(event, "value", None)
                if key in _DURATION_KEYS and isinstance(value, (int, float)) and 0 <= value < 1e8 and length is not None:
                    length = max(length, float(value))
    runs.append((begin, len(pasted.lines), length))
    saved = [SavedRun(generator, pasted.lines[a:b], pasted.numbers[a:b], n) for a, b, n in runs if b > a]
    if len(saved) == 1 and first_run_events is not None:
        saved[0].parser, saved[0].events = parser, first_run_events
    return saved


def read_saved(data: bytes) -> tuple[list[SavedRun], list[tuple[int, str]]]:
    """A saved output's runs, and the lines set aside as a paste's (fences, elisions, shell traces)."""
    pasted = _pasted.read_pasted(data)
    generator = loadgens.for_output(b"\n".join(pasted.lines))
    return split_runs(pasted, generator), pasted.set_aside


def _unread_reason(line: bytes, generator: loadgens.LoadGenerator) -> str:
    if generator.progress_elapsed(line) is not None or line.lstrip().startswith((b"progress", b"[")):
        return f"a {generator.title} progress line in no format benchwatch knows (cut or malformed)"
    return f"not a line {generator.title} prints"


# Summary facts that say how long a run took (pgbench -T, sysbench's total time).
_DURATION_KEYS = ("duration_s", "total_time_s")


def _duration(model: RunModel) -> float:
    for key in _DURATION_KEYS:
        value = model.summary.get(key)
        if isinstance(value, (int, float)) and 0 <= value < 1e8:  # a figure, not a corrupted line's
            return float(value)
    return 0.0


# How often a replayed run repeats its heartbeat series (RunModel.heartbeat_every_ms): well within
# Prometheus' 5-minute lookback, so every instant of the run still finds its run info.
REPLAY_HEARTBEAT_MS = 60_000


def replay_run(run: SavedRun, index: int, run_id: str, start_epoch: float | None, *,
               extra_labels: Mapping[str, str] | None = None) -> ReadRun:
    """One run of a saved output as the series of a live run, ended with the run (markers excluded:
    ``model.end_markers()`` adds them for Prometheus; OpenMetrics has no staleness)."""
    read = run.generator.output_model(run.lines, run_id, start_epoch, {"mode": "import", **(extra_labels or {})})
    model = read.model
    model.heartbeat_every_ms = REPLAY_HEARTBEAT_MS
    samples: list[Sample] = []
    unread: list[tuple[int, str, str]] = []
    # A run model that says why it could not use a line (a bad figure, e.g. nan tps) keeps (its line number,
    # reason) in ``bad_lines``; that reason is the better one, our line number the file's.
    told = getattr(model, "bad_lines", None)
    parsed: Iterable[list[object] | None] = itertools.repeat(None)
    if run.parser is not None and run.events is not None:
        # Parsed already by the cut into runs: the model takes that parser over (its flush at the
        # end included). Once only: the parser is the model's now.
        model.parser, parsed = run.parser, run.events
        run.parser = run.events = None
    for number, line, events in zip(run.numbers, run.lines, parsed):
        before, said = model.unparsed_lines, len(told) if isinstance(told, list) else 0
        samples.extend(model.feed_line(line, None, events))
        if model.unparsed_lines != before:
            reason = _unread_reason(line, run.generator)
            if isinstance(told, list) and len(told) > said and told[-1][1] != "not understood":
                reason = told[-1][1]
            unread.append((number, str(reason), line.decode("utf-8", "replace")))
    if model.start_epoch is None:
        model.start_epoch = start_epoch or 0.0
    last_time = read.last_progress_time
    end = None
    if last_time is not None and last_time > 1e8:
        end = last_time
    elif last_time is not None or _duration(model):
        end = model.start_epoch + max(last_time or 0.0, _duration(model))
    # Its end, which places the next run, is no further than the run's clock went (the lines the model
    # took) and a step more (the summary's duration): a number the model refused does not place it.
    clock = model.start_epoch + (model.last_line_time_s or 0.0)
    problem = bounds.epoch_problem("its end", end) if end is not None else None
    if problem is None and end is not None and end > clock + bounds.MAX_STEP_S:
        problem = f"is {end - clock:.0f} s after its last line (more than a week)"
    if problem is not None:
        if end is not None and last_time is not None and end - model.start_epoch <= last_time + 0.001:
            pass  # the last progress time the model refused, and reported with its line
        else:
            unread.append((run.numbers[-1] if run.numbers else 0,
                           f"the run's end by its summary's duration {problem}: damaged, not used", ""))
        end = clock if model.last_line_time_s is not None else None
    samples.extend(model.finish(end, None))
    return ReadRun(index, run_id, model, samples, model.start_epoch,
                   end if end is not None else model.start_epoch,
                   run.numbers[0] if run.numbers else 0, run.numbers[-1] if run.numbers else 0, unread)


def replay_saved(data: bytes, run_ids: Callable[[int, float | None], str], start_epoch: float | None, *,
                 extra_labels: Mapping[str, str] | None = None,
                 saved: tuple[list[SavedRun], list[tuple[int, str]]] | None = None,
                 ) -> tuple[list[ReadRun], list[tuple[int, str]]]:
    """Every run of a saved output replayed in file order: the first at ``start_epoch`` (or its own
    timestamps), each next one at its own timestamps or else right after the one before ended.
    ``run_ids(k, start)`` names run k (1-based). Also the lines set aside as a paste's.
    ``saved``: what :func:`read_saved` gave for ``data``, when the caller has it already."""
    runs, set_aside = saved if saved is not None else read_saved(data)
    out: list[ReadRun] = []
    start = start_epoch
    for k, run in enumerate(runs, 1):
        placed_after_previous = k > 1 and not _absolute(run)
        problem = bounds.epoch_problem("its start", start) if start is not None and placed_after_previous else None
        if problem is not None:
            # Placed after the previous run's end, which figures of the input pushed to where no clock goes:
            # neither a run id nor a sample can be made of it. The run is reported and skipped; a run that
            # carries its own times (or a next file) is placed again.
            out.append(_skipped(run, k, start, f"placed right after run {k - 1}'s end, {problem}"))
            continue
        read = replay_run(run, k, run_ids(k, start), start, extra_labels=extra_labels)
        read.placed_after_previous = placed_after_previous
        out.append(read)
        # Right after it: its end, and after its last sample (written 1 ms after a line at the end itself).
        start = max(read.end_epoch, ((read.model.last_ts_ms or 0) + 1) / 1000.0)
    return out, set_aside


def _skipped(run: SavedRun, index: int, start: float | None, why: str) -> ReadRun:
    """A run of a saved output that cannot be placed in time: reported with its lines, nothing of it imported."""
    model = run.generator.output_model([], "", None, {"mode": "import"}).model
    first, last = (run.numbers[0], run.numbers[-1]) if run.numbers else (0, 0)
    at = bounds.epoch_or_none(start) or 0.0
    return ReadRun(index, "", model, [], at, at, first, last,
                   [(first, f"run {index} not imported: {why}", "")], skipped=why)


def carries_epochs(run: SavedRun) -> bool:
    """Whether a saved run's progress lines carry Unix times (pgbench --progress-timestamp): it places itself."""
    return _absolute(run)


def _absolute(run: SavedRun) -> bool:
    last = None
    for line in run.lines:
        t = _plausible(run.generator.progress_elapsed(line))
        if t is not None:
            last = t
    return last is not None and last > 1e8


def saved_length(data: bytes) -> float | None:
    """How long the runs of a saved output took together (seconds; None when its progress lines carry epochs
    or it has no progress line and no duration): what places it when the file is all there is."""
    runs, _ = read_saved(data)
    if not runs or any(r.length_s is None for r in runs):
        return None
    total = sum(r.length_s or 0.0 for r in runs)
    return total if total > 0 else None


def replay_output(data: bytes, run_id: str, start_epoch: float | None, *,
                  extra_labels: Mapping[str, str] | None = None) -> tuple[RunModel, list[Sample]]:
    """A saved output's runs as one list of samples (the first run named ``run_id``, the next ``run_id-2``, ...);
    the model is the first run's."""
    reads, _ = replay_saved(data, lambda k, s: run_id if k == 1 else f"{run_id}-{k}", start_epoch,
                            extra_labels=extra_labels)
    if not reads:
        model = loadgens.for_output(data).output_model([], run_id, start_epoch, {"mode": "import"}).model
        model.start_epoch = start_epoch or 0.0
        return model, model.finish(None, None)
    return reads[0].model, [s for r in reads for s in r.samples]


# -- a run directory (snapshot rebuild) -----------------------------------------

def replay_run_dir(path: str, meta: Mapping[str, Any]) -> list[Sample]:
    """Every pgbench sample of a finished run directory, end markers included, as Prometheus got them."""
    model, samples = replay_run_dir_model(path, meta)
    return samples + model.end_markers()


def replay_run_dir_model(path: str, meta: Mapping[str, Any]) -> tuple[RunModel, list[Sample]]:
    """A finished run directory read again: its model (its summary) and its samples, end markers excluded."""
    run_id = run_id_of(meta, os.path.basename(os.path.normpath(path)))
    if meta.get("mode") == "import":
        return replay_output(saved_output(path), run_id, meta.get("clock_start_epoch"))  # as import wrote them
    model = model_for_run(run_id, meta)
    model.add_arrivals(read_arrivals(_read(os.path.join(path, ARRIVALS)) or b""))
    end = meta.get("ended_at")
    out: list[Sample] = []
    for name in FILE_ORDER:  # the order the live follower reads them in
        chunk = _read(os.path.join(path, name))
        if chunk is not None:
            model.sources.append((model.line_number, name))
            out.extend(feed_lines(model, split_lines(chunk), end))
    return model, out + model.finish(end, meta.get("exit_code"))


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
