"""What a stack needs installed, from the plug-ins' own declarations: which Debian packages and Go modules
scripts/install-deps installs for a stack on one engine, driven by some tools.

``benchwatch demo`` hands scripts/install-deps the exact list of the demo it runs (the pgbench demo needs
neither MariaDB nor sysbench nor go-tpc). The script, given no list, asks this module for one
(``python -m benchwatch.stack.packages [--engine E] [--tool T]... [--feature F]...``, one item a line), so that
the list is the plug-ins' and not a copy kept in the script. This module imports only the registries:
the script may run it with a bare python3 before the venv exists (scripts/test installs first).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from benchwatch import engines, loadgens
from benchwatch.engines import Engine
from benchwatch.loadgens import LoadGenerator

# The stack's own components (every engine's stack runs them) -> their Debian package. Grafana is not in
# Debian: the stack starts it only when one is on the PATH.
STACK_PACKAGES = {"prometheus": "prometheus", "alertmanager": "prometheus-alertmanager",
                  "node_exporter": "prometheus-node-exporter"}
# How a Go module is written in scripts/install-deps' arguments: go:module/path/cmd/program@version.
GO_PREFIX = "go:"


class SelectionError(ValueError):
    """A selection that names something no plug-in has: the message says what there is."""


@dataclass(frozen=True)
class Needs:
    """What to install: Debian packages (each once, in the order first named) and Go modules."""

    debian: tuple[str, ...]
    go_modules: tuple[str, ...] = ()

    def install_args(self) -> list[str]:
        """scripts/install-deps' arguments for exactly these."""
        return [*self.debian, *(GO_PREFIX + m for m in self.go_modules)]


def _once(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def tool(name: str) -> LoadGenerator:
    """A load generator by its name (``gotpc``) or a program name of it (``go-tpc``)."""
    found = loadgens.load_generators()
    if name in found:
        return found[name]
    for generator in found.values():
        if name in generator.programs:
            return generator
    raise SelectionError(f"unknown tool {name!r}: use one of {', '.join(tool_choices())}")


def tool_choices() -> list[str]:
    return sorted({n for g in loadgens.load_generators().values() for n in (g.name, *g.programs)})


def engine(name: str) -> Engine:
    try:
        return engines.get(name)
    except engines.UnknownEngine as e:
        raise SelectionError(str(e)) from None


def needs(engine: Engine, tools: Sequence[LoadGenerator], features: Iterable[str] = ()) -> Needs:
    """A stack on ``engine`` (its server and exporter beside the stack's own components), ``tools`` to drive
    it, and the engine's ``features`` (e.g. "shards")."""
    debian = [*STACK_PACKAGES.values(), *engine.packages.values()]
    for feature in features:
        if feature not in engine.feature_packages:
            have = ", ".join(sorted(engine.feature_packages)) or "none"
            raise SelectionError(f"{engine.title} has no feature {feature!r} (its features: {have})")
        debian += engine.feature_packages[feature]
    for t in tools:
        if engine.name not in t.engines:
            raise SelectionError(f"{t.title} does not drive {engine.title} (it drives: "
                                 f"{', '.join(engines.get(e).title for e in t.engines)})")
        debian += t.packages
    return Needs(_once(debian), _once(m for t in tools for m in t.go_modules))


def for_demo(engine: Engine, features: Iterable[str] = ()) -> Needs:
    """What ``benchwatch demo`` on ``engine`` uses: the stack, the engine, the tool its demo runs."""
    return needs(engine, [tool(engine.demo_tool)], features)


def select(engine_name: str | None = None, tool_names: Sequence[str] = (), features: Sequence[str] = ()) -> Needs:
    """What a selection as scripts/install-deps takes it needs: the engine named (else the first tool's first
    engine, else the default engine), the tools named (else the one the engine's demo runs), the features."""
    tools = [tool(n) for n in tool_names]
    chosen = engine(engine_name) if engine_name else engines.get(tools[0].engines[0]) if tools else engines.default()
    return needs(chosen, tools or [tool(chosen.demo_tool)], features)


def everything() -> Needs:
    """What every engine, every tool and every feature needs: scripts/install-deps with no arguments."""
    # The default engine first: its packages lead the list, as they did when the script held it.
    ordered = sorted(engines.load_engines().values(), key=lambda e: not e.default)
    parts = [needs(e, [t for t in loadgens.load_generators().values() if e.name in t.engines], e.feature_packages)
             for e in ordered]
    return Needs(_once(p for n in parts for p in n.debian), _once(m for n in parts for m in n.go_modules))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchwatch.stack.packages",
                                     description="What scripts/install-deps installs for a selection, one item a "
                                                 "line (go:MODULE@VERSION for a Go module). No selection: everything.")
    parser.add_argument("--engine", help=f"one of {', '.join(engines.choices())}")
    parser.add_argument("--tool", action="append", default=[], help=f"one of {', '.join(tool_choices())} (repeatable)")
    parser.add_argument("--feature", action="append", default=[], help="an engine's feature, e.g. shards (repeatable)")
    args = parser.parse_args(argv)
    try:
        chosen = (select(args.engine, args.tool, args.feature) if args.engine or args.tool or args.feature
                  else everything())
    except SelectionError as e:
        print(f"benchwatch: {e}", file=sys.stderr)
        return 2
    for item in chosen.install_args():
        print(item)
    return 0


if __name__ == "__main__":
    sys.exit(main())
