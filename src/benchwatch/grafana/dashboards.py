"""The Grafana dashboards as code; dashboards/generate.py writes them to dashboards/*.json.

Built with Grafana's schema-generated builders (benchwatch.grafana.panels).
Every panel has a title, a description and a unit, takes its datasource from
the `datasource` variable (default: the provisioned uid), and rates over
$__rate_interval.

A run dashboard is composed, one per load generator and engine it can drive
(pgbench on PostgreSQL, sysbench on InnoDB and on PostgreSQL, ...): the run's
TPS beside its server's transactions, its statistics, the tool's own panels
(benchwatch.loadgens.<tool>.dashboard), the engine's (benchwatch.engines.
<family>.dashboard), the host's disks and CPUs, under the engine's regions
(checkpoints, InnoDB flushing pressure), the run and its TPS dips. Beside them:
Host I/O (any engine) and each engine's own dashboards (Checkpoints & WAL).

Targets: every database-side series (node_exporter, the engine's exporter, the
checkpoint collector) carries `target` (one database instance) and `host`.
The `target` variable (multi-select, All) filters every database-side query
with target=~"$target"; All is `.*`, which also matches series without a
target label, so data recorded before targets existed still shows. Run series
are not filtered: a run is chosen by the run picker, and read under their name
now or the one runs recorded before it had (benchwatch.model.names).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog import builder as cog_b
from grafana_foundation_sdk.models import dashboard as dash_m

from benchwatch import engines, loadgens
from benchwatch.explain import annotation as dip
from benchwatch.grafana import experiment, history, rules
from benchwatch.grafana import panels as P
from benchwatch.grafana.panels import (
    DATASOURCE_UID,
    DISKS,
    DS,
    TARGET,
    Layout,
    PrometheusAnnotation,
    of_any_run,
    of_run,
    on_targets,
    row,
    stat,
    timeseries,
)
from benchwatch.history import series as history_series
from benchwatch.query.targets import TARGET_VALUES_SELECTOR

HOST_IO = ("benchwatch-host-io", "host-io.json", "Host I/O")


# -- annotations ------------------------------------------------------------------------

def dip_annotation() -> PrometheusAnnotation:
    """Each finished TPS dip of the run, its cause in the title (benchwatch.explain.annotation)."""
    return (PrometheusAnnotation(dip.NAME, dip.EXPR, dip.COLOUR).step("1s").title_format(dip.TITLE)
            .text_format(dip.TEXT).tag_keys(dip.TAG_KEYS))


def run_annotation(generator: loadgens.LoadGenerator | None = None) -> PrometheusAnnotation:
    """The picked run, while it ran, with its arguments: named after its tool on a tool's dashboard."""
    name = f"{generator.title} run" if generator else "benchmark run"
    tags = ",".join(("script", *(label for label in generator.run_picker_labels[1:2]))) if generator else "script,tool"
    return (PrometheusAnnotation(name, f"{of_run('benchmark_run_info')} and on(run_id) ({of_run('benchmark_running')} == 1)",
                                 "#73BF69")
            .step("1s").title_format(f"{generator.title if generator else '{{tool}}'} run {{{{run_id}}}}")
            .text_format(f"{generator.title if generator else '{{tool}}'} {{{{args}}}}").tag_keys(tags))


def sweep_runs_annotation() -> PrometheusAnnotation:
    """The runs of every experiment (benchwatch sweep) in the time range, each while it ran, with its variant,
    cell and round: a sweep's hours read at a glance, the picked run among them."""
    in_a_sweep = 'sweep!=""'
    runs = f"{of_any_run('benchmark_run_info', in_a_sweep)} and on(run_id) ({of_any_run('benchmark_running')} == 1)"
    return (PrometheusAnnotation("experiment runs (benchwatch sweep)", runs, "#8F3BB8").step("1s")
            .title_format("sweep {{sweep}}: {{variant}}, {{cell}}, round {{repeat}}").text_format("run {{run_id}}")
            .tag_keys("sweep,variant"))


def annotate_events_annotation() -> PrometheusAnnotation:
    """Events recorded with benchwatch annotate (a deploy, a remount): a point where each was recorded."""
    # Over the step only: the one sample would otherwise be found for Prometheus' 5-minute lookback after it.
    return (PrometheusAnnotation("events (benchwatch annotate)", f"last_over_time({history_series.ANNOTATION}[1s])",
                                 "#FF9830").step("1s").title_format("{{text}}").text_format("run {{run_id}}"))


