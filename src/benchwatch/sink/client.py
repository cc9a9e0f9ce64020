"""The remote-write HTTP client: one request per batch to a Prometheus endpoint, each failure classified
(worth retrying or refused for good); the body comes from :mod:`benchwatch.sink.wire`."""

from __future__ import annotations

import base64
import logging
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from http.client import HTTPException

from benchwatch.model.samples import Sample
from benchwatch.sink.wire import compress, encode_write_request
from benchwatch.util.keepalive import KeepAlive

# The logger's name from before the module was split out of remote_write: logs and their filters keep it.
_log = logging.getLogger("benchwatch.sink.remote_write")

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
