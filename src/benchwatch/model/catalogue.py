"""Metric catalogues (name -> (type, help)), one per producer, and the /metrics families built from them.

Each catalogue also renders docs/metrics.md (benchwatch.exporter.metrics_doc),
so what /metrics says of a metric and what the doc says are the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

Catalogue = Mapping[str, tuple[str, str]]


def family(catalogue: Catalogue, name: str, labels: Sequence[str] = ()) -> CounterMetricFamily | GaugeMetricFamily:
    """An empty family of a catalogued metric (a counter is named without _total, as client_python wants)."""
    kind, help_text = catalogue[name]
    if kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)
