"""The daemon's delivery queue: samples queued now and sent later through a :class:`RemoteWriter`,
kept through Prometheus outages, given up on (and counted) when refused for good, split by age when a
batch mixes a replayed past with the present."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchwatch.model.samples import Sample, validate_series
from benchwatch.sink.client import RemoteWriteError, RemoteWriter

# Errors that refuse a request for some of its samples (their age or order), not its form. Prometheus
# then stores none of the request (2.42 rolls back the whole append), so current samples sent beside
# one too old are lost with it unless sent apart.
_PER_SAMPLE_MARKERS = ("too old sample", "out of bounds", "out of order sample", "duplicate sample for timestamp")
# Of those, the ones about one sample against its own series (a second value at a millisecond already
# stored, a sample older than its series' last): the rest of a batch is not suspect, so a refused batch
# is halved by count until the refused samples are alone. "Too old" and "out of bounds" are about an
# age, shared by neighbours in time: halving those would only resend what is refused again.
_ONE_SAMPLE_MARKERS = ("out of order sample", "duplicate sample for timestamp")
# A refused batch spanning more than this is cut in two at the middle of its time span and each half
# sent again: a replayed run from long ago and the processes collector's samples at now are apart by
# years, so one cut separates them; samples minutes apart are refused (or taken) together.
SPLIT_SPAN_MS = 10 * 60 * 1000
# Requests a refused batch may spend on halves, per bit of its size: finding one refused sample among n
# takes about 2·log2(n) requests, so this finds about four; past it the parts still refused are dropped.
SPLIT_REQUESTS_PER_BIT = 8


def split_refused(batch: Sequence[Sample], exc: RemoteWriteError) -> tuple[list[Sample], list[Sample]] | None:
    """Two parts of a batch refused for the age or order of some of its samples, worth sending apart:
    the older and the newer half by the middle of its time span when it spans more than
    ``SPLIT_SPAN_MS``; the first and the second half by count when the refusal is about one sample of
    one series (a duplicate, an out-of-order sample). None when the error is about the request, or its
    samples are too close in time for their ages to differ."""
    body = exc.body.lower()
    if len(batch) < 2 or not any(m in body for m in _PER_SAMPLE_MARKERS):
        return None
    first = min(s.timestamp_ms for s in batch)
    last = max(s.timestamp_ms for s in batch)
    if last - first > SPLIT_SPAN_MS:
        middle = (first + last) // 2
        return [s for s in batch if s.timestamp_ms <= middle], [s for s in batch if s.timestamp_ms > middle]
    if any(m in body for m in _ONE_SAMPLE_MARKERS):
        half = len(batch) // 2
        return list(batch[:half]), list(batch[half:])
    return None


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
            # Parts of a batch refused for the age or order of some of its samples (split_refused), sent before
            # the queue (last first).
            parts: list[list[Sample]] = []
            split_requests = 0  # what the batch the parts came from may still spend on halves
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
                        split_requests = SPLIT_REQUESTS_PER_BIT * take.bit_length()
                    self._in_flight = len(batch) + sum(map(len, parts))
                try:
                    self.writer.send_batch(batch)
                except RemoteWriteError as exc:
                    halves = None if exc.retryable or split_requests < 2 else split_refused(batch, exc)
                    with self._lock:
                        self.failed_requests += 1
                        self.last_error = exc
                        if halves:
                            parts += [halves[1], halves[0]]
                            split_requests -= 2
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
                        self.logger.info("%s; sending its two parts (%d and %d samples) apart", exc,
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
