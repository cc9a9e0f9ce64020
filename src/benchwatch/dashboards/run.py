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

Targets: every database-side series (the engine's exporter, the checkpoint
collector) carries `target` (one database instance) and `host`; node_exporter's
host series carry `host` (scraped once per host, not once per target). The
`target` variable (multi-select, All) filters every database-side query with
target=~"$target", and host series by the hosts of the selected targets
(`and on(host)` the targets' `up`); All is `.*`, which also matches series
without a target label, so data recorded before targets existed still shows. Run series
are not filtered: a run is chosen by the run picker, and read under their name
now or the one runs recorded before it had (benchwatch.model.names).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass

from benchwatch import engines, loadgens
from benchwatch.dashboards import experiment, history
from benchwatch.explain import annotation as dip
from benchwatch.grafana import panels as P
from benchwatch.grafana import rules
from benchwatch.grafana.board import (
    dashboard,
    datasource_variable,
    device_variable,
    every_run,
    run_annotation,
    run_picker_expr,
    run_variable,
    target_variable,
)
from benchwatch.grafana.panels import (
    DISKS,
    Layout,
    PrometheusAnnotation,
    of_any_run,
    of_run,
    on_target_hosts,
    row,
    stat,
    timeseries,
)
from benchwatch.history import series as history_series

HOST_IO = ("benchwatch-host-io", "host-io.json", "Host I/O")


# -- annotations ------------------------------------------------------------------------

def dip_annotation() -> PrometheusAnnotation:
    """Each finished TPS dip of the run, its cause in the title (benchwatch.explain.annotation)."""
    return (PrometheusAnnotation(dip.NAME, dip.EXPR, dip.COLOUR).step("1s").title_format(dip.TITLE)
            .text_format(dip.TEXT).tag_keys(dip.TAG_KEYS))


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
    busy = 'node_cpu_seconds_total{mode=~"user|system|iowait"}'
    idle = 'node_cpu_seconds_total{mode="idle"}'

    def disk(counter: str, legend: str) -> tuple:
        return (on_target_hosts(f"rate({counter}{{{DISKS}}}[$__rate_interval])"), f"{{{{host}}}} {{{{device}}}} {legend}")

    def await_(time_c: str, count_c: str, legend: str) -> tuple:
        return (on_target_hosts(f"rate({time_c}{{{DISKS}}}[$__rate_interval]) "
                                f"/ (rate({count_c}{{{DISKS}}}[$__rate_interval]) > 0)"),
                f"{{{{host}}}} {{{{device}}}} {legend}")

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
                   [(on_target_hosts(f"sum by (host, mode) (rate({busy}[$__rate_interval])) "
                                     f"/ on(host) group_left() count by (host) ({idle})"),
                     "{{host}} %{{mode}}")], stack=True),
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
    """iostat -x 1 as time series per host of the selected targets and device, with every engine's regions."""
    L = Layout()

    def per_device(rule: str, legend: str) -> tuple:
        return (on_target_hosts(rules.expr(f"instance_device:{rule}", 'device=~"$device"')), f"{{{{host}}}} {{{{device}}}} {legend}")

    def cpu(rule: str, legend: str) -> tuple:
        return (on_target_hosts(rules.expr(f"instance:{rule}", 'cpu=~".+"')), f"{{{{host}}}} {legend}")

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
