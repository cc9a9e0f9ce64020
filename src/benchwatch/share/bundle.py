"""Writing a snapshot (or comparison) to one directory and one .tar.gz beside it."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import shutil
import tarfile
import time

from benchwatch.query.series import write_csv_dir
from benchwatch.record import rundir
from benchwatch.share import grafana_snapshot, html, png
from benchwatch.share import summary as sm
from benchwatch.share.collect import Collected, scrub
from benchwatch.share.rebuild import SERIES_DIR


class SecretFound(RuntimeError):
    pass


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "panel"


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def write_panel_csvs(c: Collected, directory: str) -> list[str]:
    """Each panel's data as Grafana shows it: time series wide (one column per series), stats and tables long."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for p in c.panels:
        frames = [(t, f) for t in p["targets"] for f in t["frames"]]
        path = os.path.join(directory, f"{p['id']:02d}-{slug(p['title'])}.csv")
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            if p["type"] == "timeseries":
                names = [f["name"] for _, f in frames]
                times = sorted({pt[0] for _, f in frames for pt in f["points"]})
                columns = [dict((pt[0], pt[1]) for pt in f["points"]) for _, f in frames]
                w.writerow(["time", "time_utc", *names])
                for ts in times:
                    w.writerow([f"{ts / 1000:.3f}", _utc(ts), *("" if col.get(ts) is None else repr(col[ts]) for col in columns)])
            else:
                label_names = sorted({k for _, f in frames for k in f["labels"]})
                w.writerow(["ref_id", "name", *label_names, "time", "value"])
                for t, f in frames:
                    for ts, v in f["points"]:
                        w.writerow([t["refId"], f["name"], *(f["labels"].get(k, "") for k in label_names),
                                    f"{ts / 1000:.3f}", "" if v is None else repr(v)])
        written.append(path)
    return written


def write_annotations_csv(c: Collected, path: str) -> str:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["annotation", "start", "end", "start_utc", "end_utc", "title", "text", "tags"])
        for a in c.annotations:
            for e in a["events"]:
                w.writerow([a["name"], f"{e['time'] / 1000:.3f}", f"{e['timeEnd'] / 1000:.3f}", _utc(e["time"]),
                            _utc(e["timeEnd"]), e["title"], e["text"], ",".join(e["tags"])])
    return path


def copy_raw(run: rundir.RunDir, directory: str) -> list[str]:
    """The run directory as a run directory again (meta.json scrubbed), so the snapshot rebuilds from it."""
    os.makedirs(directory, exist_ok=True)
    written = []
    meta = scrub(run.read_meta())
    path = os.path.join(directory, "meta.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    written.append(path)
    for name in sorted(os.listdir(run.path)):
        src = run.file(name)
        if name in rundir.OUTPUT_FILES or name == rundir.ARRIVALS or (name.startswith("pgbench_log") and os.path.isfile(src)):
            shutil.copy2(src, os.path.join(directory, name))
            written.append(os.path.join(directory, name))
    saved = run.file(SERIES_DIR)
    if os.path.isdir(saved):
        shutil.copytree(saved, os.path.join(directory, SERIES_DIR), dirs_exist_ok=True)
        written += [os.path.join(directory, SERIES_DIR, n) for n in sorted(os.listdir(saved))]
    return written


def _needles(secrets: list[str]) -> list[bytes]:
    # A secret shorter than 4 characters would match by chance in any text: not looked for.
    return [s.encode() for s in secrets if s and len(s) >= 4]


def carries_secret(text: str, secrets: list[str]) -> bool:
    """Whether ``text`` (a comment, a report leaving the host) contains one of the secrets, by the rule of
    :func:`check_secrets`."""
    data = text.encode()
    return any(n in data for n in _needles(secrets))


def check_secrets(directory: str, secrets: list[str]) -> None:
    """Fail if any file under directory contains one of the secrets (passwords, tokens);
    the directory is removed then, so nothing with a secret is left to share."""
    needles = _needles(secrets)
    if not needles:
        return
    for root, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            for n in needles:
                if n in data:
                    where = os.path.relpath(os.path.join(root, name), directory)
                    shutil.rmtree(directory, ignore_errors=True)
                    raise SecretFound(f"{where} contained a secret (a password or token): nothing was written")


def pack(directory: str) -> str:
    """directory.tar.gz next to it, with the directory's name as the top-level folder."""
    archive = directory.rstrip("/") + ".tar.gz"
    base = os.path.basename(directory.rstrip("/"))

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(directory, arcname=base, filter=clean)
    return archive


def write_snapshot(c: Collected, run: rundir.RunDir, out_dir: str, secrets: list[str] | None = None,
                   name: str | None = None) -> tuple[str, str, dict]:
    """Everything into <out_dir>/<name>/ and <out_dir>/<name>.tar.gz; returns (dir, archive, grafana body)."""
    target = os.path.join(out_dir, name or f"snapshot-{c.run_id}")
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(target)
    pictures = png.snapshot_pngs(c, target)
    body = grafana_snapshot.build(c)
    with open(os.path.join(target, "grafana-snapshot.json"), "w", encoding="utf-8") as f:
        json.dump(body, f, indent=1, sort_keys=True, allow_nan=False)
        f.write("\n")
    notes = [f"source: {'the stack Prometheus' if c.source == 'prometheus' else 'the run directory alone (rebuilt)'}"] + c.notes
    with open(os.path.join(target, "index.html"), "w", encoding="utf-8") as f:
        f.write(html.snapshot_page(c, notes))
    with open(os.path.join(target, "summary.md"), "w", encoding="utf-8") as f:
        f.write(sm.to_markdown(c.summary, notes, [os.path.basename(p) for p in pictures]))
    with open(os.path.join(target, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(c.summary, f, indent=1, sort_keys=True)
        f.write("\n")
    data = os.path.join(target, "data")
    write_csv_dir(os.path.join(data, "series"), c.series)
    write_panel_csvs(c, os.path.join(data, "panels"))
    write_annotations_csv(c, os.path.join(data, "annotations.csv"))
    copy_raw(run, os.path.join(target, "raw"))
    manifest = {"run_id": c.run_id, "source": c.source, "generated_at": time.time(),
                "time_range": {"from": c.start, "to": c.end}, "notes": notes,
                "files": sorted(os.path.relpath(os.path.join(r, n), target) for r, _, ns in os.walk(target) for n in ns)}
    with open(os.path.join(target, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    check_secrets(target, secrets or [])
    return target, pack(target), body
