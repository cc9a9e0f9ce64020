"""The "Experiment" dashboard: an experiment's report (benchwatch sweep, then report, which writes the
series of benchwatch.experiment.series) as Grafana shows it, picked by the experiment variable: TPS per
cell and variant with its 95 % interval, each variant against the baseline with its verdict, the steadiness
measures with their intervals and verdicts, and per cell a histogram of per-interval TPS per variant."""

from __future__ import annotations

from grafana_foundation_sdk.builders import barchart as barchart_b
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import table as table_b
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash_m

from benchwatch.grafana import panels as P
from benchwatch.grafana.board import dashboard, datasource_variable, results_variable
from benchwatch.grafana.panels import DS, Layout

EXPERIMENT = ("benchwatch-experiment", "experiment.json", "Experiment")
SEL = 'experiment="$experiment"'
# The verdicts of the experiment's reports in the time range, from the results database (sweep_verdicts,
# docs/results.md): each report replaces its own rows, so these are the latest report's per host and baseline.
VERDICTS_SQL = """SELECT variant, cell, metric, verdict, ratio, ratio_ci_low AS "95 % low", ratio_ci_high AS "95 % high",
  p_value AS "p", p_adjusted AS "p (Holm)", n_baseline AS "n baseline", n_variant AS "n variant", why,
  baseline, host, reported_at AS "reported"
FROM sweep_verdicts
WHERE sweep = '$experiment' AND $__timeFilter(reported_at)
ORDER BY host, baseline, variant, cell,
  CASE metric WHEN 'tps' THEN 0 WHEN 'latency_avg' THEN 1 WHEN 'latency_p95' THEN 2 WHEN 'steadiness' THEN 3 ELSE 4 END,
  metric"""


def _last(metric: str) -> str:
    # The newest report of the experiment within the dashboard's range.
    return f"last_over_time({metric}{{{SEL}}}[$__range])"


def experiment_variable() -> dash_b.QueryVariable:
    query = "label_values(benchwatch_experiment_tps_median, experiment)"
    return (dash_b.QueryVariable("experiment").label("Experiment").datasource(DS)
            .description("The sweep (benchwatch sweep --name NAME) whose latest report (benchwatch report NAME) to show.")
            .query({"query": query, "refId": "experiment"}).regex("")
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(False).include_all(False).options([]))


def cell_variable() -> dash_b.QueryVariable:
    query = 'label_values(benchwatch_experiment_interval_tps_intervals{experiment="$experiment"}, cell)'
    return (dash_b.QueryVariable("cell").label("Cell").datasource(DS)
            .description("The cells whose per-interval TPS to draw, one histogram each (bins differ per cell).")
            .query({"query": query, "refId": "cell"}).regex("")
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(True).include_all(True).all_value(".*")
            .current(dash_m.VariableOption(selected=True, text="All", value="$__all")).options([]))


def _table(L: Layout, title: str, description: str, columns: list[tuple[str, str]], w: int = 24,
           h: int = 9) -> table_b.Panel:
    """One instant query per column (metric, its header), merged on their labels into one row per series."""
    queries = [P.query(_last(metric), instant=True, fmt="table") for metric, _ in columns]
    rename = {f"Value #{chr(ord('A') + i)}": header for i, (_, header) in enumerate(columns)}
    return (table_b.Panel().id(L.take_id()).title(title).description(description).unit("short").datasource(DS)
            .grid_pos(L.place(w, h)).targets(P._queries(queries)).show_header(True)
            .with_transformation(dash_m.DataTransformerConfig(id_val="merge", options={}))
            .with_transformation(dash_m.DataTransformerConfig(id_val="organize", options={
                "excludeByName": {"Time": True, "__name__": True, "experiment": True}, "renameByName": rename})))


