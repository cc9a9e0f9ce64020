"""benchwatch.query.grafana_sql: Grafana's SQL macros and variables expanded to the very strings Grafana sends
to PostgreSQL (the cases of Grafana's own pkg/tsdb/grafana-postgresql-datasource/macros_test.go, and the
browser's SqlDatasource.interpolateVariable), and the SQL panels of the committed dashboards found."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from benchwatch.query import grafana_sql as gs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ms(*args: int, micro: int = 0) -> int:
    return int(dt.datetime(*args, microsecond=micro, tzinfo=dt.UTC).timestamp() * 1000)


FROM = ms(2018, 4, 12, 18, 0, 0)
TO = FROM + 5 * 60 * 1000


@pytest.mark.parametrize("sql, want", [
    ("select $__time(time_column)", 'select time_column AS "time"'),
    ("select min($__time(time_column))", 'select min(time_column AS "time")'),
    ("select $__timeEpoch(t)", 'select extract(epoch from t) as "time"'),
    ("WHERE $__timeFilter(time_column)",
     "WHERE time_column BETWEEN '2018-04-12T18:00:00Z' AND '2018-04-12T18:05:00Z'"),
    ("select $__timeFrom()", "select '2018-04-12T18:00:00Z'"),
    ("select $__timeTo()", "select '2018-04-12T18:05:00Z'"),
    # before Grafana 5.3 $__timeGroup added the alias: still, when a comma follows it
    ("SELECT $__timeGroup(time_column,'5m'), value", 'SELECT floor(extract(epoch from time_column)/300)*300 AS "time", value'),
    ("SELECT $__timeGroup(time_column,'5m') as time, value", "SELECT floor(extract(epoch from time_column)/300)*300 as time, value"),
    ("SELECT $__timeGroup(time_column,'5m')", "SELECT floor(extract(epoch from time_column)/300)*300"),
    ("SELECT $__timeGroupAlias(time_column,'5m')", 'SELECT floor(extract(epoch from time_column)/300)*300 AS "time"'),
    ("$__timeGroup(time_column , '5m')", "floor(extract(epoch from time_column)/300)*300"),
    ("$__timeGroup(t, '20ms')", "floor(extract(epoch from t)/0.02)*0.02"),
    ("$__timeGroup(t, '1d', NULL)", "floor(extract(epoch from t)/86400)*86400"),
    ("select $__unixEpochFilter(time)", f"select time >= {FROM // 1000} AND time <= {TO // 1000}"),
    ("select $__unixEpochNanoFilter(time)", f"select time >= {FROM * 10**6} AND time <= {TO * 10**6}"),
    ("select $__unixEpochNanoFrom()", f"select {FROM * 10**6}"),
    ("select $__unixEpochNanoTo()", f"select {TO * 10**6}"),
    ("SELECT $__unixEpochGroup(time_column+time_adjustment,'5m')", "SELECT floor((time_column+time_adjustment)/300)*300"),
    ("SELECT $__unixEpochGroupAlias(c,'5m')", 'SELECT floor((c)/300)*300 AS "time"'),
    ("select $__unixEpochFrom(), $__unixEpochTo()", f"select {FROM // 1000}, {TO // 1000}"),
    ("SELECT $__interval, $__interval_ms", "SELECT 10m, 600000"),
])
def test_macros_as_grafana_expands_them(sql, want):
    assert gs.interpolate_macros(sql, FROM, TO, 600) == want


def test_times_are_rfc3339_nano_in_utc():
    assert gs.rfc3339_nano(ms(1960, 2, 1, 7, 0, 0, micro=500000)) == "1960-02-01T07:00:00.5Z"
    assert gs.rfc3339_nano(ms(1980, 2, 3, 8, 0, 0, micro=120000)) == "1980-02-03T08:00:00.12Z"
    assert gs.interpolate_macros("WHERE $__timeFilter(c)", ms(1960, 2, 1, 7, 0, 0), ms(1965, 2, 3, 8, 0, 0), 60) == \
        "WHERE c BETWEEN '1960-02-01T07:00:00Z' AND '1965-02-03T08:00:00Z'"


def test_an_unknown_macro_or_a_missing_argument_is_refused_as_by_grafana():
    with pytest.raises(gs.MacroError, match='unknown macro "__nope"'):
        gs.interpolate_macros("select $__nope(x)", FROM, TO, 60)
    with pytest.raises(gs.MacroError, match="missing time column argument for macro __timeFilter"):
        gs.interpolate_macros("where $__timeFilter()", FROM, TO, 60)
    with pytest.raises(gs.MacroError, match="needs time column and interval"):
        gs.interpolate_macros("select $__timeGroup(t)", FROM, TO, 60)
    with pytest.raises(gs.MacroError, match="error parsing interval"):
        gs.interpolate_macros("select $__timeGroup(t, 'soon')", FROM, TO, 60)


@pytest.mark.parametrize("seconds, text", [(600, "10m"), (60, "1m"), (90, "1m"), (1, "1s"), (0.02, "20ms"),
                                           (86400 * 2, "2d"), (3600, "1h"), (86400 * 400, "1y"), (0.0001, "1ms")])
def test_interval_text_as_gtime_formats_it(seconds, text):
    assert gs.format_interval(seconds) == text


def test_variables_as_the_browser_substitutes_them():
    variables = {"sweep": "it's", "host": ["a", "b'c"], "metric": "tps"}
    sql = "WHERE sweep = '$sweep' AND host IN ($host) AND m = ${metric:sqlstring} AND [[metric]] AND $__timeFilter(t)"
    assert gs.interpolate_variables(sql, variables, multi={"host"}) == (
        "WHERE sweep = 'it's' AND host IN ('a','b''c') AND m = 'tps' AND tps AND $__timeFilter(t)")
    # a single value of a variable that is multi or include-all is quoted too
    assert gs.interpolate_variables("h IN ($host)", {"host": "a"}, multi={"host"}) == "h IN ('a')"


def test_expand_is_variables_then_macros():
    sql = "SELECT $__timeGroup(t, $__interval) FROM x WHERE w = '$workload' AND $__timeFilter(t)"
    assert gs.expand(sql, {"workload": "w1"}, FROM, TO) == (
        "SELECT floor(extract(epoch from t)/60)*60 FROM x WHERE w = 'w1' AND "
        "t BETWEEN '2018-04-12T18:00:00Z' AND '2018-04-12T18:05:00Z'")


def test_the_history_and_experiment_dashboards_have_sql_panels_on_the_results_data_source():
    for name in ("history.json", "experiment.json"):
        with open(os.path.join(ROOT, "dashboards", name), encoding="utf-8") as f:
            dash = json.load(f)
        queries = gs.dashboard_sql_queries(dash)
        assert queries, name
        results = [v for v in dash["templating"]["list"] if v["name"] == "results"][0]
        assert results["type"] == "datasource" and results["current"]["value"] == "benchwatch-results"
        for q in queries:
            # every macro expands, and every $ left would be a variable Grafana fills in: none is left over
            expanded = gs.expand(q.raw_sql, {"workload": "w", "metric": "tps", "experiment": "e"}, FROM, TO,
                                 gs.multi_variables(dash))
            assert "$" not in expanded, (name, q.source)
