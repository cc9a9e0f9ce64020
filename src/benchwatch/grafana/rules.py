"""Recording rules as query-time expressions, for the dashboards.

The iostat and PostgreSQL recording rules (prometheus/rules/node.yml,
postgres.yml) are evaluated every 15 s, not every second: that keeps
Prometheus within its share of the machine. The dashboards want them at
1 s resolution, so they query each rule's own expression, read from the rule
file (one source: a rule changed there changes the dashboards when they are
regenerated), with the panel's label filters added to every series selector
in it. At each step that is exactly what the rule would have recorded.
"""

from __future__ import annotations

import functools
import glob
import os
import re

import yaml

from benchwatch import resources

# A series selector that a range is taken over: name, optional {matchers}, then "[".
_RANGE_SELECTOR = re.compile(r"(?<![\w:])([a-zA-Z_][\w:]*)(?:\{([^}]*)\})?(?=\[)")


@functools.cache
def recorded() -> dict[str, str]:
    """Every recording rule in prometheus/rules/*.yml: name -> expression."""
    out: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(resources.path("prometheus", "rules"), "*.yml"))):
        with open(path, encoding="utf-8") as f:
            for group in (yaml.safe_load(f) or {}).get("groups", []):
                for rule in group.get("rules", []):
                    if "record" in rule:
                        out[rule["record"]] = " ".join(rule["expr"].split())
    return out


def expr(record: str, matchers: str) -> str:
    """The expression of recording rule ``record``, with ``matchers`` (e.g. 'target=~"$target"')
    added to each series selector in it, in parentheses."""
    rule = recorded()[record]
    if not _RANGE_SELECTOR.search(rule):
        raise ValueError(f"{record}: no range selector to filter in {rule!r}")

    def add(m: re.Match) -> str:
        own = m.group(2)
        return f"{m.group(1)}{{{own + ', ' if own else ''}{matchers}}}"

    return f"({_RANGE_SELECTOR.sub(add, rule)})"
