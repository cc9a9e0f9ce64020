"""``benchwatch demo``: README command 1. Each engine's demo is in its folder (``Engine.demo``), with its
own options (``Engine.demo_arguments``); this command starts what it is asked for and hands the demo a
:class:`benchwatch.demokit.DemoContext`."""

from __future__ import annotations

import argparse

from benchwatch import engines
from benchwatch.commands import Context, command


def _engines_default_first() -> list[engines.Engine]:
    return sorted(engines.load_engines().values(), key=lambda e: not e.default)


def _arguments(p: argparse.ArgumentParser) -> None:
    durations = [e.demo_duration_help for e in _engines_default_first() if e.demo_duration_help]
    p.add_argument("--duration", type=int, help=", ".join(durations))
    for engine in engines.load_engines().values():
        engine.demo_arguments(p)


def _help() -> str:
    return "; ".join(e.demo_help for e in _engines_default_first() if e.demo_help)


@command("demo", help=_help(), arguments=_arguments)
def cmd_demo(ctx: Context) -> int:
    import subprocess

    from benchwatch import resources
    from benchwatch.demokit import DemoContext
    from benchwatch.stability.runs import stability_profiler
    from benchwatch.stack import agent, packages
    from benchwatch.stack.native import StackError
    from benchwatch.stack.shards import SHARDS_FILE, shards_dir, stop_shards

    stack = ctx.starting_stack()
    if stack is None:
        return 1
    for other in engines.load_engines().values():  # another engine's demo options: not for this demo
        given = other.demo_arguments_given(ctx.args) if other is not stack.engine else None
        if given:
            ctx.say(f"{given} are for the {other.title} demo")
            return 2

    def up() -> str | None:
        try:
            stack.up()
        except StackError as e:
            return str(e)
        return None

    state_dir = stack.cfg.state_dir
    demo = DemoContext(stack=stack, args=ctx.args, say=ctx.say,
                       install=lambda features: subprocess.run([resources.path("scripts", "install-deps"),
                                                                *packages.for_demo(stack.engine, features).install_args()]).returncode,
                       up=up,
                       instances_dir=shards_dir(state_dir), instances_file=SHARDS_FILE,
                       stop_instances=lambda: stop_shards(state_dir), start_agent=agent.start_agent,
                       stability=stability_profiler)
    return stack.engine.demo(demo)
