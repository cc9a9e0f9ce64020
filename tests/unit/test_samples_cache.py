"""sample() remembers normalised label sets (a long import builds hundreds of thousands of samples from a few):
the remembered form is the one it would compute."""

from __future__ import annotations

from benchwatch.model.samples import sample


def test_remembered_labels_are_the_computed_ones():
    a = sample("m", {"run_id": "r", "tool": "t", "empty": ""}, 1, 5)
    b = sample("m", {"run_id": "r", "tool": "t", "empty": ""}, 2, 6)
    assert a.labels == b.labels == (("run_id", "r"), ("tool", "t"))


def test_values_equal_in_python_are_not_taken_for_each_other():
    assert sample("m", {"a": "1"}, 1, 1).labels == (("a", "1"),)
    assert sample("m", {"a": True}, 1, 1).labels == (("a", "True"),)
    assert sample("m", {"a": 1}, 1, 1).labels == (("a", "1"),)
    assert sample("m", {"a": 1.0}, 1, 1).labels == (("a", "1.0"),)
    assert sample("m", {"a": ["x"]}, 1, 1).labels == (("a", "['x']"),)  # unhashable: normalised, not remembered
