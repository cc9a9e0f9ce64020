"""The one Prometheus HTTP API client: instant and range queries, targets.

Talks to the address it is given directly, whatever *_proxy variables say
(every Prometheus benchwatch talks to is on loopback).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from benchwatch.util.keepalive import KeepAlive

# Kept connections to each Prometheus, idle ones pooled: the exporter's dips collector (a
# short-lived thread per pass) and archiver ask while runs go on, and a new TCP connection
# per request cost more than the answer. One request per connection at a time.
_idle: dict[str, list[KeepAlive]] = {}
_idle_lock = threading.Lock()


@contextmanager
def _connection(base: str) -> Iterator[KeepAlive]:
    with _idle_lock:
        pool = _idle.setdefault(base, [])
        connection = pool.pop() if pool else None
    connection = connection or KeepAlive(base)
    try:
        yield connection
    finally:
        with _idle_lock:
            pool.append(connection)  # after a failure too: it reconnects on its next request


# Headers sent to one API base URL (a long-term store's bearer token, benchwatch.query.longterm.configure).
_headers: dict[str, dict[str, str]] = {}


def set_headers(base: str, headers: dict[str, str]) -> None:
    """Send these headers with every request to ``base`` (never logged nor put into errors)."""
    _headers[base.rstrip("/")] = dict(headers)


class PrometheusError(RuntimeError):
    """The API answered with an error, or not at all."""


def api(base: str, path: str, params: dict[str, str] | None = None, timeout_s: float = 30.0) -> Any:
    """GET an API path; returns the answer's ``data``."""
    target = urllib.parse.urlsplit(base).path.rstrip("/") + path
    if params:
        target += "?" + urllib.parse.urlencode(params)
    try:
        with _connection(base) as connection:
            status, data = connection.request("GET", target, timeout_s=timeout_s,
                                              headers={"Accept": "application/json", **_headers.get(base.rstrip("/"), {})})
        if status != 200:
            body = data.decode("utf-8", "replace")
            try:
                detail = json.loads(body)
                body = f"{detail.get('errorType')}: {detail.get('error')}"
            except ValueError:
                pass
            raise PrometheusError(f"GET {path} {params or ''}: HTTP {status}: {body}")
        payload = json.loads(data)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise PrometheusError(f"GET {path}: {exc}") from None
    if payload.get("status") != "success":
        raise PrometheusError(f"GET {path} {params or ''}: {payload.get('errorType')}: {payload.get('error')}")
    return payload["data"]


def time_param(t: float | str | datetime) -> str:
    """Unix seconds, an RFC 3339 string or an aware datetime, as the API takes it."""
    if isinstance(t, datetime):
        return f"{t.timestamp():.3f}"
    if isinstance(t, (int, float)):
        return f"{t:.3f}"
    return t


def query(base: str, promql: str, time: float | str | datetime | None = None, timeout_s: float = 30.0) -> list:
    """Instant query; ``data.result`` (a list for vector and matrix results)."""
    params = {"query": promql}
    if time is not None:
        params["time"] = time_param(time)
    return api(base, "/api/v1/query", params, timeout_s)["result"]


def query_range(base: str, promql: str, start: float | str | datetime, end: float | str | datetime,
                step: float | str, timeout_s: float = 30.0) -> list:
    """Range query; ``data.result``: ``[{"metric": {...}, "values": [[t, "v"], ...]}, ...]``."""
    params = {"query": promql, "start": time_param(start), "end": time_param(end),
              "step": step if isinstance(step, str) else f"{step:g}"}
    return api(base, "/api/v1/query_range", params, timeout_s)["result"]


def active_targets(base: str, timeout_s: float = 10.0) -> list[dict]:
    return api(base, "/api/v1/targets", {"state": "active"}, timeout_s)["activeTargets"]


def series_values(result: list) -> dict[frozenset, list[tuple[int, float]]]:
    """``{frozenset(labels): [(timestamp_ms, value), ...]}`` of a matrix or range result, timestamps exact to the ms."""
    return {frozenset(item["metric"].items()): [(round(float(t) * 1000), float(v)) for t, v in item["values"]]
            for item in result}
