"""One HTTP/1.1 connection kept open across requests to the same server.

What benchwatch sends every second (a remote write per progress line, the
alert printer's look at Alertmanager) went through urllib, which opens a new
TCP connection per request: about 0.25 ms of CPU per request in the client
alone, against 0.05 ms on a kept connection (bench/bench_watch_cost.py counts
every such millisecond). http.client follows no redirects and reads no proxy
from the environment, as benchwatch wants for 127.0.0.1 and for remote write.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections.abc import Mapping

# A kept connection the server has closed meanwhile (an idle timeout, a restart) fails like this
# on the next request, before the server saw it: one fresh connection is tried then.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class KeepAlive:
    """``request()`` over one kept connection to the scheme://host:port of ``url``; thread-safe."""

    def __init__(self, url: str, timeout_s: float = 5.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout_s)

    def request(self, method: str, target: str, body: bytes | None = None,
                headers: Mapping[str, str] | None = None, timeout_s: float | None = None) -> tuple[int, bytes]:
        """(status, body) of one request to ``target`` (path and query); ``timeout_s`` for this
        request only. Raises OSError or http.client.HTTPException when no answer came."""
        with self._lock:
            reused = self._conn is not None
            for attempt in (1, 2):
                if self._conn is None:
                    self._conn = self._connect()
                timeout = self.timeout_s if timeout_s is None else timeout_s
                self._conn.timeout = timeout  # for a (re)connect
                if self._conn.sock is not None:
                    self._conn.sock.settimeout(timeout)
                try:
                    self._conn.request(method, target, body=body, headers=dict(headers or {}))
                    response = self._conn.getresponse()
                    data = response.read()
                except _STALE:
                    self.close_locked()
                    if reused and attempt == 1:
                        continue
                    raise
                except (OSError, http.client.HTTPException):
                    self.close_locked()
                    raise
                if response.will_close:
                    self.close_locked()
                return response.status, data
        raise AssertionError("unreachable")

    def close_locked(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self.close_locked()
