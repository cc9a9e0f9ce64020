"""Prometheus remote-write (protocol 1.0): the names other code imports, from the three modules that do
the work, one job each:

- :mod:`benchwatch.sink.wire`: samples as the WriteRequest protobuf, snappy-compressed;
- :mod:`benchwatch.sink.client`: the HTTP client (:class:`RemoteWriter`, :class:`RemoteWriteError`);
- :mod:`benchwatch.sink.queue`: the daemon's delivery queue (:class:`BufferedRemoteWriter`).
"""

from __future__ import annotations

from benchwatch.sink.client import RemoteWriteError, RemoteWriter, is_retryable, redact_url
from benchwatch.sink.queue import SPLIT_SPAN_MS, BufferedRemoteWriter, QueueStats, split_refused
from benchwatch.sink.wire import compress, encode_write_request

__all__ = [
    "SPLIT_SPAN_MS",
    "BufferedRemoteWriter",
    "QueueStats",
    "RemoteWriteError",
    "RemoteWriter",
    "compress",
    "encode_write_request",
    "is_retryable",
    "redact_url",
    "split_refused",
]
