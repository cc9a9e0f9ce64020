"""Grafana panel builders: the one place that knows how a panel is made.

Panels, rows, variables and annotations come from Grafana's own schema-generated
builders (grafana-foundation-sdk, generated from the schema of the Grafana
version benchwatch provisions), so the JSON has the shape Grafana expects by
construction. Used by the committed dashboards (benchwatch.dashboards.run)
and by the panels a snapshot appends (benchwatch.share.collect). Every panel
has a title, a description and a unit, and takes its datasource from the
``datasource`` variable.
"""

from __future__ import annotations

import json
import typing

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import table as table_b
from grafana_foundation_sdk.builders import timeseries as timeseries_b
from grafana_foundation_sdk.cog import builder as cog_b
from grafana_foundation_sdk.cog import variants as cog_variants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import prometheus as prom_m

from benchwatch.model import names
from benchwatch.record.host import DISKS as DISKS  # the disks' matcher, beside RUN and TARGET

DATASOURCE_UID = "benchwatch-prometheus"
DS = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")
# The results database (docs/results.md) through Grafana's built-in PostgreSQL data source, provisioned with
# this uid (grafana/provisioning/datasources/benchwatch.yml); its panels take it from the ``results`` variable.
RESULTS_UID = "benchwatch-results"
RESULTS_TYPE = "grafana-postgresql-datasource"  # the plugin's id since Grafana 10.2.3 ("postgres" before, an alias since: grafana#77444)
RESULTS_DS = dash_m.DataSourceRef(type_val=RESULTS_TYPE, uid="${results}")

# The matchers every dashboard's queries share: the picked run, the selected targets, disks.
RUN = 'run_id="$run_id"'
TARGET = 'target=~"$target"'


# node_exporter is scraped once per host (an agent watching several instances of one host scrapes it once):
# host series carry `host`, not `target`, and are kept for the hosts the selected targets run on. Series
# of stacks recorded before (node series with a `target` too, or no `host` on either side) match as well.
ON_TARGET_HOSTS = f"on(host) group by (host) (up{{{TARGET}}})"


def on_target_hosts(expr: str) -> str:
    """``expr`` (host series) for the hosts of the selected targets only."""
    return f"({expr} and {ON_TARGET_HOSTS})"


def on_targets(metric: str, extra: str = "") -> str:
    """``metric`` on the selected targets (and ``extra`` matchers)."""
    return f"{metric}{{{TARGET}{', ' + extra if extra else ''}}}"


def of_any_run(name: str, matchers: str = "") -> str:
    """A run series of every run (under either name, as :func:`of_run`), with ``matchers``."""
    return names.select(name, matchers)


def of_run(name: str, extra: str = "") -> str:
    """A run series of the picked run, under its name now or the one runs recorded before it had
    (benchwatch.model.names): a selector a range can be taken over too."""
    return names.select(name, RUN + (f", {extra}" if extra else ""))

PanelBuilder = cog_b.Builder[dash_m.Panel] | dash_b.Row


def to_json(obj: typing.Any) -> typing.Any:
    """Plain JSON (dicts, lists) of a builder or a model, as Grafana reads it."""
    if isinstance(obj, cog_b.Builder):
        obj = obj.build()
    return json.loads(json.dumps(obj, cls=JSONEncoder))


class Layout:
    """Places panels left to right in rows of 24 columns, from row ``y`` on, with ids from ``next_id``.

    The SDK's dashboard builder can place panels too, but a snapshot appends
    panels below a dashboard that is already JSON, and the ids must be stable
    (snapshots and tests find panels by id): one placer for both.
    """

    def __init__(self, y: int = 0, next_id: int = 1):
        self.x = self.row_h = 0
        self.y = y
        self.next_id = next_id

    def place(self, w: int, h: int) -> dash_m.GridPos:
        if self.x + w > 24:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0
        pos = dash_m.GridPos(x=self.x, y=self.y, w=w, h=h)
        self.x += w
        self.row_h = max(self.row_h, h)
        return pos

    def new_row(self) -> None:
        if self.x:
            self.x, self.y, self.row_h = 0, self.y + self.row_h, 0

    def take_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def query(expr: str, legend: str = "", instant: bool = False, fmt: str = "time_series") -> prom_b.Dataquery:
    q = prom_b.Dataquery().expr(expr).legend_format(legend).datasource(DS).format(prom_m.PromQueryFormat(fmt))
    return q.instant() if instant else q.range()


