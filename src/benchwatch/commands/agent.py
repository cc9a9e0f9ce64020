"""``benchwatch agent up|down|status``: on a database host, ship its series to the central stack."""

from __future__ import annotations

import argparse
import json
import os
from typing import TextIO

from benchwatch import engines
from benchwatch.commands import Context, command
from benchwatch.stack.config import DEFAULT_PORTS
from benchwatch.stack.native import StackError


def _agent(ctx: Context):
    from benchwatch.stack.agent import Agent, default_agent_state_dir, load_agent_config

    state_dir = os.path.abspath(ctx.args.state_dir or default_agent_state_dir())
    cfg = load_agent_config(state_dir)
    if cfg is None:
        ctx.say(f"no agent in {state_dir}: start one with benchwatch agent up --central URL --name NAME")
        return None
    return Agent(cfg, out=ctx.say)


def _print_agent_status(status: dict, out: TextIO) -> None:
    print(f"agent       {status['name']} on {status['host']} -> {status['central']}", file=out)
    print(f"state dir   {status['state_dir']}", file=out)
    for t in status["targets"]:
        print(f"target      {t['target']:<16} {t['server']:<24} log {t['server_log'] or '-'}", file=out)
    for name, c in status["components"].items():
        state = "healthy" if c["healthy"] else ("running, not healthy" if c["pid"] else "not running")
        print(f"{name:<28} 127.0.0.1:{c['port'] or '-':<6} pid {c['pid'] or '-':<8} {state}", file=out)
    rw = status.get("remote_write")
    if rw and rw.get("lag_s") is not None:
        print(f"remote write  {rw['lag_s']:.1f} s behind, {rw['samples_pending'] or 0:.0f} samples pending", file=out)


def _show(ctx: Context, status: dict) -> None:
    if ctx.args.json:
        print(json.dumps(status, indent=2), file=ctx.stdout)
    else:
        _print_agent_status(status, ctx.stdout)


def _agent_option_dests() -> list[str]:
    """The dests of the engines' options of agent up, each an argument of start_agent by that name."""
    probe = argparse.ArgumentParser(add_help=False)
    for engine in engines.load_engines().values():
        engine.agent_options(probe)
    return [a.dest for a in probe._actions]


def _arguments(p: argparse.ArgumentParser) -> None:
    asub = p.add_subparsers(dest="agent_command", required=True)
    up = asub.add_parser("up", help="start the agent (idempotent)")
    up.add_argument("--central", required=True, help=f"the central Prometheus, e.g. http://BENCH_HOST:{DEFAULT_PORTS['prometheus']}")
    up.add_argument("--name", required=True, help="this agent's name: the target label (with one instance)")
    up.add_argument("--host", help="the host label (default: this machine's host name)")
    for engine in engines.load_engines().values():  # the servers to watch (--postgres DSN)
        engine.agent_options(up)
    up.add_argument("--server-log", action="append", default=[], metavar="PATH",
                    help="its server log, for checkpoints (log_checkpoints=on): one per --postgres, in order, '-' for none")
    up.add_argument("--target", action="append", default=[], metavar="NAME",
                    help="the target name of each --postgres, in order (default: --name, or NAME-PORT for several)")
    up.add_argument("--basic-auth-user", help="basic auth user for the central endpoint")
    up.add_argument("--password-file", help="file (0600) holding the basic auth password")
    up.add_argument("--bearer-token-file", help="file (0600) holding a bearer token for the central endpoint")
    for q in (up, asub.add_parser("down", help="stop the agent (its WAL is kept)"),
              asub.add_parser("status", help="the agent's components and how far behind the central side is")):
        q.add_argument("--state-dir", help="the agent's state dir (env BENCHWATCH_AGENT_STATE_DIR; "
                                           "default /var/lib/benchwatch-agent as root)")
        if q is not asub.choices.get("down"):
            q.add_argument("--json", action="store_true", help="one JSON object for scripts")


# The agent is not the stack: its own --state-dir, no stack options.
@command("agent", help="on a database host: watch its PostgreSQL instances and push to the central stack",
         arguments=_arguments, stack_options=False)
def cmd_agent(ctx: Context) -> int:
    from benchwatch.stack import agent

    args = ctx.args
    if args.agent_command == "up":
        auth = agent.CentralAuth(args.basic_auth_user, args.password_file, args.bearer_token_file)
        servers = {name: getattr(args, name) for name in _agent_option_dests()}
        try:
            a = agent.start_agent(args.state_dir or agent.default_agent_state_dir(), name=args.name,
                                  central_url=args.central, server_logs=args.server_log,
                                  targets=args.target, host=args.host, auth=auth, out=ctx.say, **servers)
        except StackError as e:
            ctx.say(str(e))
            return 1
        _show(ctx, a.status())
        return 0
    a = _agent(ctx)
    if a is None:
        return 1
    if args.agent_command == "down":
        stopped = a.down()
        ctx.say("stopped " + (", ".join(stopped) if stopped else "nothing (no component was running)"))
        return 0
    status = a.status()
    _show(ctx, status)
    return 0 if all(c["healthy"] for c in status["components"].values()) else 1
