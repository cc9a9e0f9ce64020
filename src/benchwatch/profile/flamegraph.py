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
    with ``right``, the diff of two sides: value and self the left's, valueRight and selfRight the right's.
    Children are ordered by both sides' samples, largest first, then by name."""
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
        # A diff frame's value and self are the left side's: Grafana's panel adds valueRight to value for a
        # node's width (grafana-flamegraph dataTransform.ts nestedSetToLevels, "left + right value").
        cols["value"].append(node.left)
        cols["self"].append(node.self_left)
        if diff:
            cols["valueRight"].append(node.right)
            cols["selfRight"].append(node.self_right)
        ordered = sorted(node.children.items(), key=lambda kv: (-(kv[1].left + kv[1].right), kv[0]))
        stack.extend((level + 1, name, child) for name, child in reversed(ordered))
    return cols


def folded_text(stacks: Counter) -> str:
    """The folded form flamegraph.pl, speedscope and d3-flame-graph read: ``frame;frame;frame count`` lines."""
    return "".join(f"{stack} {n}\n" for stack, n in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0])))


# -- a differential flame graph as SVG ---------------------------------------------------------
# Drawn here, not by d3-flame-graph: the snapshot is one offline HTML file, and d3-flame-graph needs d3
# beside it (both inlined into every snapshot, some 300 kB of script) to draw what a few hundred <rect>s
# say; an SVG also shows where script does not run (a mail, a Markdown viewer, a file browser's preview).

WIDTH = 1000
ROW = 16
MIN_PX = 0.5   # narrower frames are not drawn (their samples still count in their parents' widths)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _colour(delta: float) -> str:
    """Red where the share grew, blue where it fell, white where it stayed (full colour at 5 points)."""
    strength = min(1.0, abs(delta) / 0.05)
    fade = round(235 - 175 * strength)
    return f"rgb(255,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},255)" if delta < 0 else "rgb(235,235,235)"


def diff_svg(left: Mapping[str, int], right: Mapping[str, int], title: str, left_name: str = "before",
             right_name: str = "after", widths_from: str = "right") -> str:
    """A differential flame graph: frames as wide as their samples on one side (``widths_from``: "right"
    shows what grew, "left" what shrank), coloured by how their share of all samples changed from
    ``left`` to ``right`` (red grew, blue shrank); each frame's tooltip says both shares."""
    root = _tree(left, right)
    total_left, total_right = max(root.left, 1), max(root.right, 1)
    base = root.right if widths_from == "right" else root.left
    if base == 0:
        return ""
    rects: list[str] = []
    depth = 0
    todo: list[tuple[int, float, str, _Node]] = [(0, 0.0, "all", root)]
    while todo:
        level, x, name, node = todo.pop()
        width = (node.right if widths_from == "right" else node.left) / base * WIDTH
        if width < MIN_PX:
            continue
        depth = max(depth, level)
        share_left, share_right = node.left / total_left, node.right / total_right
        tip = (f"{name}: {100 * share_left:.1f} % of {left_name}'s samples → {100 * share_right:.1f} % of "
               f"{right_name}'s ({node.left} → {node.right} samples)")
        label = name if width > 7 * len(name) else (name[:int(width / 7) - 1] + "…" if width > 28 else "")
        rects.append(f'<g><title>{_esc(tip)}</title><rect x="{x:.1f}" y="{{y{level}}}" width="{width:.1f}" '
                     f'height="{ROW - 1}" fill="{_colour(share_right - share_left)}" stroke="white" stroke-width="0.5"/>'
                     + (f'<text x="{x + 3:.1f}" y="{{t{level}}}" font-size="11" font-family="monospace">{_esc(label)}</text>'
                        if label else "") + "</g>")
        offset = x
        for child_name, child in sorted(node.children.items()):
            todo.append((level + 1, offset, child_name, child))
            offset += (child.right if widths_from == "right" else child.left) / base * WIDTH
    height = (depth + 1) * ROW + 24
    body = "".join(rects)
    for level in range(depth + 1):  # root at the bottom, callees above their callers
        y = height - (level + 1) * ROW
        body = body.replace(f"{{y{level}}}", str(y)).replace(f"{{t{level}}}", str(y + ROW - 4))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="bw-flame" viewBox="0 0 {WIDTH} {height}" '
            f'width="100%" role="img" aria-label="{_esc(title)}"><text x="0" y="14" font-size="13" '
            f'font-family="sans-serif">{_esc(title)}</text>{body}</svg>')
