"""Markdown for a pull request's comment (``report --comment``, ``history --comment``): tables whose cells
cannot break the table, and the figures as the comment prints them."""

from __future__ import annotations

from collections.abc import Sequence


def cell(value: object) -> str:
    """One table cell: a pipe or a line break in a value (a setting, an argv) would end the cell or the row."""
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A GitHub-flavoured table as lines; no lines at all when there is no row."""
    if not rows:
        return []
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def code(text: str) -> str:
    """Inline code: a backtick inside the text gets a longer fence, as CommonMark allows."""
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def ratio(value: float | None, interval: Sequence[float] | None) -> str:
    """"0.412 (95 % interval 0.395 – 0.430)"."""
    if value is None:
        return "-"
    return f"{value:.3f}" + (f" (95 % interval {interval[0]:.3f} – {interval[1]:.3f})" if interval else " (no interval)")


def percent(value: float | None, interval: Sequence[float] | None = None) -> str:
    """A ratio as a change in percent: 0.412 -> "−58.8 %", with its interval likewise."""
    if value is None:
        return "-"
    text = f"{(value - 1) * 100:+.1f} %"
    if interval:
        text += f" (95 % interval {(interval[0] - 1) * 100:+.1f} … {(interval[1] - 1) * 100:+.1f} %)"
    return text.replace("-", "−")
