"""Prometheus remote-write (protocol 1.0) client.

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

import base64
import logging
import struct
import threading
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.client import HTTPException

import cramjam

from benchwatch.model.samples import Sample, group_by_series, validate_series
from benchwatch.util.keepalive import KeepAlive

__all__ = [
    "BufferedRemoteWriter",
    "QueueStats",
    "RemoteWriteError",
    "RemoteWriter",
    "compress",
    "encode_write_request",
]

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# protobuf encoding


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


def _encode_labels(name: str, labels: Sequence[tuple[str, str]]) -> bytes:
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


# ---------------------------------------------------------------------------
# HTTP client

# Errors Prometheus reports for samples it will never accept, whatever the
# status code (2.42 answers "too old sample" and wrapped "out of bounds" with
# 500): retrying the same request cannot succeed.
_PERMANENT_MARKERS = (
    "too old sample",
    "out of bounds",
    "out of order sample",
    "duplicate sample for timestamp",
)

_MAX_BODY_IN_ERROR = 1000


class RemoteWriteError(Exception):
    """A remote-write request failed.

    ``status`` is the HTTP status code, or ``None`` when no HTTP answer came
    (connection refused, timeout, reset).  ``body`` is the response text.
    ``retryable`` tells whether sending the same request again may succeed.
    """

    def __init__(self, message: str, *, status: int | None, body: str, retryable: bool):
        super().__init__(message)
        self.status = status
        self.body = body
        self.retryable = retryable


def is_retryable(status: int | None, body: str) -> bool:
    """Classify a failed request: ``True`` if sending it again may succeed."""
    if status is None:
        return True  # no answer: connection problems are transient
    lowered = body.lower()
    if any(marker in lowered for marker in _PERMANENT_MARKERS):
        return False
    if status >= 500 or status in (408, 429):
        return True
    return False


def redact_url(url: str) -> str:
    """``url`` without user info, query string or fragment: safe to log."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class RemoteWriter:
    """Sends samples to a Prometheus remote-write endpoint.

    ``url`` is the full endpoint, e.g. ``http://127.0.0.1:9090/api/v1/write``.
    Credentials can be given as user info in the URL (sent as HTTP basic
    auth) or as ``headers`` (e.g. ``{"Authorization": "Bearer ..."}``);
    neither is ever logged nor put into error messages.  Redirects are not
    followed (a 3xx is a non-retryable error) and ``*_proxy`` environment
    variables are ignored.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        max_batch: int = 5000,
        logger: logging.Logger | None = None,
        headers: Mapping[str, str] | None = None,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError("remote-write URL must be http:// or https://")
        self._headers = {
            "Content-Encoding": "snappy",
            "Content-Type": "application/x-protobuf",
            "X-Prometheus-Remote-Write-Version": "0.1.0",
            "User-Agent": "benchwatch",
        }
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
            netloc = parts.netloc.rsplit("@", 1)[1]
            url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        if headers:
            self._headers.update(headers)
        self._url = url
        self.safe_url = redact_url(url)
        self.timeout_s = timeout_s
        self.max_batch = max_batch
        self.logger = logger or _log
        # One kept connection: a request a second, each on a new TCP connection, cost the
        # exporter 0.25 ms of CPU apiece (benchwatch.util.keepalive). No redirect is followed
        # (a 3xx is a failed request) and no proxy is taken from the environment.
        self._connection = KeepAlive(url, timeout_s)
        parts = urllib.parse.urlsplit(url)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.safe_url!r})"

    def send(self, samples: Iterable[Sample]) -> None:
        """Send samples in requests of about ``max_batch`` samples.

        Samples are sent in timestamp order, so that the batches of a long
        import reach Prometheus in time order; a batch never splits the
        samples of one timestamp.  Raises :class:`RemoteWriteError` on the
        first failed request (the batches before it were delivered).
        """
        items = samples if isinstance(samples, list) else list(samples)
        if not items:
            return
        if not _in_time_order(items):
            items = sorted(items, key=_timestamp_of)
        for batch in _batches(items, self.max_batch):
            self.send_batch(batch)

    def send_batch(self, samples: Iterable[Sample]) -> None:
        """Send samples in one request (no splitting)."""
        payload = compress(encode_write_request(samples))
        self._post(payload)

    def _post(self, payload: bytes) -> None:
        status: int | None
        try:
            status, data = self._connection.request("POST", self._target, body=payload, headers=self._headers)
            if 200 <= status < 300:
                return
            body = data.decode("utf-8", "replace")
        except (OSError, HTTPException) as exc:  # refused, timeouts, resets, bad status lines
            status, body = None, f"{type(exc).__name__}: {exc}"
        body = body.strip()
        retryable = is_retryable(status, body)
        what = f"HTTP {status}" if status is not None else "no response"
        message = f"remote write to {self.safe_url} failed: {what}: {body[:_MAX_BODY_IN_ERROR]}"
        raise RemoteWriteError(message, status=status, body=body, retryable=retryable)


# Errors that refuse a request for some of its samples (their age or order), not its form. Prometheus
# then stores none of the request (2.42 rolls back the whole append), so current samples sent beside
# one too old are lost with it unless sent apart.
_PER_SAMPLE_MARKERS = ("too old sample", "out of bounds", "out of order sample")
# A refused batch spanning more than this is cut in two at the middle of its time span and each half
# sent again: a replayed run from long ago and the processes collector's samples at now are apart by
# years, so one cut separates them; samples minutes apart are refused (or taken) together.
SPLIT_SPAN_MS = 10 * 60 * 1000


def split_by_age(batch: Sequence[Sample], exc: RemoteWriteError) -> tuple[list[Sample], list[Sample]] | None:
    """The older and the newer half (by the middle of its time span) of a batch refused for the age or
    order of some of its samples, worth sending apart; None when the error is about the request, or the
    batch's samples are too close in time for their ages to differ."""
    if len(batch) < 2 or not any(m in exc.body.lower() for m in _PER_SAMPLE_MARKERS):
        return None
    first = min(s.timestamp_ms for s in batch)
    last = max(s.timestamp_ms for s in batch)
    if last - first <= SPLIT_SPAN_MS:
        return None
    middle = (first + last) // 2
    return [s for s in batch if s.timestamp_ms <= middle], [s for s in batch if s.timestamp_ms > middle]


