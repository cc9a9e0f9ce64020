"""Folded stacks in the shape Grafana's flame graph panel reads: one row per node of the call tree,
depth first (a node's children right after it), fields ``level`` (depth, the root 0), ``value`` (samples
of the node and everything below it), ``self`` (samples of the node itself) and ``label`` (the function).

Two sides (a diff: the rest of a run and a dip, a baseline and a variant) add ``valueRight`` and
``selfRight``, the right side's, with ``value`` and ``self`` the sum of both sides, as Grafana's diff
flame graph takes them; the panel colours a node by how its share differs between the sides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

ROOT = "total"


class _Node:
    __slots__ = ("children", "left", "right", "self_left", "self_right")

    def __init__(self) -> None:
        self.children: dict[str, _Node] = {}
        self.left = self.right = self.self_left = self.self_right = 0


def _tree(left: Mapping[str, int], right: Mapping[str, int] | None) -> _Node:
    root = _Node()
    for side, stacks in (("left", left), ("right", right or {})):
        for stack, n in stacks.items():
            node = root
            setattr(node, side, getattr(node, side) + n)
            for frame in stack.split(";"):
                node = node.children.setdefault(frame, _Node())
                setattr(node, side, getattr(node, side) + n)
            if side == "left":
                node.self_left += n
            else:
                node.self_right += n
    return root


def grafana_frame(left: Mapping[str, int], right: Mapping[str, int] | None = None) -> dict[str, list]:
    """Columns of the panel's data frame (field name -> values) for folded stacks (stack -> samples);
    with ``right``, the diff of two sides. Children are ordered by value, largest first, then by name."""
    root = _tree(left, right)
    diff = right is not None
    cols: dict[str, list] = {"level": [], "value": [], "self": [], "label": []}
    if diff:
        cols["valueRight"], cols["selfRight"] = [], []
    stack: list[tuple[int, str, _Node]] = [(0, ROOT, root)]
    while stack:
        level, label, node = stack.pop()
        cols["level"].append(level)
        cols["label"].append(label)
        cols["value"].append(node.left + node.right)
        cols["self"].append(node.self_left + node.self_right)
        if diff:
            cols["valueRight"].append(node.right)
            cols["selfRight"].append(node.self_right)
        ordered = sorted(node.children.items(), key=lambda kv: (-(kv[1].left + kv[1].right), kv[0]))
        stack.extend((level + 1, name, child) for name, child in reversed(ordered))
    return cols


def folded_text(stacks: Counter) -> str:
    """The folded form flamegraph.pl, speedscope and d3-flame-graph read: ``frame;frame;frame count`` lines."""
    return "".join(f"{stack} {n}\n" for stack, n in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0])))
