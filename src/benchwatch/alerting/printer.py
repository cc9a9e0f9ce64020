"""Alerts of one run, as one line per change, for ``benchwatch run``'s terminal.

:class:`AlertPrinter` polls Alertmanager's API v2 (``GET /api/v2/alerts``) in a
background thread and calls ``on_line`` once when an alert of the run starts
firing and once when it is resolved::

    ALERT FIRING PgbenchTPSDrop run=20240101T120000Z-ab12 — TPS of run … down 100% from its baseline (0.0 vs 812.0)
    ALERT RESOLVED PgbenchTPSDrop run=20240101T120000Z-ab12 — TPS of run … down 100% from its baseline (0.0 vs 812.0)

The run's alerts are those labelled with its run_id; stack-wide alerts (disk,
checkpoints, targets: no run_id, they fire only while a run is active) are
shown too, since they explain the run. Alertmanager rather than Prometheus is
asked because it applies silences and inhibitions: the terminal shows what the
receivers are told. An alert counts as firing once Alertmanager says
``active`` (not silenced or inhibited); as resolved once Alertmanager no longer
lists it. Alertmanager being unreachable is said once, never fatal.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass

from benchwatch.util.keepalive import KeepAlive

FIRING = "FIRING"
RESOLVED = "RESOLVED"

@dataclass(frozen=True)
class Transition:
    state: str          # FIRING or RESOLVED
    alertname: str
    run_id: str | None  # None for a stack-wide alert
    summary: str
    fingerprint: str

    def line(self) -> str:
        where = f" run={self.run_id}" if self.run_id else ""
        text = f" — {self.summary}" if self.summary else ""
        return f"ALERT {self.state} {self.alertname}{where}{text}"


def fetch_alertmanager(url: str, timeout: float = 2.0) -> Callable[[], list[dict]]:
    """A fetch function for :class:`AlertPrinter`: every alert Alertmanager holds.

    Asked once a second for the whole run: over one kept connection (a new one per
    request cost the wrapper and Alertmanager more than the answer itself)."""
    path = urllib.parse.urlsplit(url).path.rstrip("/") + "/api/v2/alerts"
    connection = KeepAlive(url, timeout)

    def fetch() -> list[dict]:
        status, body = connection.request("GET", path, headers={"Accept": "application/json"})
        if status != 200:
            raise OSError(f"HTTP {status} from {path}")
        return json.loads(body)

    return fetch


class AlertPrinter:
    """Diffs successive snapshots of Alertmanager's alerts into FIRING/RESOLVED lines.

    ``fetch`` returns the alerts as ``/api/v2/alerts`` does (dicts with
    ``fingerprint``, ``labels``, ``annotations`` and ``status.state``); inject
    one in tests. ``poll`` does one round synchronously; ``start``/``stop`` run
    it every ``interval`` seconds in a daemon thread.
    """

    def __init__(self, run_id: str, on_line: Callable[[str], None], *,
                 alertmanager_url: str | None = None, fetch: Callable[[], list[dict]] | None = None,
                 interval: float = 1.0, include_stack_alerts: bool = True):
        # 1 s: alerts fire 2-4 s after their cause; polling twice as often cost the
        # wrapper and Alertmanager ~1 ms/s more (docs/benchmarks.md, cost of watching).
        if fetch is None:
            if alertmanager_url is None:
                raise ValueError("give alertmanager_url or fetch")
            fetch = fetch_alertmanager(alertmanager_url)
        self.run_id = run_id
        self.on_line = on_line
        self.fetch = fetch
        self.interval = interval
        self.include_stack_alerts = include_stack_alerts
        self.alertmanager_url = alertmanager_url
        self.firing: dict[str, Transition] = {}  # fingerprint -> its FIRING transition
        self.errors = 0
        self._lock = threading.Lock()  # poll() runs in the thread, stop() reads firing
        self._unreachable = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one round --------------------------------------------------------------

    def _ours(self, alert: dict) -> bool:
        run_id = (alert.get("labels") or {}).get("run_id")
        return run_id == self.run_id if run_id is not None else self.include_stack_alerts

    def poll(self) -> list[Transition]:
        """Fetch once, report what changed since the last successful fetch."""
        try:
            alerts = self.fetch()
        except (OSError, ValueError) as e:  # URLError/HTTPError are OSErrors; ValueError: not JSON
            self.errors += 1
            if not self._unreachable:  # once per outage; the firing state is kept meanwhile
                self._unreachable = True
                where = f" at {self.alertmanager_url}" if self.alertmanager_url else ""
                self.on_line(f"ALERT watch: cannot read alerts from Alertmanager{where} ({e}); "
                             "alerts of this run are not shown until it answers")
            return []
        self._unreachable = False
        with self._lock:
            changes = self._diff(alerts if isinstance(alerts, list) else [])
        for t in changes:
            self.on_line(t.line())
        return changes

    def _diff(self, alerts: list) -> list[Transition]:
        listed: set[str] = set()
        changes: list[Transition] = []
        for alert in alerts:
            if not isinstance(alert, dict) or not self._ours(alert):
                continue
            labels = alert.get("labels") or {}
            fp = str(alert.get("fingerprint") or json.dumps(labels, sort_keys=True))
            listed.add(fp)
            state = (alert.get("status") or {}).get("state")
            if fp in self.firing or state != "active":
                continue  # already told, or silenced / inhibited / not processed yet
            t = Transition(FIRING, labels.get("alertname", "?"), labels.get("run_id"),
                           (alert.get("annotations") or {}).get("summary", ""), fp)
            self.firing[fp] = t
            changes.append(t)
        for fp in [fp for fp in self.firing if fp not in listed]:
            t = self.firing.pop(fp)
            changes.append(Transition(RESOLVED, t.alertname, t.run_id, t.summary, fp))
        return changes

    # -- in the background --------------------------------------------------------

    def start(self) -> AlertPrinter:
        self._thread = threading.Thread(target=self._loop, name="benchwatch-alert-watch", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as e:  # a printing callback failing must not end the watch silently
                self.errors += 1
                try:
                    self.on_line(f"ALERT watch: {type(e).__name__}: {e}")
                except Exception:
                    pass
            self._stop.wait(self.interval)

    def run_alerts_firing(self) -> int:
        with self._lock:
            return sum(1 for t in self.firing.values() if t.run_id == self.run_id)

    def stop(self, wait_resolved: float = 0.0) -> None:
        """Stop polling. With ``wait_resolved`` (seconds), first keep polling until the
        run's own alerts are resolved or that time has passed: once pgbench exits
        they resolve within a few seconds (PgbenchTPSDrop keeps firing 5 s more;
        PgbenchClientsAborted stays a minute on purpose)."""
        if wait_resolved > 0 and self._thread is not None:
            deadline = time.monotonic() + wait_resolved
            while self.run_alerts_firing() and time.monotonic() < deadline:
                time.sleep(min(self.interval, 0.1))
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def __enter__(self) -> AlertPrinter:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
