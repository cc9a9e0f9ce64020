"""OpenMetrics text output for backfilling with promtool.

``promtool tsdb create-blocks-from openmetrics FILE DIR`` (Prometheus 2.42)
parses the file with Prometheus' OpenMetrics parser and requires:

* every sample to carry a timestamp, in seconds (we write milliseconds as
  three decimals; see :func:`format_timestamp` for the one subtlety);
* the file to end with ``# EOF``;
* each series' samples in time order, one value per timestamp (its block
  writer rejects out-of-order and duplicate samples);
* label names ``[a-zA-Z_][a-zA-Z0-9_]*``, label values quoted with ``\\``,
  ``"`` and newline escaped, HELP text escaped the same way;
* ``# HELP``/``# TYPE`` lines with a space after the family name.

OpenMetrics itself further requires metric families to be contiguous with
their metadata once, before their samples, and a counter family ``foo`` to
expose its samples as ``foo_total`` while TYPE/HELP name ``foo``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TextIO

from benchwatch.model.samples import Sample, group_by_series, validate_series

__all__ = ["escape_label_value", "format_timestamp", "format_value", "write_openmetrics"]

_SUPPORTED_TYPES = ("counter", "gauge", "unknown")


def escape_label_value(value: str) -> str:
    """Escape backslash, double quote and newline for a quoted label value (or HELP text)."""
    if "\\" in value:
        value = value.replace("\\", "\\\\")
    if '"' in value:
        value = value.replace('"', '\\"')
    if "\n" in value:
        value = value.replace("\n", "\\n")
    return value


def format_value(value: float) -> str:
    """A float as OpenMetrics writes it: ``NaN``, ``+Inf``, ``-Inf`` or the
    shortest decimal that reads back as the same double."""
    v = float(value)
    if v != v:
        return "NaN"
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    return repr(v)


def format_timestamp(timestamp_ms: int) -> str:
    """Milliseconds as seconds with three decimals, e.g. ``1452074400.250``.

    Prometheus reads the timestamp as a float and converts it with
    ``int64(seconds * 1000)``, which *truncates*: for some instants (about
    0.6% of all milliseconds, e.g. 131570.800) the nearest double of the
    decimal times 1000 lands just below the integer, and the sample would be
    read back one millisecond early.  For those we write the next double away
    from zero instead (a few more digits), which reads back exactly whether
    the reader truncates or rounds.
    """
    ms = int(timestamp_ms)
    sign = "-" if ms < 0 else ""
    secs, frac = divmod(abs(ms), 1000)
    text = f"{sign}{secs}.{frac:03d}"
    seconds = float(text)
    if int(seconds * 1000) == ms:
        return text
    nudged = math.nextafter(seconds, math.copysign(math.inf, seconds))
    if int(nudged * 1000) != ms:  # only far beyond year 5000 (|ms| > 1e15)
        raise ValueError(f"timestamp {ms} ms cannot be written exactly as float seconds")
    return repr(nudged)


def _family_of(name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """The (family name, type) of a sample name."""
    mtype = types.get(name)
    if name.endswith("_total"):
        family = name[: -len("_total")]
        if mtype is None:
            mtype = types.get(family)
        if mtype == "counter":
            return family, "counter"
    if mtype is None:
        mtype = "gauge"
    if mtype == "counter":
        raise ValueError(f"counter {name!r}: counter samples must be named <family>_total")
    if mtype not in _SUPPORTED_TYPES:
        raise ValueError(f"{name!r}: unsupported metric type {mtype!r} (supported: {', '.join(_SUPPORTED_TYPES)})")
    return name, mtype


def write_openmetrics(
    samples: Iterable[Sample],
    out: TextIO,
    *,
    types: Mapping[str, str] | None = None,
    help: Mapping[str, str] | None = None,
) -> int:
    """Write samples as OpenMetrics text to ``out``; return the number of
    sample lines written.

    ``types`` maps a metric name to ``"counter"``, ``"gauge"`` or
    ``"unknown"``; names without an entry are gauges.  A counter's samples
    must be named ``<family>_total``; the key may be the family name or the
    ``_total`` sample name.  ``help`` maps a family (or sample) name to its
    HELP text.  Families are written in name order, each with its TYPE (and
    HELP) once, followed by its series in label order, each series' samples in
    time order (for one timestamp the last sample given wins).  The output
    ends with ``# EOF``.  Raises ``ValueError`` for invalid names, an
    unsupported type, or two families whose names would collide.
    """
    types = types or {}
    help = help or {}
    groups = group_by_series(samples)

    # family name -> (type, {series key -> samples})
    families: dict[str, tuple[str, dict]] = {}
    family_of_name: dict[str, tuple[str, str]] = {}
    for key, series_samples in groups.items():
        name, labels = key
        validate_series(name, labels)  # before writing anything
        fam = family_of_name.get(name)
        if fam is None:
            fam = family_of_name[name] = _family_of(name, types)
        family, mtype = fam
        entry = families.get(family)
        if entry is None:
            entry = families[family] = (mtype, {})
        elif entry[0] != mtype:
            raise ValueError(f"metric family {family!r} is both {entry[0]} and {mtype}")
        entry[1][key] = series_samples

    for family, (mtype, _) in families.items():
        if mtype == "counter":
            for reserved in (family + "_total", family + "_created"):
                if reserved in families:
                    raise ValueError(f"metric family {reserved!r} collides with counter {family!r}")

    ts_cache: dict[int, str] = {}
    write = out.write
    lines = 0
    for family in sorted(families):
        mtype, series = families[family]
        text = help.get(family)
        if text is None and mtype == "counter":
            text = help.get(family + "_total")
        if text:
            write(f"# HELP {family} {escape_label_value(text)}\n")
        write(f"# TYPE {family} {mtype}\n")
        for key in sorted(series):
            name, labels = key
            shown = [(k, v) for k, v in labels if v != ""]
            if shown:
                inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in shown)
                prefix = f"{name}{{{inner}}} "
            else:
                prefix = f"{name} "
            chunk = []
            for s in series[key]:
                ts = s.timestamp_ms
                ts_text = ts_cache.get(ts)
                if ts_text is None:
                    ts_text = ts_cache[ts] = format_timestamp(ts)
                chunk.append(f"{prefix}{format_value(s.value)} {ts_text}\n")
            write("".join(chunk))
            lines += len(chunk)
    write("# EOF\n")
    return lines
