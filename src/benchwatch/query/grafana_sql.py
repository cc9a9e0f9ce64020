"""Run a dashboard's SQL panels against the results database exactly as Grafana's PostgreSQL data source would.

Grafana cannot run on these machines, so its three steps are done here, in its order:

1. the browser substitutes template variables (``SqlDatasource.interpolateVariable``): a variable of one
   value, neither multi nor include-all, goes in as it is (the query quotes it: ``'$sweep'``); a multi-value
   or include-all variable's values go in quoted as SQL literals (``'a','b'``, quotes doubled), for
   ``IN ($host)``; ``${name:sqlstring}`` quotes any value; ``$__interval`` and ``$__interval_ms`` are the
   panel's interval;
2. the server's ``sqleng.Interpolate``: ``$__interval_ms``, ``$__interval``, ``$__unixEpochFrom()``,
   ``$__unixEpochTo()``;
3. the server's PostgreSQL macro engine (pkg/tsdb/grafana-postgresql-datasource/macros.go): every
   ``$__name(args)``, ``$__timeFilter(col)`` becoming ``col BETWEEN '<from>' AND '<to>'`` with the times in
   RFC 3339 (UTC, nanosecond precision, trailing zeros dropped), ``$__timeGroup(col, '5m')`` becoming
   ``floor(extract(epoch from col)/300)*300``, and so on; an unknown macro is an error, as in Grafana.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

SQL_TYPES = ("grafana-postgresql-datasource", "postgres")
# A SQL data source's "min interval" when its provisioning sets none (jsonData.timeInterval), as Grafana's.
MIN_INTERVAL_S = 60.0
MAX_DATA_POINTS = 1000


class MacroError(ValueError):
    """A macro Grafana would refuse: its message, as Grafana's."""


@dataclass
class SqlQuery:
    dashboard: str
    source: str      # "panel 7 'Verdicts' A"
    raw_sql: str
    panel_id: int
    ref_id: str


def dashboard_sql_queries(dash: dict) -> list[SqlQuery]:
    """Every SQL target of the dashboard's panels (rows' panels too)."""
    title = dash.get("title", dash.get("uid", "?"))
    out = []

    def walk(panels: list[dict]) -> None:
        for p in panels:
            for t in p.get("targets", []):
                if t.get("rawSql") and (t.get("datasource") or p.get("datasource") or {}).get("type") in SQL_TYPES:
                    out.append(SqlQuery(title, f"panel {p['id']} {p.get('title')!r} {t.get('refId')}", t["rawSql"],
                                        p["id"], t.get("refId", "A")))
            walk(p.get("panels", []))

    walk(dash.get("panels", []))
    return out


# -- 1. template variables (the browser) ---------------------------------------------------

def quote_literal(value: str) -> str:
    """PostgresQueryModel.quoteLiteral: a SQL string literal, its quotes doubled."""
    return "'" + value.replace("'", "''") + "'"


def _format(value: str | Sequence[str], fmt: str | None, quoted: bool) -> str:
    values = [value] if isinstance(value, str) else list(value)
    if fmt in ("sqlstring", "singlequote"):
        return ",".join(quote_literal(v) if fmt == "sqlstring" else "'" + v.replace("'", "\\'") + "'" for v in values)
    if fmt == "doublequote":
        return ",".join('"' + v.replace('"', '\\"') + '"' for v in values)
    if fmt in ("csv", "raw"):
        return ",".join(values)
    if quoted or not isinstance(value, str):
        return ",".join(quote_literal(v) for v in values)
    return value


_VARIABLE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?::([^}]+))?\}")


def interpolate_variables(sql: str, variables: Mapping[str, str | Sequence[str]], multi: Collection[str] = ()) -> str:
    """Step 1: the dashboard's variables (``multi``: those that are multi-value or include All) substituted;
    a name that is no variable (``$__timeFilter``) is left for the server."""

    def replace(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(4)
        fmt = m.group(3) or m.group(5)
        if name not in variables:
            return m.group(0)
        return _format(variables[name], fmt, name in multi)

    return _VARIABLE.sub(replace, sql)


# -- 2. and 3. the server --------------------------------------------------------------------

def format_interval(seconds: float) -> str:
    """gtime.FormatInterval: the interval in its largest whole unit (1y, 2d, 5m, 30s, 100ms)."""
    ms = int(round(seconds * 1000))
    for unit, size in (("y", 365 * 86400_000), ("d", 86400_000), ("h", 3600_000), ("m", 60_000), ("s", 1000),
                       ("ms", 1)):
        if ms >= size:
            return f"{ms // size}{unit}"
    return "1ms"


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float:
    """gtime.ParseInterval in seconds: Nd, Nw, Ny (365 days) or a Go duration (1h30m, 5m, 500ms)."""
    m = re.fullmatch(r"(\d+)([dwy])", text)
    if m:
        return int(m.group(1)) * {"d": 86400, "w": 7 * 86400, "y": 365 * 86400}[m.group(2)]
    if text and _DURATION_PART.sub("", text) == "" and _DURATION_PART.search(text):
        return sum(float(n) * _DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text))
    raise MacroError(f"error parsing interval {text}")