QuerySpec = tuple | prom_b.Dataquery


def _queries(specs: typing.Iterable[QuerySpec]) -> list[cog_b.Builder[cog_variants.Dataquery]]:
    """Queries from (expr, legend) tuples or ready Dataquery builders, refIds A, B, C... in order."""
    out: list[cog_b.Builder[cog_variants.Dataquery]] = []
    for i, spec in enumerate(specs):
        q = query(*spec) if isinstance(spec, tuple) else spec
        out.append(q.ref_id(chr(ord("A") + i)))
    return out


def timeseries(layout: Layout, title: str, description: str, unit: str, specs: typing.Iterable[QuerySpec],
               w: int = 12, h: int = 8, stack: bool = False, min_zero: bool = True) -> timeseries_b.Panel:
    panel = (timeseries_b.Panel().id(layout.take_id()).title(title).description(description).unit(unit)
             .datasource(DS).grid_pos(layout.place(w, h)).targets(_queries(specs))
             .line_width(1).fill_opacity(10).show_points(common.VisibilityMode.NEVER).span_nulls(False)
             .stacking(common_b.StackingConfig().mode(common.StackingMode.NORMAL if stack else common.StackingMode.NONE))
             .legend(common_b.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
                     .placement(common.LegendPlacement.BOTTOM).show_legend(True))
             .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.NONE)))
    if min_zero:
        panel.min(0)
    return panel


def stat(layout: Layout, title: str, description: str, unit: str, expr: str, w: int = 4, h: int = 4,
         decimals: int | None = 1, legend: str = "") -> stat_b.Panel:
    panel = (stat_b.Panel().id(layout.take_id()).title(title).description(description).unit(unit).datasource(DS)
             .grid_pos(layout.place(w, h)).targets(_queries([query(expr, legend, instant=True)]))
             .color_scheme(dash_b.FieldColor().mode(dash_m.FieldColorModeId.THRESHOLDS))
             .thresholds(dash_b.ThresholdsConfig().mode(dash_m.ThresholdsMode.ABSOLUTE)
                         .steps([dash_m.Threshold(color="green", value=None)]))
             .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
             .color_mode(common.BigValueColorMode.VALUE).graph_mode(common.BigValueGraphMode.NONE)
             .text_mode(common.BigValueTextMode.VALUE_AND_NAME if legend else common.BigValueTextMode.VALUE)
             .justify_mode(common.BigValueJustifyMode.AUTO))
    if decimals is not None:
        panel.decimals(decimals)
    return panel


def table(layout: Layout, title: str, description: str, unit: str, expr: str, rename: dict, w: int = 24,
          h: int = 10) -> table_b.Panel:
    return (table_b.Panel().id(layout.take_id()).title(title).description(description).unit(unit).datasource(DS)
            .grid_pos(layout.place(w, h)).targets(_queries([query(expr, instant=True, fmt="table")]))
            .show_header(True).sort_by([common_b.TableSortByFieldState().display_name("latency").desc(True)])
            .with_transformation(dash_m.DataTransformerConfig(id_val="organize", options={
                "excludeByName": {"Time": True, "__name__": True, "run_id": True}, "renameByName": rename})))