def experiment_dashboard() -> dict:
    L = Layout()
    chart = (barchart_b.Panel().id(L.take_id()).title("TPS per cell and variant (median of the runs)")
             .description("Each variant's median TPS in each cell of the experiment (clients, scale, --arg values), "
                          "side by side; the 95 % intervals are in the table below. From the latest benchwatch report.")
             .unit("reqps").datasource(DS).grid_pos(L.place(24, 10))
             .targets(P._queries([P.query(_last("benchwatch_experiment_tps_median"), instant=True, fmt="table")]))
             .with_transformation(dash_m.DataTransformerConfig(id_val="groupingToMatrix", options={
                 "columnField": "variant", "rowField": "cell", "valueField": "Value"}))
             .x_field("cell\\variant").show_value(common.VisibilityMode.AUTO).min(0)
             .legend(common_b.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
                     .placement(common.LegendPlacement.BOTTOM).show_legend(True)))
    L.new_row()
    cells = _table(L, "Cells: median TPS, 95 % interval, runs", "Per variant and cell: the median TPS of its runs, "
                   "the 95 % interval (Student's t), the runs that count (n) and the median of their average latency.",
                   [("benchwatch_experiment_tps_median", "TPS median"), ("benchwatch_experiment_tps_ci_low", "95 % low"),
                    ("benchwatch_experiment_tps_ci_high", "95 % high"), ("benchwatch_experiment_runs", "n"),
                    ("benchwatch_experiment_latency_avg_seconds_median", "latency avg s")])
    L.new_row()
    diffs = _table(L, "Against the baseline: ratio and verdict", "Each variant's TPS over the baseline's in each cell "
                   "(geometric means) with its 95 % interval, and the verdict of Welch's t on the logs, Holm-adjusted "
                   "across the report, ignoring changes below --min-effect: 1 faster, -1 slower, 0 no difference shown.",
                   [("benchwatch_experiment_tps_ratio", "ratio"), ("benchwatch_experiment_tps_ratio_ci_low", "95 % low"),
                    ("benchwatch_experiment_tps_ratio_ci_high", "95 % high"), ("benchwatch_experiment_verdict", "verdict")])
    L.new_row()
    steady = _table(L, "Steadiness: each measure's median, 95 % interval", "Per variant, cell and measure of the "
                    "runs' stability profiles (summary.json's stability: tps_cov, tps_p5_ratio, dip_seconds, stall_seconds, lost_share decide the "
                    "verdict; the other measures are shown): the median over the runs and its 95 % interval "
                    "(Student's t on log(value + floor), the floor taken off again).",
                    [("benchwatch_experiment_stability_median", "median"),
                     ("benchwatch_experiment_stability_ci_low", "95 % low"),
                     ("benchwatch_experiment_stability_ci_high", "95 % high")], h=12)
    L.new_row()
    steady_verdicts = _table(L, "Steadiness against the baseline: verdict", "1 steadier, -1 less steady, 0 no "
                             "difference shown: Welch's t on log(value + floor) of tps_cov, tps_p5_ratio, dip_seconds, stall_seconds and lost_share, "
                             "Holm-adjusted across the report's stability tests, ignoring changes below --min-effect; "
                             "steadier when one is shown better and none worse.",
                             [("benchwatch_experiment_stability_verdict", "verdict")], h=6)
    L.new_row()
    spread = (barchart_b.Panel().id(L.take_id()).title("Per-interval TPS per variant: $cell")
              .description("How the per-interval TPS of each variant's runs spreads (their progress lines pooled), "
                           "counted in bins shared by the variants of the cell (each bar: the intervals whose TPS is "
                           "at most its edge and above the one before). A calm variant is one tall group of bars; "
                           "valleys are bars to the left. From the latest benchwatch report.")
              .unit("short").datasource(DS).grid_pos(L.place(24, 10)).repeat("cell")
              .repeat_direction("v")
              .targets(P._queries([P.query(
                  'last_over_time(benchwatch_experiment_interval_tps_intervals{' + SEL + ', cell=~"$cell"}[$__range])',
                  instant=True, fmt="table")]))
              .with_transformation(dash_m.DataTransformerConfig(id_val="groupingToMatrix", options={
                  "columnField": "variant", "rowField": "le", "valueField": "Value"}))
              .with_transformation(dash_m.DataTransformerConfig(id_val="convertFieldType", options={
                  "conversions": [{"targetField": "le\\variant", "destinationType": "number"}]}))
              .with_transformation(dash_m.DataTransformerConfig(id_val="sortBy", options={
                  "sort": [{"field": "le\\variant"}]}))
              .x_field("le\\variant").show_value(common.VisibilityMode.NEVER).min(0)
              .legend(common_b.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
                      .placement(common.LegendPlacement.BOTTOM).show_legend(True)))
    L.new_row()
    verdicts = P.sql_table(L, "Verdicts with intervals (results database)", "Every verdict of the experiment's latest "
                           "report (per host and baseline) from the results database's sweep_verdicts: per variant, "
                           "cell and measure against the baseline (tps, latency_avg, latency_p95, steadiness and each "
                           "stability measure), the ratio variant / baseline with its 95 % interval, the p-value and "
                           "its Holm adjustment, the runs on each side, and the why. Ratios and p-values have no unit.",
                           "none", VERDICTS_SQL, h=12)
    uid, _, title = EXPERIMENT
    return _dashboard(uid, title, "An experiment's report (benchwatch sweep, benchwatch report NAME): TPS per cell "
                       "and variant with 95 % intervals, each variant against the baseline, the steadiness of each "
                       "with its intervals and verdict, and the spread of per-interval TPS.",
                      [chart, cells, diffs, steady, steady_verdicts, spread, verdicts])


def _dashboard(uid: str, title: str, description: str, items: list) -> dict:

    return dashboard(uid, title, description, items,
                     [datasource_variable(), results_variable(), experiment_variable(), cell_variable()], [])
