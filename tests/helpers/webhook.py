"""A real HTTP webhook receiver for Alertmanager, for the alerting tests and benchmark.

    with WebhookReceiver() as hook:          # listens on 127.0.0.1, a free port
        ... point Alertmanager at hook.url ...
        hook.wait_for(lambda n: n.firing("PgbenchTPSDrop", run_id=rid), timeout=30)

Every POST is kept as a :class:`Notification` with its arrival time (wall clock
and monotonic) and the JSON body exactly as Alertmanager sent it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Notification:
    received_at: float          # time.time() at arrival
    received_monotonic: float
    body: dict = field(repr=False)

    @property
    def status(self) -> str:
        return self.body.get("status", "")

    @property
    def alerts(self) -> list[dict]:
        return self.body.get("alerts") or []

    def matching(self, alertname: str | None = None, status: str | None = None, **labels: str) -> list[dict]:
        """Alerts in this notification with that name, status ("firing"/"resolved") and labels."""
        out = []
        for a in self.alerts:
            al = a.get("labels") or {}
            if alertname is not None and al.get("alertname") != alertname:
                continue
            if status is not None and a.get("status") != status:
                continue
            if any(al.get(k) != v for k, v in labels.items()):
                continue
            out.append(a)
        return out


class WebhookReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.notifications: list[Notification] = []
        self.bad_requests = 0
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                now, mono = time.time(), time.monotonic()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                with receiver._cond:
                    if isinstance(body, dict):
                        receiver.notifications.append(Notification(now, mono, body))
                    else:
                        receiver.bad_requests += 1
                    receiver._cond.notify_all()
                self.send_response(200 if isinstance(body, dict) else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, fmt, *args):
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/alerts"

    def start(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def snapshot(self) -> list[Notification]:
        with self._cond:
            return list(self.notifications)

    def wait_for(self, predicate: Callable[[Notification], bool], timeout: float,
                 since: int = 0) -> Notification | None:
        """The first notification (from index ``since``) satisfying ``predicate``, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        seen = since
        with self._cond:
            while True:
                for n in self.notifications[seen:]:
                    if predicate(n):
                        return n
                seen = len(self.notifications)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
