import os

from benchwatch.exporter import metrics_doc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_metrics_doc_is_generated_from_the_catalogue():
    with open(os.path.join(ROOT, "docs", "metrics.md"), encoding="utf-8") as f:
        assert f.read() == metrics_doc.render(), "regenerate: python -m benchwatch.exporter.metrics_doc > docs/metrics.md"