def engine_annotations() -> list[PrometheusAnnotation]:
    """Every engine's regions (checkpoints, InnoDB flushing pressure): for the dashboards of any engine."""
    return [a for e in engines.load_engines().values() for a in e.annotations()]


# -- variables ----------------------------------------------------------------------------

def datasource_variable() -> dash_b.DatasourceVariable:
    return (dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .current(dash_m.VariableOption(selected=True, text=DATASOURCE_UID, value=DATASOURCE_UID))
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
    # The counter the %util rule rates: the same devices, without the rule.
    query = f"label_values({on_targets('node_disk_io_time_seconds_total')}, device)"
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


# -- the parts every run dashboard shares --------------------------------------------------

def tps_panels(L: Layout, generator: loadgens.LoadGenerator, engine: engines.Engine) -> list[P.PanelBuilder]:
    """The run's own TPS beside its server's, then the statistics of the TPS curve."""
    tps = of_run("benchmark_progress_tps")
    median = f"quantile_over_time(0.5, {tps}[$__range] @ end())"
    items: list[P.PanelBuilder] = [
        timeseries(L, "TPS", f"{generator.title}'s own TPS, one point per progress line at its own time (0 while the "
                   f"run is stalled), and {engine.server_transactions_text}. {engine.regions_text} The green region "
                   "is the run, with its arguments; yellow ones are its TPS dips, titled with their cause.", "reqps",
                   [(tps, f"{generator.title} TPS"), (engine.server_transactions_expr(), "server commits+rollbacks/s")],
                   w=24, h=10),
    ]
    L.new_row()
    items += [
        stat(L, "TPS mean", "Mean of the run's TPS over the selected time range.", "reqps", f"avg_over_time({tps}[$__range])"),
        stat(L, "TPS min", "Lowest TPS over the selected range.", "reqps", f"min_over_time({tps}[$__range])"),
        stat(L, "TPS max", "Highest TPS over the selected range.", "reqps", f"max_over_time({tps}[$__range])"),
        stat(L, "TPS stddev", "Standard deviation of TPS over the selected range.", "reqps", f"stddev_over_time({tps}[$__range])"),
        stat(L, "TPS coefficient of variation", "Stddev / mean of TPS over the selected range: 0 is perfectly steady.",
             "percentunit", f"stddev_over_time({tps}[$__range]) / avg_over_time({tps}[$__range])", decimals=2),
        stat(L, "Seconds below 50% of median", "How many seconds of the selected range TPS stayed under half its median: "
             "the stalls and deep dips.", "s",
             f"sum_over_time(({tps} < bool 0.5 * scalar({median}))[$__range:1s])", decimals=0),
    ]
    L.new_row()
    return items


def experiment_panel(L: Layout) -> P.PanelBuilder:
    """The runs of the picked run's experiment side by side (meta.json "info": experiment and target,
    e.g. the four-instance MariaDB demo), or the picked run alone when it belongs to none."""
    info = "benchmark_run_info"
    in_experiment = of_run(info, 'experiment!=""')
    runs = f"({of_any_run(info)} and on(experiment) {in_experiment}) or {of_run(info)}"
    per_run = f"{of_any_run('benchmark_progress_tps')} * on(run_id) group_left(target) ({runs})"
    return timeseries(L, "Experiment: TPS per instance and sum", "TPS of every run of the picked run's experiment "
                      "(benchwatch run --experiment NAME; benchwatch demo --engine mariadb --instances 4 runs four side "
                      "by side), one line per database target it drove, and their sum; the picked run alone when it "
                      "belongs to no experiment.", "reqps",
                      [(f"sum by (target) ({per_run})", "{{target}}"), (f"sum({per_run})", "sum")], w=12)


def host_rows(L: Layout) -> list[P.PanelBuilder]:
    """iostat -x and avg-cpu of the selected targets' hosts, from node_exporter's raw counters (so they
    do not depend on which of node.yml's rules are recorded)."""
    disks = f"{TARGET}, {DISKS}"
    busy = on_targets("node_cpu_seconds_total", 'mode=~"user|system|iowait"')
    idle = on_targets("node_cpu_seconds_total", 'mode="idle"')

    def disk(counter: str, legend: str) -> tuple:
        return (f"rate({counter}{{{disks}}}[$__rate_interval])", f"{{{{target}}}} {{{{device}}}} {legend}")

    def await_(time_c: str, count_c: str, legend: str) -> tuple:
        return (f"rate({time_c}{{{disks}}}[$__rate_interval]) / (rate({count_c}{{{disks}}}[$__rate_interval]) > 0)",
                f"{{{{target}}}} {{{{device}}}} {legend}")

    return [
        row(L, "Host I/O (iostat -x)"),
        timeseries(L, "Requests per second (r/s, w/s)", "Reads and writes completed per second per disk of the "
                   "selected targets' hosts (iostat r/s, w/s).", "iops",
                   [disk("node_disk_reads_completed_total", "r/s"), disk("node_disk_writes_completed_total", "w/s")], w=8),
        timeseries(L, "Throughput (rkB/s, wkB/s)", "Bytes read and written per second per disk (iostat rkB/s, wkB/s).",
                   "Bps", [disk("node_disk_read_bytes_total", "read"), disk("node_disk_written_bytes_total", "written")], w=8),
        timeseries(L, "Utilisation (%util)", "Share of time each disk had requests in flight (iostat %util).",
                   "percentunit", [disk("node_disk_io_time_seconds_total", "%util")], w=8),
        timeseries(L, "Wait per request (r_await, w_await)", "Average time a read or write took, queueing included "
                   "(iostat r_await, w_await): climbing await in the valleys points at the disk.", "s",
                   [await_("node_disk_read_time_seconds_total", "node_disk_reads_completed_total", "r_await"),
                    await_("node_disk_write_time_seconds_total", "node_disk_writes_completed_total", "w_await")]),
        timeseries(L, "CPU (avg-cpu)", "Machine-wide CPU of the selected targets' hosts, by mode (iostat avg-cpu: "
                   "%user, %system, %iowait), as a share of all CPUs.", "percentunit",
                   [(f"sum by (target, mode) (rate({busy}[$__rate_interval])) "
                     f"/ on(target) group_left() count by (target) ({idle})",
                     "{{target}} %{{mode}}")], stack=True),
    ]


@dataclass(frozen=True)
class RunDashboard:
    """The dashboard of one tool's runs on one engine: where it is written and what it is called."""

    generator: loadgens.LoadGenerator
    engine: engines.Engine
    uid: str
    file: str
    title: str


def run_dashboards() -> list[RunDashboard]:
    """One per load generator and engine it can drive; names from the tool where it gives them
    (the existing ones keep their uids), else benchwatch-<tool>-<engine>."""
    out = []
    for generator in loadgens.load_generators().values():
        for name in generator.engines:
            engine = engines.get(name)
            uid, file, title = generator.dashboard_names.get(engine.name) or (
                f"benchwatch-{generator.name}-{engine.name}", f"{generator.name}-{engine.name}.json",
                f"{generator.title} on {engine.title}")
            out.append(RunDashboard(generator, engine, uid, file, title))
    return out


def run_dashboard_for(tool: str | None, engine: str | None) -> RunDashboard:
    """The run dashboard of a recorded run: its tool's on its engine (the tool's first engine when unknown)."""
    generator = loadgens.by_name(tool)
    family = engines.get(engine).name if engine else generator.engines[0]
    for d in run_dashboards():
        if d.generator is generator and d.engine.name == family:
            return d
    return next(d for d in run_dashboards() if d.generator is generator)


def run_dashboard(d: RunDashboard) -> dict:
    L = Layout()
    items = tps_panels(L, d.generator, d.engine)
    items += d.generator.dashboard_panels(L)
    items.append(experiment_panel(L))
    items += host_rows(L)
    # The engine's section last: it starts with a row, and a row repeated by target (PostgreSQL's)
    # takes every panel after it.
    items += d.engine.dashboard_panels(L)
    # run_id stays the last variable: snapshots freeze it there.
    return dashboard(d.uid, d.title, f"One {d.generator.title} run on {d.engine.title}: TPS with "
                     f"{d.engine.regions_name}, the run's own figures ({d.generator.panels_summary}), the server's "
                     f"({d.engine.panels_summary}) and the host's disks and CPUs.",
                     items, [datasource_variable(), target_variable(), run_variable(run_picker_expr([(d.generator, d.engine)]))],
                     [*d.engine.annotations(), run_annotation(d.generator), dip_annotation(),
                      sweep_runs_annotation(), annotate_events_annotation()])


def host_io() -> dict:
    """iostat -x 1 as time series per target and device, with every engine's regions."""
    L = Layout()
    sel = f'{TARGET}, device=~"$device"'

    def per_device(rule: str, legend: str) -> tuple:
        return (rules.expr(f"instance_device:{rule}", sel), f"{{{{target}}}} {{{{device}}}} {legend}")

    def cpu(rule: str, legend: str) -> tuple:
        return (rules.expr(f"instance:{rule}", TARGET), f"{{{{target}}}} {legend}")

    items: list[P.PanelBuilder] = [
        timeseries(L, "Requests per second (r/s, w/s)", "Read and write requests completed per second per device, "
                   "as iostat -x prints r/s and w/s.", "iops",
                   [per_device("node_disk_reads_completed:rate1s", "r/s"), per_device("node_disk_writes_completed:rate1s", "w/s")]),
        timeseries(L, "Throughput (rkB/s, wkB/s)", "Bytes read and written per second per device (iostat rkB/s and "
                   "wkB/s, in bytes).", "Bps",
                   [per_device("node_disk_read_bytes:rate1s", "read"), per_device("node_disk_written_bytes:rate1s", "written")]),
        timeseries(L, "Wait per request (r_await, w_await)", "Average time a read or write request took, queueing "
                   "included (iostat r_await/w_await). Climbing await while TPS dips points at the disk.", "s",
                   [per_device("node_disk_read_await_seconds:mean1s", "r_await"),
                    per_device("node_disk_write_await_seconds:mean1s", "w_await")]),
        timeseries(L, "Utilisation (%util)", "Share of time the device had requests in flight (iostat %util); near 100% "
                   "on a single disk means saturated, less meaningful for SSD/NVMe with parallel queues.", "percentunit",
                   [per_device("node_disk_io_time_seconds:rate1s", "%util")]),
        timeseries(L, "Average request size (rareq-sz, wareq-sz)", "Average size of read and write requests "
                   "(iostat rareq-sz/wareq-sz, in bytes): checkpoints write large sorted requests, backends small ones.",
                   "bytes", [per_device("node_disk_read_request_size_bytes:mean1s", "read"),
                             per_device("node_disk_write_request_size_bytes:mean1s", "write")]),
        timeseries(L, "Queue size (aqu-sz)", "Average number of requests queued or in service (iostat aqu-sz).", "short",
                   [per_device("node_disk_io_time_weighted_seconds:rate1s", "aqu-sz")]),
    ]
    L.new_row()
    items.append(timeseries(L, "CPU (avg-cpu)", "Machine-wide CPU of each selected target's host as iostat's avg-cpu "
                            "line: %user, %system (irq and softirq included), %iowait, %idle.", "percentunit", [
                                cpu("node_cpu_user:ratio1s", "%user"), cpu("node_cpu_system:ratio1s", "%system"),
                                cpu("node_cpu_iowait:ratio1s", "%iowait"), cpu("node_cpu_idle:ratio1s", "%idle")],
                            w=24, stack=True))
    uid, _, title = HOST_IO
    return dashboard(uid, title, "The iostat -x view per target, device and CPU, under every engine's regions "
                     "(checkpoints, InnoDB flushing pressure).",
                     items, [datasource_variable(), target_variable(), run_variable(every_run()), device_variable()],
                     [*engine_annotations(), run_annotation()])


def generators() -> dict[str, Callable[[], dict]]:
    """File name -> builder of every dashboard: the run dashboards, Host I/O, each engine's own."""
    out: dict[str, Callable[[], dict]] = {d.file: functools.partial(run_dashboard, d) for d in run_dashboards()}
    out[HOST_IO[1]] = host_io
    out[history.FILE] = history.history_dashboard
    out[experiment.EXPERIMENT[1]] = experiment.experiment_dashboard
    for engine in engines.load_engines().values():
        out.update(engine.dashboards())
    return dict(sorted(out.items()))


def render_all() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in generators().items()}
