"""The benchwatch command: the parser built from the command registry (``benchwatch.commands``), and dispatch."""

from __future__ import annotations

import argparse
import signal
import sys

# The commands are imported when main runs, not with this module: a Ctrl-C while they load (a second or
# so on a busy machine) is then benchwatch's exit, not a traceback.


def build_parser() -> argparse.ArgumentParser:
    from benchwatch import loadgens
    from benchwatch.commands import load_commands, stack_options

    # Help texts name no tool: "{tools}" is every registered one, as people write it.
    tools = loadgens.titles()
    parser = argparse.ArgumentParser(prog="benchwatch", description="Live observability for database benchmark runs "
                                     f"({', '.join(tools)}).")
    sub = parser.add_subparsers(dest="command", required=True)
    parents = [stack_options()]
    for c in load_commands().values():
        p = sub.add_parser(c.name, help=c.help.replace("{tools}", "|".join(tools)), add_help=c.add_help,
                           parents=parents if c.stack_options else [])
        if c.arguments:
            c.arguments(p)
        if c.handler:
            p.set_defaults(func=c.handler)
    return parser


def _passthrough(argv: list[str], command: str) -> list[str]:
    """For `command`, benchwatch's stack options come first; everything after them is the program's.

    argparse cannot leave options it does not know (psql's -c, -At) to a REMAINDER
    positional, so a "--" is put where benchwatch's options end."""
    if not argv or argv[0] != command:
        return argv
    from benchwatch.commands import stack_options

    takes_value = {o for a in stack_options()._actions for o in a.option_strings}  # each takes one value
    i = 1
    while i < len(argv):
        if argv[i] in takes_value:
            i += 2
        elif "=" in argv[i] and argv[i].split("=", 1)[0] in takes_value:
            i += 1
        else:
            break
    if i < len(argv) and argv[i] == "--":
        return argv
    return argv[:i] + ["--"] + argv[i:]


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        # Ctrl-C where nothing was left to undo (a run notes it while it has something to undo: its tool,
        # go-tpc's user): the shell's exit code for SIGINT, and one line instead of a traceback.
        print("benchwatch: interrupted (Ctrl-C)", file=sys.stderr)
        return 128 + signal.SIGINT


def _main(argv: list[str]) -> int:
    from benchwatch.commands import Context, load_commands
    from benchwatch.engines import UnknownEngine

    commands = load_commands()
    daemon = commands.get(argv[0]) if argv else None
    if daemon is not None and daemon.main is not None:
        return daemon.main(argv[1:])
    parser = build_parser()
    for c in commands.values():
        if c.passthrough:
            argv = _passthrough(argv, c.name)
    args = parser.parse_args(argv)
    try:
        return args.func(Context(args))
    except UnknownEngine as e:  # --engine is checked by argparse; BENCHWATCH_ENGINE and stack.json are not
        print(f"benchwatch: {e} (from BENCHWATCH_ENGINE or the state directory's stack.json)", file=sys.stderr)
        return 2