def _go_float(x: float) -> str:
    """Go's %v of a float64 for the seconds of an interval: 300 as "300", 0.5 as "0.5"."""
    if x == math.floor(x) and abs(x) < 1e21:
        return str(int(x))
    return repr(x)


def rfc3339_nano(epoch_ms: int) -> str:
    """Go's time.RFC3339Nano of a UTC time (Grafana's range is whole milliseconds): fraction without its
    trailing zeros, none when whole, and Z."""
    t = dt.datetime.fromtimestamp(epoch_ms // 1000, dt.UTC)
    frac = f"{epoch_ms % 1000:03d}".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^)]*)\)")


def _macro(name: str, args: list[str], from_ms: int, to_ms: int) -> str:
    def column() -> str:
        if not args or (len(args) == 1 and args[0] == ""):
            raise MacroError(f"missing time column argument for macro {name}")
        return args[0]

    def group() -> float:
        if len(args) < 2:
            raise MacroError(f"macro {name} needs time column and interval and optional fill value")
        seconds = parse_interval(args[1].strip("'"))
        if len(args) == 3 and args[2] not in ("NULL", "previous") and not _is_number(args[2]):
            raise MacroError(f"error parsing fill value {args[2]}")
        return seconds

    if name == "__time":
        return f'{column()} AS "time"'
    if name == "__timeEpoch":
        return f'extract(epoch from {column()}) as "time"'
    if name == "__timeFilter":
        return f"{column()} BETWEEN '{rfc3339_nano(from_ms)}' AND '{rfc3339_nano(to_ms)}'"
    if name == "__timeFrom":
        return f"'{rfc3339_nano(from_ms)}'"
    if name == "__timeTo":
        return f"'{rfc3339_nano(to_ms)}'"
    if name in ("__timeGroup", "__timeGroupAlias"):
        s = _go_float(group())
        expr = f"floor(extract(epoch from {args[0]})/{s})*{s}"
        return expr + ' AS "time"' if name == "__timeGroupAlias" else expr
    if name == "__unixEpochFilter":
        c = column()
        return f"{c} >= {from_ms // 1000} AND {c} <= {to_ms // 1000}"
    if name == "__unixEpochNanoFilter":
        c = column()
        return f"{c} >= {from_ms * 1_000_000} AND {c} <= {to_ms * 1_000_000}"
    if name == "__unixEpochNanoFrom":
        return str(from_ms * 1_000_000)
    if name == "__unixEpochNanoTo":
        return str(to_ms * 1_000_000)
    if name in ("__unixEpochGroup", "__unixEpochGroupAlias"):
        s = _go_float(group())
        expr = f"floor(({args[0]})/{s})*{s}"
        return expr + ' AS "time"' if name == "__unixEpochGroupAlias" else expr
    raise MacroError(f'unknown macro "{name}"')


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def interpolate_macros(sql: str, from_ms: int, to_ms: int, interval_s: float) -> str:
    """Steps 2 and 3: the server's global substitutions, then the PostgreSQL macro engine."""
    sql = sql.replace("$__interval_ms", str(int(round(interval_s * 1000))))
    sql = sql.replace("$__interval", format_interval(interval_s))
    sql = sql.replace("$__unixEpochFrom()", str(from_ms // 1000)).replace("$__unixEpochTo()", str(to_ms // 1000))
    original = sql
    error: list[MacroError] = []

    def replace(m: re.Match) -> str:
        name = m.group(1)
        # As Grafana: $__timeGroup directly followed by a comma is read as the alias form (before Grafana 5.3).
        if name == "__timeGroup":
            at = original.find(m.group(0))
            if at >= 0 and original[at + len(m.group(0)):at + len(m.group(0)) + 1] == ",":
                name = "__timeGroupAlias"
        args = [a.strip(" ") for a in m.group(2).split(",")]
        try:
            return _macro(name, args, from_ms, to_ms)
        except MacroError as e:
            if not error:
                error.append(e)
            return "macro_error()"

    out = _MACRO.sub(replace, sql)
    if error:
        raise error[0]
    return out


def interval_s(from_ms: int, to_ms: int, min_s: float = MIN_INTERVAL_S, max_points: int = MAX_DATA_POINTS) -> float:
    """The panel's $__interval: the range over its data points in whole seconds, at least the data source's
    min interval (one minute for a SQL data source that sets none)."""
    return max(min_s, float(math.ceil((to_ms - from_ms) / 1000 / max_points)))


def expand(sql: str, variables: Mapping[str, str | Sequence[str]], from_ms: int, to_ms: int,
           multi: Collection[str] = (), interval: float | None = None) -> str:
    """The SQL Grafana sends to PostgreSQL for a panel over [from_ms, to_ms] (epoch milliseconds)."""
    interval = interval if interval is not None else interval_s(from_ms, to_ms)
    builtins = {"__interval_ms": str(int(round(interval * 1000))), "__interval": format_interval(interval)}
    sql = interpolate_variables(sql, {**builtins, **variables}, multi)
    return interpolate_macros(sql, from_ms, to_ms, interval)


def multi_variables(dash: dict) -> set[str]:
    """The dashboard's variables whose values Grafana quotes in a SQL query: multi-value or include All."""
    return {v["name"] for v in dash.get("templating", {}).get("list", []) if v.get("multi") or v.get("includeAll")}
