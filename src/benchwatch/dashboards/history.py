"""The History dashboard: one workload's runs over calendar time, one point per run, with its change
points and the annotations of ``benchwatch annotate`` (series written by ``benchwatch history``:
benchmark_history_*, see benchwatch.history.series)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash_m

from benchwatch.grafana.board import dashboard, datasource_variable, results_variable
from benchwatch.grafana.panels import DS, Layout, PrometheusAnnotation, sql_table, table, timeseries
from benchwatch.history.series import ANNOTATION, CHANGE_POINT, VALUE

UID, FILE, TITLE = "benchwatch-history", "history.json", "History"
SELECTED = 'workload="$workload", metric="$metric"'
# Annotations are read at a fixed step: last_over_time over the step itself sees each sample once, whatever
# the time range (one hour: a year's range stays under Prometheus' 11,000 points a query).
ANNOTATION_STEP = "1h"
# The workload's change points whose first run after started in the time range, from the results database
# (history_change_points, docs/results.md): as the latest benchwatch history of the workload found them, per host.
CHANGE_POINTS_SQL = """SELECT started_at AS "first run after, at", run_id AS "first run after", verdict,
  step_pct AS "step %", step_ci_low AS "95 % low %", step_ci_high AS "95 % high %", p_value AS "p",
  mean_before AS "before", mean_after AS "after", accepted, changed_text AS "what changed", host
FROM history_change_points
WHERE workload = '$workload' AND metric = '$metric' AND $__timeFilter(started_at)
ORDER BY started_at, host"""


def _variable(name: str, label: str, series: str, description: str) -> dash_b.QueryVariable:
    """One label's values among the series seen in the time range: query_result over $__range, since a run
    of weeks ago has no sample in the last five minutes that label_values' instant lookup would find."""
    return (dash_b.QueryVariable(name).label(label).datasource(DS).description(description)
            .query({"query": f"query_result(last_over_time({series}[$__range]))", "refId": name})
            .regex(f'/{name}="(?<value>[^"]*)"/')
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(False).include_all(False).options([]))


def change_point_annotation() -> PrometheusAnnotation:
    return (PrometheusAnnotation("Change points", f"last_over_time({CHANGE_POINT}{{{SELECTED}}}[{ANNOTATION_STEP}])",
                                 "#F2495C")
            .step(ANNOTATION_STEP).title_format("{{verdict}} {{step}} from run {{run_id}}")
            .text_format("what changed: {{changed}}").tag_keys("verdict"))


def event_annotation() -> PrometheusAnnotation:
    return (PrometheusAnnotation("Events (benchwatch annotate)", f"last_over_time({ANNOTATION}[{ANNOTATION_STEP}])",
                                 "#5794F2")
            .step(ANNOTATION_STEP).title_format("{{text}}").text_format("run {{run_id}}"))


def history_dashboard() -> dict:

    L = Layout()
    runs = timeseries(L, "Runs", "The chosen figure of each run of the workload at its start, one point per run "
                      "(TPS in transactions per second, latency_* in seconds; the unit follows the metric variable). "
                      "Change points are the red annotations: the step, its 95 % interval and p-value, what changed.",
                      "short", [(f"last_over_time({VALUE}{{{SELECTED}}}[$__interval])", "{{metric}}")], w=24, h=10,
                      min_zero=False)
    runs.show_points(common.VisibilityMode.ALWAYS).point_size(6).span_nulls(True)
    changes = table(L, "Change points", "Every change point of the workload's history in the time range: the first "
                    "run after it, regression or improvement, the step with its interval and p-value, and what differs "
                    "between the runs around it (versions, settings, argv, host, filesystem, annotations).", "short",
                    f"last_over_time({CHANGE_POINT}{{{SELECTED}}}[$__range])",
                    {"run_id": "first run after", "verdict": "verdict", "step": "step", "changed": "what changed"})
    sql_changes = sql_table(L, "Change points with what changed (results database)", "The workload's change points "
                            "from the results database's history_change_points, as the latest benchwatch history of "
                            "the workload found them on each host: the first run after the change, regression or "
                            "improvement, the step in percent with its 95 % interval and p-value, the mean before and "
                            "after (in the metric's unit), whether it was accepted, and what differs between the runs "
                            "around it, whole (the table above cuts it at 1,000 characters).", "none",
                            CHANGE_POINTS_SQL)
    workload = _variable("workload", "Workload", VALUE,
                         "A workload: runs that did the same work (benchwatch history lists them).")
    metric = _variable("metric", "Metric", f'{VALUE}{{workload="$workload"}}',
                       "The figure followed: tps, latency_avg, latency_p95, ...")
    return dashboard(UID, TITLE, "Runs of one workload over calendar time, one point per run, with their change points "
                     "(regressions and improvements, how sure, what changed) and external events (benchwatch annotate). "
                     "benchwatch history WORKLOAD writes these series.",
                     [runs, changes, sql_changes], [datasource_variable(), results_variable(), workload, metric],
                     [change_point_annotation(), event_annotation()])