class SqlDataquery(cog_variants.Dataquery):
    """A query of Grafana's SQL data sources (rawSql, code mode): the SDK's models of the Grafana 10.4 schema
    have none, so it is written here, in the shape Grafana saves it."""

    def __init__(self, raw_sql: str, fmt: str = "table") -> None:
        self.raw_sql = raw_sql
        self.format = fmt
        self.ref_id = "A"

    def to_json(self) -> dict[str, object]:
        return {"datasource": to_json(RESULTS_DS), "editorMode": "code", "format": self.format, "rawQuery": True,
                "rawSql": self.raw_sql, "refId": self.ref_id}


class SqlQuery(cog_b.Builder[cog_variants.Dataquery]):
    """Builder of a :class:`SqlDataquery` on the results database."""

    _internal: SqlDataquery

    def __init__(self, raw_sql: str, fmt: str = "table") -> None:
        self._internal = SqlDataquery(raw_sql, fmt)

    def build(self) -> SqlDataquery:
        return self._internal

    def ref_id(self, ref_id: str) -> typing.Self:
        self._internal.ref_id = ref_id
        return self


def sql_table(layout: Layout, title: str, description: str, unit: str, raw_sql: str, w: int = 24,
              h: int = 10) -> table_b.Panel:
    """A table of one SQL query on the results database, its columns as the query names them."""
    return (table_b.Panel().id(layout.take_id()).title(title).description(description).unit(unit)
            .datasource(RESULTS_DS).grid_pos(layout.place(w, h)).targets([SqlQuery(raw_sql)]).show_header(True))


def row(layout: Layout, title: str, repeat: str | None = None) -> dash_b.Row:
    """A row header; the panels placed after it, up to the next row, are its own (an open row).
    With ``repeat``, Grafana draws the row and its panels once per value of that variable."""
    layout.new_row()
    r = dash_b.Row(title).id(layout.take_id()).collapsed(False).grid_pos(layout.place(24, 1))
    if repeat:
        r.repeat(repeat)
    layout.new_row()
    return r


# -- annotations ------------------------------------------------------------------------

class PrometheusAnnotationQuery(dash_m.AnnotationQuery):
    """The schema's annotation query plus the options Grafana's Prometheus data source
    reads from it (step, titleFormat, textFormat, tagKeys, useValueForTime): the
    dashboard schema leaves data-source options out, so the SDK has no field for them."""

    def __init__(self, step: str = "1s", title_format: str = "", text_format: str = "", tag_keys: str = "",
                 use_value_for_time: bool = False, **kwargs: typing.Any) -> None:
        super().__init__(**kwargs)
        self.step = step
        self.title_format = title_format
        self.text_format = text_format
        self.tag_keys = tag_keys
        self.use_value_for_time = use_value_for_time

    def to_json(self) -> dict[str, object]:
        payload = super().to_json()
        payload.update({"step": self.step, "titleFormat": self.title_format, "textFormat": self.text_format,
                        "tagKeys": self.tag_keys, "useValueForTime": self.use_value_for_time})
        return payload


class PrometheusAnnotation(dash_b.AnnotationQuery):
    """Builder of a PromQL annotation: a region for every run of steps where ``expr`` has a value."""

    _internal: PrometheusAnnotationQuery

    def __init__(self, name: str, expr: str, color: str) -> None:
        self._internal = PrometheusAnnotationQuery()
        self.name(name).expr(expr).icon_color(color).datasource(DS).enable(True)

    def step(self, step: str) -> typing.Self:
        self._internal.step = step
        return self

    def title_format(self, text: str) -> typing.Self:
        self._internal.title_format = text
        return self

    def text_format(self, text: str) -> typing.Self:
        self._internal.text_format = text
        return self

    def tag_keys(self, keys: str) -> typing.Self:
        self._internal.tag_keys = keys
        return self


def builtin_annotation() -> dash_b.AnnotationQuery:
    """Grafana's own "Annotations & Alerts", which every dashboard has."""
    return (dash_b.AnnotationQuery().name("Annotations & Alerts").built_in(1).type("dashboard").enable(True).hide(True)
            .datasource(dash_m.DataSourceRef(type_val="grafana", uid="-- Grafana --")).icon_color("rgba(0, 211, 255, 1)"))