def _timestamp_of(s: Sample) -> int:
    return s.timestamp_ms


def _in_time_order(items: Sequence[Sample]) -> bool:
    prev = items[0].timestamp_ms
    for s in items:
        ts = s.timestamp_ms
        if ts < prev:
            return False
        prev = ts
    return True


def _batches(items: Sequence[Sample], max_batch: int):
    """Slices of about ``max_batch`` samples of time-ordered ``items``, cut
    only where the timestamp changes (unless one timestamp alone has more than
    ``max_batch`` samples)."""
    n = len(items)
    start = 0
    while start < n:
        end = min(start + max_batch, n)
        if end < n:
            boundary_ts = items[end - 1].timestamp_ms
            cut = end
            while cut > start and items[cut - 1].timestamp_ms == boundary_ts and items[cut].timestamp_ms == boundary_ts:
                cut -= 1
            if cut > start:
                end = cut
        yield items[start:end]
        start = end


@dataclass(frozen=True)
class QueueStats:
    """A consistent reading of a :class:`BufferedRemoteWriter`'s counters (samples unless said)."""

    pending: int
    sent: int
    rejected: int  # refused by the receiver for good (4xx, "too old sample"), or unencodable
    dropped: int  # pushed out of a full queue, never sent
    failed_requests: int


