"""The command registry: every command registered is in ``benchwatch --help``, a name is registered once, and
the stack options come from one parent parser."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from benchwatch import cli
from benchwatch.commands import Command, Context, Registry, load_commands, stack_options

# benchwatch --help's list, in its order: a contract with users' muscle memory and the README.
LISTED = ["up", "down", "status", "run", "attach", "import", "exporter", "supervise", "explain", "demo", "psql",
          "targets", "agent", "env", "snapshot", "compare", "history", "annotate", "sweep", "report", "flush"]


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_registered_command_is_in_the_help():
    help_text = subprocess.run([sys.executable, "-m", "benchwatch", "--help"], capture_output=True, text=True,
                               check=True).stdout
    commands = load_commands()
    assert list(commands) == LISTED
    for name, c in commands.items():
        assert f"    {name} " in help_text, name
        assert " ".join(c.help.split()[:3]) in " ".join(help_text.split()), name
    assert list(_subparsers(cli.build_parser()).choices) == LISTED


def test_a_name_registers_once():
    registry = Registry()
    registry.command("x", help="one")(lambda ctx: 0)
    with pytest.raises(ValueError, match="'x' registered twice"):
        registry.command("x", help="another")(lambda ctx: 1)
    with pytest.raises(ValueError):
        registry.daemon("x", "a daemon", lambda argv: 0)
    assert list(registry.commands) == ["x"]
    # A module registering a name the registry already has fails at load, whoever registered it first.
    real = Registry()
    for c in load_commands().values():
        real.add(c)
    with pytest.raises(ValueError, match="'up' registered twice"):
        real.add(Command("up", "again", None))


def test_stack_options_come_from_one_parent():
    parent = {o for a in stack_options()._actions for o in a.option_strings}
    assert {"--state-dir", "--engine", "--pg-dsn", "--postgres-port", "--prometheus-port"} <= parent
    choices = _subparsers(cli.build_parser()).choices
    for name, c in load_commands().items():
        own = {o for a in choices[name]._actions for o in a.option_strings}
        if c.stack_options:
            assert parent <= own, name
        else:
            assert not (parent - {"--state-dir"}) & own, name  # the agent has its own --state-dir, the daemons their own flags


def test_a_handler_gets_a_context_with_the_stack(tmp_path):
    args = cli.build_parser().parse_args(["status", "--state-dir", str(tmp_path), "--prometheus-port", "29090"])
    ctx = Context(args)
    assert ctx.stack is ctx.stack  # loaded once
    assert ctx.stack.cfg.state_dir == str(tmp_path) and ctx.stack.cfg.ports["prometheus"] == 29090
    assert args.func.__name__ == "cmd_status"


def test_daemons_parse_their_own_arguments(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["supervise", "--help"])
    assert e.value.code == 0 and "--dir" in capsys.readouterr().out


def test_the_help_order_does_not_depend_on_which_module_was_imported_first():
    code = ("import benchwatch.commands.share, benchwatch.commands.agent; from benchwatch.commands import load_commands; "
            "print(' '.join(load_commands()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == LISTED


def test_help_names_every_tool_a_command_serves():
    from benchwatch import loadgens
    from benchwatch.cli import build_parser

    commands = load_commands()
    # run's and sweep's help name every registered tool, from the registry (the texts name none themselves).
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    run_help = next(a.help for a in sub._choices_actions if a.dest == "run")
    sweep = sub.choices["sweep"].format_help()
    for generator in loadgens.load_generators().values():
        assert generator.title in run_help and generator.title in sweep, generator.name
    assert "{tools}" not in run_help
    for name in ("attach", "import"):
        assert "pgbench" in commands[name].help and "sysbench" in commands[name].help, name
