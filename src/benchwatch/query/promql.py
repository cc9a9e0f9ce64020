"""Just enough PromQL reading to know which raw series a dashboard query reads.

A snapshot stores the raw samples behind every panel (so it can be rebuilt
when Prometheus has forgotten the run); these helpers find the vector
selectors (``name{matchers}``) in an expression without evaluating it.
"""

from __future__ import annotations

import re

# Words that are followed by "(" but introduce label lists, not sub-expressions.
_LABEL_LIST_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Binary operators and modifiers spelled as words.
_WORD_OPERATORS = {"and", "or", "unless", "bool", "offset", "atan2", "start", "end"}
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def _skip_string(expr: str, i: int) -> int:
    quote = expr[i]
    i += 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" else 1
    return i + 1


def _matching(expr: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket that closes the one at i (strings skipped)."""
    depth = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
            continue
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(expr)


def selectors(expr: str) -> list[str]:
    """Vector selectors in the expression, in order of appearance, each once: ``name{a="b"}``."""
    out: list[str] = []
    i = 0
    n = len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            i = _skip_string(expr, i)
            continue
        if c == "[":  # range or subquery duration
            i = _matching(expr, i, "[", "]")
            continue
        if c == "{":  # a selector without a name: {__name__=~"..."}
            end = _matching(expr, i, "{", "}")
            _add(out, expr[i:end])
            i = end
            continue
        if c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = re.compile(r"[0-9.]+(?:[eE][-+]?[0-9]+)?[0-9A-Za-z.]*").match(expr, i)  # 5m, 1h30m, 0x1f
            assert m is not None  # expr[i] is a digit or ".<digit>": the pattern matches
            i = m.end()
            continue
        m = _IDENT.match(expr, i)
        if not m:
            i += 1
            continue
        word = m.group(0)
        j = m.end()
        while j < n and expr[j].isspace():
            j += 1
        nxt = expr[j] if j < n else ""
        if word in _LABEL_LIST_KEYWORDS and nxt == "(":
            i = _matching(expr, j, "(", ")")
            continue
        if re.match(r"(by|without)\s*\(", expr[j:]):
            i = j  # an aggregation with its grouping before the arguments: sum by (le) (...)
            continue
        if nxt == "(" or word in _WORD_OPERATORS or word.lower() in ("inf", "nan"):
            i = m.end()  # a function or aggregation: its arguments are read next
            continue
        if nxt == "{":
            end = _matching(expr, j, "{", "}")
            _add(out, word + expr[j:end])
            i = end
            continue
        _add(out, word)
        i = m.end()
    return out


def _add(out: list[str], selector: str) -> None:
    selector = re.sub(r"\s+(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", "", selector)  # spaces outside strings
    if selector not in out:
        out.append(selector)


# A selector, with a metric name or without one ({__name__=~"new|old", ...}: a run series under
# either of its names, benchwatch.model.names).
_SEL = r"(?:[A-Za-z_:][A-Za-z0-9_:]*(?:\{[^}]*\})?|\{[^}]*\})"
_STATE_FORMS = [
    re.compile(rf"^\s*(?P<sel>{_SEL})\s*(?:==\s*1)?\s*$"),
    re.compile(rf"^\s*max_over_time\(\s*(?P<sel>{_SEL})\s*\[[^\]]+\]\s*\)\s*(?:==\s*1)?\s*$"),
]


def boolean_selector(expr: str) -> str | None:
    """For a 0/1 state drawn as regions (``s == 1``, ``max_over_time(s[1s]) == 1``, ``max_over_time(s[1s])``,
    or the bare selector), the selector ``s``; else None."""
    for form in _STATE_FORMS:
        m = form.match(expr)
        if m:
            return m.group("sel")
    return None


def metric_name(selector: str) -> str | None:
    m = _IDENT.match(selector)
    if m:
        return m.group(0)
    m = re.search(r'__name__\s*=\s*"([^"]+)"', selector)
    return m.group(1) if m else None


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_matchers(selector: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """(metric name, [(label, op, value)]) of a selector like ``name{a=~"x.*"}``."""
    name = None
    m = _IDENT.match(selector)
    rest = selector
    if m:
        name = m.group(0)
        rest = selector[m.end():]
    matchers: list[tuple[str, str, str]] = []
    body = rest.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
        for mm in _MATCHER.finditer(body):
            value = re.sub(r"\\(.)", r"\1", mm.group(3))
            if mm.group(1) == "__name__" and mm.group(2) == "=":
                name = value
                continue
            matchers.append((mm.group(1), mm.group(2), value))
    return name, matchers


def matches(labels: dict[str, str], matchers: list[tuple[str, str, str]]) -> bool:
    """Prometheus matcher semantics: an absent label is the empty string; regexes are anchored."""
    for label, op, value in matchers:
        have = labels.get(label, "")
        if op == "=" and have != value:
            return False
        if op == "!=" and have == value:
            return False
        if op == "=~" and not re.fullmatch(value, have):
            return False
        if op == "!~" and re.fullmatch(value, have):
            return False
    return True
