"""Samples as a Prometheus remote-write (protocol 1.0) request body: the wire encoding, nothing sent.

The WriteRequest protobuf is encoded by hand, without a protobuf dependency.
The messages used (field numbers from Prometheus' ``prompb/remote.proto`` and
``prompb/types.proto``)::

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }

Wire format: every field is a varint key ``(field_number << 3) | wire_type``
followed by the payload; wire type 0 is a varint (int64 negatives as 10-byte
two's complement), 1 a little-endian 64-bit value (double), 2 a
varint-length-prefixed byte string (strings and embedded messages).

The body is compressed with snappy's *block* format (not the framed format).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import cramjam

from benchwatch.model.samples import Sample, group_by_series, validate_series


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 negatives: two's complement, always 10 bytes
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(key: bytes, payload: bytes) -> bytes:
    return key + _varint(len(payload)) + payload


_K_TIMESERIES = b"\x0a"  # WriteRequest.timeseries: field 1, wire type 2
_K_LABEL = b"\x0a"  # TimeSeries.labels: field 1, wire type 2
_K_LABEL_NAME = b"\x0a"  # Label.name: field 1, wire type 2
_K_LABEL_VALUE = b"\x12"  # Label.value: field 2, wire type 2
_K_SAMPLE_TS = b"\x10"  # Sample.timestamp: field 2, wire type 0
_PACK_DOUBLE = struct.Struct("<d").pack

# A sample inside a TimeSeries is: 0x12 (TimeSeries.samples: field 2, wire type
# 2), the length of the Sample message (always < 128, so one byte), 0x09
# (Sample.value: field 1, wire type 1), 8 bytes of double, then 0x10 and the
# timestamp varint.  Indexed by the length of "0x10 + varint".
_SAMPLE_HEAD = [bytes((0x12, 9 + n, 0x09)) for n in range(12)]


# A live exporter sends the same few hundred series every second: their labels' encoding (with the
# checks of validate_series) cost more than the rest of a request (issue 32's profile), so it is kept.
# Bounded: cleared when full (an import of many runs makes new series all the time).
_LABELS_CACHE: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}
_LABELS_CACHE_MAX = 8192


def _encode_labels(name: str, labels: Sequence[tuple[str, str]]) -> bytes:
    key = (name, labels if isinstance(labels, tuple) else tuple(labels))
    cached = _LABELS_CACHE.get(key)
    if cached is None:
        cached = _encode_labels_uncached(name, key[1])
        if len(_LABELS_CACHE) >= _LABELS_CACHE_MAX:
            _LABELS_CACHE.clear()
        _LABELS_CACHE[key] = cached
    return cached


def _encode_labels_uncached(name: str, labels: Sequence[tuple[str, str]]) -> bytes:
    validate_series(name, labels)
    pairs = [("__name__", name)]
    pairs.extend((k, v) for k, v in labels if v != "")
    pairs.sort()  # Prometheus requires labels sorted by name (byte order)
    parts = []
    for k, v in pairs:
        kb = k.encode()
        vb = v.encode()
        label = _len_field(_K_LABEL_NAME, kb) + _len_field(_K_LABEL_VALUE, vb)
        parts.append(_len_field(_K_LABEL, label))
    return b"".join(parts)


def encode_write_request(samples: Iterable[Sample]) -> bytes:
    """Encode samples as an uncompressed protobuf ``prometheus.WriteRequest``.

    Samples are grouped into one TimeSeries per series (name + labels), series
    in order of first appearance, each series' samples sorted by timestamp
    (for equal timestamps the last sample given wins).  Labels, ``__name__``
    included, are sorted by name; labels with an empty value are left out.
    Raises ``ValueError`` for an invalid metric or label name.
    """
    groups = group_by_series(samples)
    pack_double = _PACK_DOUBLE
    head = _SAMPLE_HEAD
    # A timestamp's encoding, and the head of a sample that carries it (its length depends on it):
    # every series of a progress line shares the line's timestamp.
    ts_cache: dict[int, tuple[bytes, bytes]] = {}
    out = []
    for (name, labels), series_samples in groups.items():
        parts = [_encode_labels(name, labels)]
        append = parts.append
        for _, _, value, ts in series_samples:  # unpacked: a named tuple's fields by name cost more
            cached = ts_cache.get(ts)
            if cached is None:
                tsb = _K_SAMPLE_TS + _varint(ts)
                cached = ts_cache[ts] = (head[len(tsb)], tsb)
            append(cached[0])
            append(pack_double(value))
            append(cached[1])
        body = b"".join(parts)
        out.append(_K_TIMESERIES)
        out.append(_varint(len(body)))
        out.append(body)
    return b"".join(out)


def compress(payload: bytes) -> bytes:
    """Snappy block-format compression, as remote write requires."""
    return bytes(cramjam.snappy.compress_raw(payload))
