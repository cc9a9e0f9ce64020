"""Dashboard-level builders every dashboard shares: the dashboard itself with its links, the data source,
target, run and device pickers, and the run's own annotation. A toolkit (as panels.py is): the dashboards
are composed in benchwatch.dashboards, and the engines' own dashboards (Checkpoints & WAL) use it too."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog import builder as cog_b
from grafana_foundation_sdk.models import dashboard as dash_m

from benchwatch import engines, loadgens
from benchwatch.grafana import panels as P
from benchwatch.grafana.panels import DATASOURCE_UID, DS, PrometheusAnnotation, of_any_run, of_run
from benchwatch.query.targets import TARGET_VALUES_SELECTOR


def run_annotation(generator: loadgens.LoadGenerator | None = None) -> PrometheusAnnotation:
    """The picked run, while it ran, with its arguments: named after its tool on a tool's dashboard."""
    name = f"{generator.title} run" if generator else "benchmark run"
    tags = ",".join(("script", *(label for label in generator.run_picker_labels[1:2]))) if generator else "script,tool"
    return (PrometheusAnnotation(name, f"{of_run('benchmark_run_info')} and on(run_id) ({of_run('benchmark_running')} == 1)",
                                 "#73BF69")
            .step("1s").title_format(f"{generator.title if generator else '{{tool}}'} run {{{{run_id}}}}")
            .text_format(f"{generator.title if generator else '{{tool}}'} {{{{args}}}}").tag_keys(tags))


def datasource_variable() -> dash_b.DatasourceVariable:
    return (dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .current(dash_m.VariableOption(selected=True, text=DATASOURCE_UID, value=DATASOURCE_UID))
            .hide(dash_m.VariableHide.DONT_HIDE).regex(""))


def results_variable() -> dash_b.DatasourceVariable:
    """The PostgreSQL data source of the SQL panels: the provisioned results database by default, or a team's."""
    return (dash_b.DatasourceVariable("results").label("Results database").type(P.RESULTS_TYPE)
            .current(dash_m.VariableOption(selected=True, text=P.RESULTS_UID, value=P.RESULTS_UID))
            .hide(dash_m.VariableHide.DONT_HIDE).regex(""))


def target_variable() -> dash_b.QueryVariable:
    query = f"label_values({TARGET_VALUES_SELECTOR}, target)"
    return (dash_b.QueryVariable("target").label("Target").datasource(DS)
            .description("Database instances (targets) to show; All also shows series recorded before targets had names.")
            .query({"query": query, "refId": "target"}).regex("")
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(True).include_all(True).all_value(".*")
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"])).options([]))


def runs_of(generator: loadgens.LoadGenerator, engine: engines.Engine | None = None) -> str:
    """The runs of one tool (on one engine), each labelled "run_id — what it ran" by the tool's
    run_picker_labels and run_picker_format (pgbench: script, clients, scale; sysbench: test, threads).
    A run recorded without an engine label (before engines were recorded) counts as its tool's first
    engine's, one without a tool label as the default tool's."""
    labels = generator.run_picker_labels
    # Runs recorded before series carried a tool label are the default tool's.
    matchers = f'tool=~"{generator.name}|"' if generator.default else f'tool="{generator.name}"'
    # The engine is a label of the run's info series only: the join below keeps the runs whose info has it.
    info_matchers = matchers
    if engine is not None:
        info_matchers += (f', engine=~"{engine.name}|"' if engine.name == generator.engines[0]
                          else f', engine="{engine.name}"')
    joined = ", ".join(f'"{x}"' for x in ("run_id", *labels))
    groups = "\\\\|".join(["([^|]*)"] * len(labels) + ["(.*)"])
    return ("label_replace(label_join("
            f"last_over_time({of_any_run('benchmark_run_start_timestamp_seconds', matchers)}[$__range]) "
            f"* on(run_id) group_left({', '.join(labels)}) "
            f"last_over_time({of_any_run('benchmark_run_info', info_matchers)}[$__range]), "
            f'"display", "|", {joined}), '
            f'"display", "$1 — {generator.run_picker_format}", "display", "{groups}")')


def run_picker_expr(pairs: list[tuple[loadgens.LoadGenerator, engines.Engine | None]]) -> str:
    return "sort_desc(" + " or ".join(runs_of(g, e) for g, e in pairs) + ")"


def every_run() -> str:
    """Runs of every tool on every engine: the picker of the dashboards that are not a run's own."""
    return run_picker_expr([(g, None) for g in loadgens.load_generators().values()])


def run_variable(expr: str) -> dash_b.QueryVariable:
    return (dash_b.QueryVariable("run_id").label("Run").datasource(DS)
            .query({"query": f"query_result({expr})", "refId": "run_id"})
            .regex('/display="(?<text>[^"]*)".*run_id="(?<value>[^"]*)"/')
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.DISABLED)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(False).include_all(False).options([]))


def device_variable() -> dash_b.QueryVariable:
    # The counter the %util rule rates: the same devices, without the rule. Every host's (host series carry
    # no target: node_exporter is scraped once per host).
    query = "label_values(node_disk_io_time_seconds_total, device)"
    return (dash_b.QueryVariable("device").label("Device").datasource(DS).query({"query": query, "refId": "device"})
            .regex("").refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .hide(dash_m.VariableHide.DONT_HIDE).multi(True).include_all(True).all_value(".*")
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"])).options([]))


def links() -> list[cog_b.Builder[dash_m.DashboardLink]]:
    return [dash_b.DashboardLink("benchwatch dashboards").type(dash_m.DashboardLinkType.DASHBOARDS).tags(["benchwatch"])
            .as_dropdown(False).include_vars(True).keep_time(True).target_blank(False).icon("external link")]


def dashboard(uid: str, title: str, description: str, items: list[P.PanelBuilder], variables: list,
              annotation_list: list) -> dict:
    d = (dash_b.Dashboard(title).uid(uid).description(description).tags(["benchwatch"]).editable().version(1)
         .refresh("5s").timezone("").tooltip(dash_m.DashboardCursorSync.CROSSHAIR).time("now-15m", "now")
         .timepicker(dash_b.TimePicker().refresh_intervals(["1s", "5s", "10s", "30s", "1m"]))
         .variables(variables).annotations([P.builtin_annotation()] + annotation_list).links(links()))
    for item in items:
        if isinstance(item, dash_b.Row):
            d.with_row(item)
        else:
            d.with_panel(item)
    return P.to_json(d)
