"""``benchwatch import``: a saved pgbench output becomes the same series as a live run."""

from __future__ import annotations

import datetime as dt
import os
import re

from benchwatch.model.pgbench_run import RunModel, script_name
from benchwatch.model.samples import Sample
from benchwatch.parse import pgbench as po
from benchwatch.record import rundir


def parse_time(text: str) -> float:
    """RFC 3339 / ISO 8601 (a trailing Z is UTC; no zone means UTC) or Unix seconds."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


def info_from_summary(summary: dict[str, object], scripts: list[str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    if scripts:
        labels["script"] = "+".join(script_name(s) for s in scripts)
    elif "transaction_type" in summary:
        labels["script"] = script_name(str(summary["transaction_type"]))
    for key, label in (("clients", "clients"), ("threads", "threads"), ("scaling_factor", "scale"),
                       ("query_mode", "protocol"), ("duration_s", "duration_seconds"),
                       ("transactions_per_client", "transactions_per_client"), ("rate_limit_tps", "rate_limit_tps"),
                       ("pgbench_version", "pgbench_version")):
        if key in summary:
            value = summary[key]
            labels[label] = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return labels


def read_events(lines: list[bytes]) -> tuple[dict[str, object], list[str], float | None]:
    """First pass: the summary facts, script names and the last progress time."""
    parser = po.PgbenchOutputParser()
    summary: dict[str, object] = {}
    scripts: list[str] = []
    weights: dict[int, int] = {}
    sql_rows: dict[int, int] = {}
    last_time = None
    for line in lines:
        for event in parser.feed(line):
            if isinstance(event, po.Summary):
                summary[event.key] = event.value
            elif isinstance(event, po.ScriptHeader):
                scripts.append(event.name)
                weights[event.index] = event.weight or 1
            elif isinstance(event, po.StatementLatency) and not event.statement.startswith("\\"):
                sql_rows[event.script_index] = sql_rows.get(event.script_index, 0) + 1
            elif isinstance(event, po.Progress):
                last_time = event.time_s
    if sql_rows:
        total = sum(weights.get(i, 1) for i in sql_rows)
        summary["_sql_statements"] = sum(weights.get(i, 1) * n for i, n in sql_rows.items()) / total
    return summary, scripts, last_time


def build_samples(data: bytes, run_id: str, start_epoch: float | None, *,
                  extra_labels: dict[str, str] | None = None) -> tuple[RunModel, list[Sample]]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    summary, scripts, last_time = read_events(lines)
    labels = info_from_summary(summary, scripts)
    labels["mode"] = "import"
    labels.update(extra_labels or {})
    model = RunModel(run_id, info_labels=labels, start_epoch=start_epoch,
                     sql_statements=summary.get("_sql_statements"))
    samples: list[Sample] = []
    for line in lines:
        samples.extend(model.feed_line(line))
    if model.start_epoch is None:
        model.start_epoch = start_epoch or 0.0
    end = None
    if last_time is not None:
        end = last_time if last_time > 1e8 else model.start_epoch + last_time
    samples.extend(model.finish(end, None))
    return model, samples


def read_source(path: str) -> tuple[bytes, float | None]:
    """A saved output file, or a run directory (its raw files, and the clock start it recorded)."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read(), None
    run = rundir.RunDir(path)
    names = ("output.log",) if os.path.exists(run.file("output.log")) else ("stderr.log", "stdout.log")
    data = b""
    for name in names:
        if os.path.exists(run.file(name)):
            with open(run.file(name), "rb") as f:
                chunk = f.read()
            data += chunk if chunk.endswith(b"\n") or not chunk else chunk + b"\n"
    if not data:
        raise FileNotFoundError(f"no pgbench output in {path}")
    return data, run.read_meta().get("clock_start_epoch")


def default_start(path: str, data: bytes) -> tuple[float | None, str | None]:
    """Without --start: absolute progress timestamps need none; else the file's mtime minus the run length."""
    _, _, last_time = read_events(data.split(b"\n"))
    if last_time is None or last_time > 1e8:
        return None, None
    start = os.path.getmtime(path) - last_time
    return start, f"no --start given: assuming the run ended when the file was last modified ({dt.datetime.fromtimestamp(start, dt.UTC).isoformat()} start)"


def save_import(runs_dir: str, run_id: str, source: str, data: bytes, start_epoch: float | None,
                model: RunModel) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir, run_id)
    with open(run.file("output.log"), "wb") as f:
        f.write(data)
    run.write_meta({
        "run_id": run_id, "mode": "import", "state": rundir.FINISHED, "source_file": os.path.abspath(source),
        "clock_start_epoch": model.start_epoch, "started_at": model.start_epoch,
        "ended_at": (model.last_ts_ms or 0) / 1000.0, "progress_interval": model.interval_s,
        "summary": {k: v for k, v in model.summary.items()}, "output": "output.log",
    })
    return run
