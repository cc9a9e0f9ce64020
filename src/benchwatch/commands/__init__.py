"""The benchwatch subcommands: one registry, filled by the modules that hold them.

As the exporter's collectors register themselves (node_exporter's registry), each
module named in :data:`COMMAND_MODULES` registers its subcommands with
:func:`command`: name, help, a function adding its own arguments, and its
handler. ``benchwatch.cli`` builds the parser from :func:`load_commands` and
dispatches; it names no command. The stack options (``--state-dir``, the
``--*-port`` flags, ``--engine``, ...) are one parent parser
(:func:`stack_options`) that every command taking them inherits, and a handler
gets a :class:`Context` (its arguments, the stack they name, the output
streams) instead of building one from argparse's results.

A new subcommand is a function with ``@command(...)`` in one of these modules,
or a new module and its name in :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, TextIO

from benchwatch import engines
from benchwatch.record import host as record_host
from benchwatch.results.dsn import DsnError
from benchwatch.stack.config import DEFAULT_PORTS, ENGINES, LONG_TERM_KEYS, load_config

if TYPE_CHECKING:
    from benchwatch.stack.native import Stack


def say(message: str, stream: TextIO | None = None) -> None:
    """benchwatch's own messages go to stderr, prefixed, so the load generator's output stays as it is."""
    print(f"benchwatch: {message}", file=stream or sys.stderr, flush=True)


def add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help="where the stack keeps data, logs and runs (env BENCHWATCH_STATE_DIR)")
    p.add_argument("--engine", choices=ENGINES, help=f"the database the stack runs and watches (up and demo start "
                   f"{engines.default().aliases[0] if engines.default().aliases else engines.default().name}, the default, "
                   "unless told; other commands act on what up started; env BENCHWATCH_ENGINE)")
    # Each engine's own options (an existing server to watch, its instances); a flag two engines share
    # is one option whose help says what it is to each.
    shared: dict[str, list[engines.StackOption]] = {}
    for option in engines.stack_options():
        shared.setdefault(option.flag, []).append(option)
    for flag, options in shared.items():
        p.add_argument(flag, type=options[0].type, help="; ".join(o.help for o in options))
    for component, port in DEFAULT_PORTS.items():
        p.add_argument(f"--{component.replace('_', '-')}-port", type=int, dest=f"port_{component}",
                       help=f"port of {component} on 127.0.0.1 (default {port})")


def stack_options() -> argparse.ArgumentParser:
    """The parent parser of every command that acts on a stack: its options, each taking one value."""
    p = argparse.ArgumentParser(add_help=False)
    add_stack_options(p)
    return p


class Context:
    """What a command works with: its parsed arguments, the stack they name (loaded once, when first
    asked for), and the streams it writes to."""

    def __init__(self, args: argparse.Namespace, stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.args = args
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    def say(self, message: str) -> None:
        say(message, self.stderr)

    def load_stack(self, starting: bool = False) -> Stack:
        """The stack the stack options name (flag > BENCHWATCH_* > stack.json > default)."""
        from benchwatch.stack.native import Stack

        args = self.args
        ports = {c: port for c in DEFAULT_PORTS if (port := getattr(args, f"port_{c}", None))}
        given = {o.dest: getattr(args, o.dest, None) for o in engines.stack_options()}
        try:
            cfg = load_config(getattr(args, "state_dir", None), ports, getattr(args, "engine", None), starting=starting,
                              results_dsn=getattr(args, "results_dsn", None), host=getattr(args, "stack_host", None),
                              long_term={k: getattr(args, k, None) for k in LONG_TERM_KEYS}, **given)
        except DsnError as e:  # BENCHWATCH_RESULTS_DSN or --results-dsn with a password: refused, never repeated
            self.say(str(e))
            raise SystemExit(2) from None
        record_host.set_name(cfg.host)  # meta.json's hostname of the runs this command records
        if cfg.long_term_write_url and cfg.long_term_query_url:
            # Every reader of a run's series falls back to the store when this Prometheus lacks the run.
            from benchwatch.query import longterm

            try:
                headers = longterm.bearer_headers(cfg.long_term_bearer_token_file)
            except OSError as e:
                self.say(f"the long-term store's bearer token file: {e.strerror or e}; reading it without a token")
                headers = {}
            longterm.configure(cfg.url("prometheus"), longterm.Store(cfg.long_term_write_url, cfg.long_term_query_url,
                                                                     headers))
        return Stack(cfg, out=self.say)

    @cached_property
    def stack(self) -> Stack:
        return self.load_stack()

    def starting_stack(self) -> Stack | None:
        """The stack up and demo start: the engine asked for (--engine, BENCHWATCH_ENGINE), else the default
        one, whatever an earlier up started. A stack still running stays as it is: it is said which engine
        it runs, and asking for another is refused (None) with the reason said."""
        stack = self.load_stack(starting=True)
        running = stack.running_engine()
        if running is None:
            return stack
        if stack.cfg.engine_asked and running is not stack.engine:
            self.say(f"the stack in {stack.cfg.state_dir} runs {running.title}: stop it with benchwatch down before "
                     f"starting {stack.engine.title}")
            return None
        if running is not stack.engine:
            self.say(f"the stack in {stack.cfg.state_dir} is already running {running.title}, and stays so "
                     f"(benchwatch down, then up, starts {stack.engine.title})")
        return self.load_stack()  # as it was started, with what the flags change


Handler = Callable[[Context], int]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: Handler | None = field(compare=False)   # None: a daemon with ``main``
    # Adds the command's own arguments (after the stack options) to its parser.
    arguments: Callable[[argparse.ArgumentParser], None] | None = field(default=None, compare=False)
    stack_options: bool = True      # inherits the stack options' parent parser
    add_help: bool = True           # False: -h/--help is the wrapped program's or the daemon's
    # Everything after benchwatch's own stack options is the wrapped program's: see cli._passthrough.
    passthrough: bool = False
    # A daemon that parses its own argv (collector flags included): main(argv after the name) -> exit code.
    main: Callable[[list[str]], int] | None = field(default=None, compare=False)


class Registry:
    """name -> Command, in the order registered (:func:`load_commands` orders them for ``benchwatch --help``)."""

    def __init__(self) -> None:
        self.commands: dict[str, Command] = {}

    def add(self, c: Command) -> Command:
        if c.name in self.commands:
            raise ValueError(f"command {c.name!r} registered twice")
        self.commands[c.name] = c
        return c

    def command(self, name: str, help: str, *, arguments: Callable[[argparse.ArgumentParser], None] | None = None,
                stack_options: bool = True, add_help: bool = True, passthrough: bool = False) -> Callable[[Handler], Handler]:
        """Decorator for a handler: ``@command("name", help="what it does", arguments=add_its_arguments)``."""
        def add(handler: Handler) -> Handler:
            self.add(Command(name, help, handler, arguments, stack_options, add_help, passthrough))
            return handler
        return add

    def daemon(self, name: str, help: str, main: Callable[[list[str]], int]) -> None:
        """A command listed in the help whose arguments its own ``main`` parses."""
        self.add(Command(name, help, None, stack_options=False, add_help=False, main=main))


REGISTRY = Registry()
command = REGISTRY.command

# The modules that register commands, in the order of ``benchwatch --help``.
COMMAND_MODULES = ("lifecycle", "record", "daemons", "explain", "demo", "targets", "agent", "share", "history",
                   "experiment", "flush")


def _module_of(c: Command) -> str:
    return getattr(c.handler or c.main, "__module__", "").rpartition(".")[2]


def _add_engine_commands() -> dict[str, str | None]:
    """Each engine's commands in the registry (once), as its own modules' are: name -> the command it
    follows in --help."""
    after = {}
    for engine in engines.load_engines().values():
        for c in engine.commands():
            after[c.name] = c.after
            if c.name not in REGISTRY.commands:
                REGISTRY.add(Command(c.name, c.help, c.handler, c.arguments, add_help=c.add_help,
                                     passthrough=c.passthrough))
    return after


def load_commands() -> dict[str, Command]:
    """Every command, in the order of :data:`COMMAND_MODULES` (then as each module registers them), whichever
    module happened to be imported first; an engine's (Engine.commands) after the command it names."""
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    after = _add_engine_commands()
    rank = {m: float(i) for i, m in enumerate(COMMAND_MODULES)}
    own = {c.name: rank.get(_module_of(c), len(rank)) for c in REGISTRY.commands.values() if c.name not in after}

    def place(c: Command) -> float:
        if c.name not in after:
            return own[c.name]
        follows = after[c.name]
        return own[follows] + 0.5 if follows in own else len(rank) + 1.0

    ordered = sorted(REGISTRY.commands.values(), key=place)  # stable
    return {c.name: c for c in ordered}
