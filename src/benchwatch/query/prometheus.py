"""The one Prometheus HTTP API client: instant and range queries, targets.

Talks to the address it is given directly, whatever *_proxy variables say
(every Prometheus benchwatch talks to is on loopback).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PrometheusError(RuntimeError):
    """The API answered with an error, or not at all."""


def api(base: str, path: str, params: dict[str, str] | None = None, timeout_s: float = 30.0) -> Any:
    """GET an API path; returns the answer's ``data``."""
    url = f"{base.rstrip('/')}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            payload = json.load(response)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace")
        exc.close()
        try:
            detail = json.loads(body)
            body = f"{detail.get('errorType')}: {detail.get('error')}"
        except ValueError:
            pass
        raise PrometheusError(f"GET {path} {params or ''}: HTTP {exc.code}: {body}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
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
