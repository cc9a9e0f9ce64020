"""The sample type shared by every benchwatch producer and writer.

A :class:`Sample` is one float value of one series at one instant.  Producers
(the pgbench log parsers, the run model, the exporter) build them with
:func:`sample`, which normalises the labels; the writers
(:mod:`benchwatch.sink.remote_write`, :mod:`benchwatch.sink.openmetrics`) consume them.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import NamedTuple

__all__ = [
    "Sample",
    "SeriesKey",
    "group_by_series",
    "sample",
    "validate_series",
]

# Prometheus data model: metric names may contain colons, label names may not.
METRIC_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class Sample(NamedTuple):
    """One value of one series.

    ``labels`` holds ``(name, value)`` pairs sorted by name, without
    ``__name__`` (the metric name is ``name``).  Build instances with
    :func:`sample` unless the labels are already normalised.

    A named tuple, not a frozen dataclass: as immutable, and built in less than half the time
    (a 12-hour import builds 400,000 of them).
    """

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp_ms: int

    @property
    def series(self) -> SeriesKey:
        """The identity of the series: ``(name, labels)``."""
        return (self.name, self.labels)


class RisingSeries:
    """Writes samples whose timestamps only go up within each series, with constant labels added: events a
    log gives the same millisecond, or an end written after a heartbeat already past it, would otherwise
    overwrite one another in Prometheus (a later one is moved 1 ms on)."""

    def __init__(self, const_labels: Mapping[str, str] | None = None):
        self.const = dict(const_labels or {})
        self._last: dict[SeriesKey, int] = {}

    def emit(self, out: list[Sample], name: str, labels: Mapping[str, object], value: float, ts: int) -> int:
        """Append the sample to ``out``; returns the timestamp it was given."""
        s = sample(name, {**self.const, **labels}, value, ts)
        last = self._last.get(s.series)
        if last is not None and ts <= last:
            ts = last + 1
            s = Sample(s.name, s.labels, s.value, ts)
        self._last[s.series] = ts
        out.append(s)
        return ts

    def last(self, name: str, labels: Mapping[str, object]) -> int | None:
        """The timestamp of the series' last sample, None before its first."""
        return self._last.get(sample(name, {**self.const, **labels}, 0, 0).series)


def sample(
    name: str,
    labels: Mapping[str, object] | None,
    value: float,
    timestamp_ms: int,
) -> Sample:
    """Build a :class:`Sample`, normalising its labels.

    Label values are converted with ``str``; labels whose value is the empty
    string are dropped, because Prometheus treats an empty label value as an
    absent label.  ``value`` is converted to ``float`` and ``timestamp_ms`` to
    ``int`` (milliseconds since the Unix epoch, UTC).
    """
    if labels:
        key = tuple(labels.items())
        try:
            pairs = _PAIRS.get(key)
        except TypeError:  # a value that cannot be hashed
            pairs = None
        if pairs is None:
            if "__name__" in labels:
                raise ValueError("pass the metric name as `name`, not as a __name__ label")
            pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items() if v is not None and str(v) != ""))
            if all(type(k) is str and type(v) is str for k, v in key):  # 1 == True == 1.0, but not as labels
                if len(_PAIRS) >= _PAIRS_KEPT:
                    _PAIRS.clear()
                _PAIRS[key] = pairs
    else:
        pairs = ()
    return Sample(name, pairs, float(value), int(timestamp_ms))


# Label sets seen recently, as given -> normalised: a run writes the same few thousand again and again
# (a 12-hour import builds 400,000 samples from them).
_PAIRS: dict[tuple[tuple[str, object], ...], tuple[tuple[str, str], ...]] = {}  # only str keys and values
_PAIRS_KEPT = 4096


def validate_series(name: str, labels: Iterable[tuple[str, str]]) -> None:
    """Raise ``ValueError`` unless name and label names follow the Prometheus data model."""
    if not METRIC_NAME_RE.match(name):
        raise ValueError(f"invalid metric name {name!r}")
    seen = set()
    for label_name, _ in labels:
        if label_name == "__name__":
            raise ValueError(f"series {name!r}: __name__ must not be among the labels")
        if not LABEL_NAME_RE.match(label_name):
            raise ValueError(f"series {name!r}: invalid label name {label_name!r}")
        if label_name in seen:
            raise ValueError(f"series {name!r}: duplicate label {label_name!r}")
        seen.add(label_name)


_BY_TIMESTAMP = itemgetter(3)  # Sample.timestamp_ms


def group_by_series(samples: Iterable[Sample]) -> dict[SeriesKey, list[Sample]]:
    """Group samples by series; each series' samples in timestamp order.

    Series keep the order in which they first appear.  When one series has
    several samples with the same timestamp, the last one given wins (Prometheus
    and promtool reject two different values at one timestamp).
    """
    groups: dict[SeriesKey, list[Sample]] = {}
    get = groups.get
    for s in samples:
        key = (s[0], s[1])  # (name, labels), by index: faster than a named tuple's names
        lst = get(key)
        if lst is None:
            groups[key] = [s]
        else:
            lst.append(s)
    for key, lst in groups.items():
        if len(lst) > 1:
            groups[key] = _sorted_last_wins(lst)
    return groups


def _sorted_last_wins(lst: list[Sample]) -> list[Sample]:
    if not all(a[3] < b[3] for a, b in zip(lst, lst[1:])):  # mostly in order already, no timestamp twice
        lst.sort(key=_BY_TIMESTAMP)  # stable: equal timestamps keep input order
    else:
        return lst
    prev = lst[0].timestamp_ms
    for s in lst[1:]:
        ts = s.timestamp_ms
        if ts == prev:
            break
        prev = ts
    else:
        return lst  # no duplicate timestamps: the common case
    out: list[Sample] = []
    last_ts = None
    for s in lst:
        if s.timestamp_ms == last_ts:
            out[-1] = s
        else:
            out.append(s)
            last_ts = s.timestamp_ms
    return out


# Prometheus' staleness marker: a NaN with this exact bit pattern ends a series.
STALE_NAN_BITS = 0x7FF0000000000002
STALE_NAN = struct.unpack("<d", struct.pack("<Q", STALE_NAN_BITS))[0]


def is_stale_marker(value: float) -> bool:
    """True for the staleness marker (not for an ordinary NaN, which is a value)."""
    return value != value and struct.unpack("<Q", struct.pack("<d", value))[0] == STALE_NAN_BITS
