#!/usr/bin/env python3
"""Writes the Grafana dashboards in this folder from benchwatch.dashboards.run; the JSON is committed.

    .venv/bin/python dashboards/generate.py          # rewrite dashboards/*.json
    .venv/bin/python dashboards/generate.py --check  # exit 1 if a committed file differs (CI)
"""

from __future__ import annotations

import os
import sys

from benchwatch.dashboards.run import render_all

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str]) -> int:
    rendered = render_all()
    if "--check" in argv:
        stale = []
        for name, text in rendered.items():
            path = os.path.join(HERE, name)
            if not os.path.exists(path) or open(path, encoding="utf-8").read() != text:
                stale.append(name)
        if stale:
            print("dashboards out of date, run dashboards/generate.py: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for name, text in rendered.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