class BufferedRemoteWriter:
    """Remote writer for a long-running daemon: queue now, deliver later.

    :meth:`enqueue` adds samples to a bounded queue; :meth:`flush` sends what
    is pending, oldest first, in batches of ``max_batch``.  A batch that fails
    with a retryable error (Prometheus down, 5xx) stays queued for the next
    flush; a batch Prometheus rejects for good (4xx, "too old sample") is
    dropped and counted in ``rejected_samples``.  Beyond ``max_pending``
    queued samples the oldest are dropped and counted in ``dropped_samples``.
    ``flush`` never raises.  Safe to use from several threads.

    Counters for self-metrics: ``sent_samples``, ``failed_requests``,
    ``dropped_samples``, ``rejected_samples``, all read at once by
    :meth:`stats`; ``last_error`` holds the last :class:`RemoteWriteError`
    (or ``None``).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        max_batch: int = 5000,
        max_pending: int = 500_000,
        logger: logging.Logger | None = None,
        headers: Mapping[str, str] | None = None,
        writer: RemoteWriter | None = None,
    ):
        if max_pending < 1:
            raise ValueError("max_pending must be >= 1")
        self.writer = writer or RemoteWriter(url, timeout_s=timeout_s, max_batch=max_batch, logger=logger, headers=headers)
        self.max_pending = max_pending
        self.logger = self.writer.logger
        self._pending: deque[Sample] = deque()
        self._lock = threading.Lock()  # guards _pending and the counters
        self._flush_lock = threading.Lock()  # one flush at a time
        self.sent_samples = 0
        self.failed_requests = 0
        self.dropped_samples = 0
        self.rejected_samples = 0
        self._in_flight = 0  # taken off the queue by flush, not yet delivered nor given up
        self.last_error: RemoteWriteError | None = None
        # Delivery marks: samples are numbered as enqueued; a mark fires once every sample
        # numbered before it has left the queue (sent, or given up on and counted).
        self._enqueued_total = 0
        self._resolved_total = 0
        self._marks: deque[tuple[int, Callable[[], None]]] = deque()

    @property
    def pending(self) -> int:
        """Number of samples waiting to be sent."""
        return len(self._pending)

    def stats(self) -> QueueStats:
        """All counters and the queue length, taken under the lock so they add up.

        ``pending`` counts the batch being sent too: its samples still wait.
        """
        with self._lock:
            return QueueStats(pending=len(self._pending) + self._in_flight, sent=self.sent_samples, rejected=self.rejected_samples,
                              dropped=self.dropped_samples, failed_requests=self.failed_requests)

    def enqueue(self, samples: Iterable[Sample]) -> None:
        with self._lock:
            before = len(self._pending)
            self._pending.extend(samples)
            self._enqueued_total += len(self._pending) - before
            self._trim()

    def mark(self, on_delivered: Callable[[], None]) -> None:
        """Call ``on_delivered`` (from a later :meth:`flush`) once every sample enqueued so far has
        been acknowledged by the receiver, or given up on (rejected, dropped: both counted).

        How a producer learns that what it read is safe: the pgbench run follower records its
        file offsets there."""
        with self._lock:
            self._marks.append((self._enqueued_total, on_delivered))

    def _fire_marks(self) -> None:
        due = []
        with self._lock:
            while self._marks and self._marks[0][0] <= self._resolved_total:
                due.append(self._marks.popleft()[1])
        for callback in due:
            try:
                callback()
            except Exception:  # a producer's bookkeeping must not stop delivery
                self.logger.exception("delivery callback failed")

    def _trim(self) -> None:
        excess = len(self._pending) - self.max_pending
        if excess > 0:
            popleft = self._pending.popleft
            for _ in range(excess):
                popleft()
            self.dropped_samples += excess
            self._resolved_total += excess
            self.logger.warning(
                "remote write to %s: queue full, dropped %d oldest samples", self.writer.safe_url, excess
            )

    def flush(self) -> int:
        """Send everything pending; return the number of samples delivered.

        Sends at most what was pending when called (samples enqueued meanwhile
        wait for the next flush).  Stops at the first retryable failure,
        keeping that batch and all later samples queued.  Never raises.
        """
        if not self._flush_lock.acquire(blocking=False):
            return 0  # another thread is flushing
        delivered = 0
        try:
            max_batch = self.writer.max_batch
            with self._lock:
                budget = len(self._pending)
            # Parts of a batch refused for the age of some of its samples, sent before the queue (last first).
            parts: list[list[Sample]] = []
            while budget > 0 or parts:
                with self._lock:
                    if parts:
                        batch = parts.pop()
                    else:
                        take = min(max_batch, budget, len(self._pending))
                        if take == 0:
                            break
                        popleft = self._pending.popleft
                        batch = [popleft() for _ in range(take)]
                        budget -= take
                    self._in_flight = len(batch) + sum(map(len, parts))
                try:
                    self.writer.send_batch(batch)
                except RemoteWriteError as exc:
                    halves = None if exc.retryable else split_by_age(batch, exc)
                    with self._lock:
                        self.failed_requests += 1
                        self.last_error = exc
                        if halves:
                            parts += [halves[1], halves[0]]
                        elif exc.retryable:
                            # This batch and the parts still to send, in their order, back in front.
                            again = batch + [s for part in reversed(parts) for s in part]
                            parts = []
                            self._pending.extendleft(reversed(again))
                            self._trim()
                        else:
                            self.rejected_samples += len(batch)
                            self._resolved_total += len(batch)
                        self._in_flight = sum(map(len, parts))
                    if halves:
                        self.logger.info("%s; sending its %d older and %d newer samples apart", exc,
                                         len(halves[0]), len(halves[1]))
                        continue
                    if exc.retryable:
                        self.logger.warning("%s; keeping %d samples for the next flush", exc, self.pending)
                        break
                    self.logger.error("%s; dropped %d samples", exc, len(batch))
                except ValueError as exc:
                    # Invalid metric or label names: such samples can never be
                    # sent.  Drop them and put the valid rest back in front.
                    valid = _valid_samples(batch)
                    if len(valid) == len(batch):
                        valid = []  # not a naming problem: drop the batch rather than loop
                    with self._lock:
                        self._in_flight = sum(map(len, parts))
                        self.rejected_samples += len(batch) - len(valid)
                        self._resolved_total += len(batch) - len(valid)
                        self._pending.extendleft(reversed(valid))
                    budget += len(valid)  # strictly fewer than taken: progress
                    self.logger.error(
                        "remote write to %s: dropped %d unencodable samples: %s",
                        self.writer.safe_url, len(batch) - len(valid), exc,
                    )
                except Exception as exc:
                    with self._lock:
                        self._in_flight = sum(map(len, parts))
                        self.rejected_samples += len(batch)
                        self._resolved_total += len(batch)
                    self.logger.error(
                        "remote write to %s: dropped %d samples: %s: %s",
                        self.writer.safe_url, len(batch), type(exc).__name__, exc,
                    )
                else:
                    with self._lock:
                        self._in_flight = sum(map(len, parts))
                        self.sent_samples += len(batch)
                        self._resolved_total += len(batch)
                    delivered += len(batch)
                    # Right after each acknowledged batch: a crash loses the least bookkeeping.
                    self._fire_marks()
            self._fire_marks()  # marks set with nothing (more) pending
        finally:
            self._flush_lock.release()
        return delivered


def _valid_samples(batch: Sequence[Sample]) -> list[Sample]:
    verdicts: dict[tuple, bool] = {}
    valid = []
    for s in batch:
        key = (s.name, s.labels)
        ok = verdicts.get(key)
        if ok is None:
            try:
                validate_series(s.name, s.labels)
                ok = True
            except ValueError:
                ok = False
            verdicts[key] = ok
        if ok:
            valid.append(s)
    return valid
