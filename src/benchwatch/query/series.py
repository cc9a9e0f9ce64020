"""Raw series of a run: fetched from Prometheus, kept as CSV, read back.

One CSV file per metric name, long format (one row per sample):

    __name__,<label>,<label>,...,time,value
    pg_checkpoint_in_progress,checkpoint,wal,1795371190.365,1

``time`` is Unix seconds with millisecond precision (Prometheus' own
resolution, so a round trip is exact); ``value`` is Python's shortest exact
float text, with Prometheus' spellings NaN, +Inf, -Inf. A label a series does
not have is an empty cell (Prometheus treats an empty label as absent).
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

from benchwatch.model import names as series_names
from benchwatch.model.samples import Sample
from benchwatch.query import prometheus


@dataclass
class Series:
    name: str
    labels: dict[str, str]
    samples: list[tuple[int, float]] = field(default_factory=list)  # (ms, value), time order

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted(self.labels.items()))


def format_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def parse_value(text: str) -> float:
    return float(text)  # float() reads NaN, +Inf, -Inf, Inf as well


def csv_file_name(metric: str) -> str:
    return metric.replace(":", "__") + ".csv"


def write_csv_dir(directory: str, series: list[Series]) -> list[str]:
    """One file per metric name; returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    by_name: dict[str, list[Series]] = {}
    for s in series:
        by_name.setdefault(s.name, []).append(s)
    written = []
    for name, members in sorted(by_name.items()):
        label_names = sorted({k for s in members for k in s.labels})
        path = os.path.join(directory, csv_file_name(name))
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["__name__", *label_names, "time", "value"])
            for s in sorted(members, key=lambda s: s.key):
                prefix = [name, *(s.labels.get(k, "") for k in label_names)]
                for ts, v in s.samples:
                    w.writerow([*prefix, f"{ts / 1000:.3f}", format_value(v)])
        written.append(path)
    return written


def read_csv_dir(directory: str) -> list[Series]:
    out: dict[tuple, Series] = {}
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".csv"))
    except FileNotFoundError:
        return []
    for n in names:
        with open(os.path.join(directory, n), newline="", encoding="utf-8") as f:
            rows = csv.reader(f)
            header = next(rows, None)
            if not header or header[0] != "__name__" or header[-2:] != ["time", "value"]:
                continue  # not a series file
            label_names = header[1:-2]
            for row in rows:
                if len(row) != len(header):
                    continue
                labels = {k: v for k, v in zip(label_names, row[1:-2]) if v != ""}
                s = Series(series_names.current(row[0]), labels)
                s = out.setdefault(s.key, s)
                s.samples.append((int(round(float(row[-2]) * 1000)), parse_value(row[-1])))
    for s in out.values():
        s.samples.sort()
    return list(out.values())


def fetch(base: str, selectors: list[str], start: float, end: float) -> list[Series]:
    """Every raw sample of the selectors in (start, end], as stored (no step, no lookback)."""
    window = max(1, int(math.ceil(end - start)))
    found: dict[tuple, Series] = {}
    for sel in selectors:
        result = prometheus.query(base, f"{sel}[{window}s]", end)
        for r in result:
            labels = dict(r["metric"])
            # A stored run's old series name is read as the name of now (benchwatch.model.names).
            name = series_names.current(labels.pop("__name__", ""))
            s = Series(name, labels)
            if s.key in found:
                continue
            # One sample per millisecond: a store that took the same sample twice (VictoriaMetrics without
            # -dedup.minScrapeInterval) returns both, Prometheus never does.
            samples = [(int(round(float(t) * 1000)), parse_value(v)) for t, v in r.get("values", [])]
            s.samples = [p for i, p in enumerate(samples) if i == 0 or p[0] != samples[i - 1][0]]
            found[s.key] = s
    return sorted(found.values(), key=lambda s: s.key)


def merge(*groups: list[Series]) -> list[Series]:
    """Union by (name, labels); the first group that has a series wins."""
    out: dict[tuple, Series] = {}
    for group in groups:
        for s in group:
            out.setdefault(s.key, s)
    return sorted(out.values(), key=lambda s: s.key)


def select(series: list[Series], name: str, **labels: str) -> list[Series]:
    return [s for s in series if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def from_samples(samples: list[Sample]) -> list[Series]:
    """Samples (a run's replay, as the exporter produced them) as series, each in time order, in key order."""
    by_key: dict[tuple, Series] = {}
    for s in samples:
        key = (s.name, s.labels)
        if key not in by_key:
            by_key[key] = Series(s.name, dict(s.labels))
        by_key[key].samples.append((s.timestamp_ms, s.value))
    for ser in by_key.values():
        ser.samples.sort()
    return sorted(by_key.values(), key=lambda s: s.key)
