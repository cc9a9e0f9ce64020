"""``benchwatch up``, ``down`` and ``status``: the native stack's life."""

from __future__ import annotations

import argparse
import json
import time
from typing import TextIO

from benchwatch import engines
from benchwatch.commands import Context, command
from benchwatch.stack.config import check_host_reader, check_long_term
from benchwatch.stack.native import StackError


def _up_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument("--results-dsn", metavar="DSN",
                   help="the results database every finished run is written to (PostgreSQL; docs/results.md), without "
                   "a password: libpq reads it from a 0600 pgpass file (PGPASSFILE); 'off' for none, 'own' for the stack's own again; kept in stack.json; "
                   "default: a small PostgreSQL the stack runs for itself (env BENCHWATCH_RESULTS_DSN)")
    p.add_argument("--host", dest="stack_host", metavar="NAME",
                   help="this host's name on its runs, series and records (default: the machine's name; env "
                   "BENCHWATCH_HOST; kept in stack.json): one stable name for every CI runner of a job")
    # The long-term series store (docs/long-term.md), kept in stack.json for the commands after up.
    p.add_argument("--long-term-write-url", metavar="URL", help="remote-write every series to this long-term store "
                   "too (VictoriaMetrics, Mimir, Thanos Receive; env BENCHWATCH_LONG_TERM_WRITE_URL)")
    p.add_argument("--long-term-query-url", metavar="URL", help="the long-term store's Prometheus query API, read when "
                   "the stack's Prometheus lacks a run (env BENCHWATCH_LONG_TERM_QUERY_URL)")
    p.add_argument("--long-term-bearer-token-file", metavar="FILE", help="file (0600) holding the long-term store's "
                   "bearer token (env BENCHWATCH_LONG_TERM_BEARER_TOKEN_FILE)")


@command("up", help="start the native stack (idempotent)", arguments=_up_arguments)
def cmd_up(ctx: Context) -> int:
    stack = ctx.starting_stack()
    if stack is None:
        return 1
    wrong = check_long_term(stack.cfg) or check_host_reader(stack.cfg)
    if wrong:
        ctx.say(wrong)
        return 2
    try:
        status = stack.up()
    except StackError as e:
        ctx.say(str(e))
        return 1
    if ctx.args.json:
        print(json.dumps(status, indent=2), file=ctx.stdout)
    else:
        print_status(status, ctx.stdout)
    return 0


def print_status(status: dict, out: TextIO) -> None:
    print(f"state dir   {status['state_dir']}", file=out)
    for line in engines.get(status["engine"]).status_lines(status):  # where its server is
        print(line, file=out)
    for name, c in status["components"].items():
        state = "healthy" if c["healthy"] else ("running, not healthy" if c["pid"] else "not running")
        restarts = f"  restarted {c['restarts']}x" if c.get("restarts") else ""
        print(f"{name:<20} {c['url']:<26} pid {c['pid'] or '-':<8} {state}{restarts}", file=out)
    if not status["grafana"]["installed"]:
        print(f"grafana     {status['grafana']['hint']}", file=out)
    print(f"runs        {status['runs_dir']}", file=out)
    results = status.get("results") or {}
    if results:
        where = results.get("dsn") or "off (runs stay in their directories only)"
        own = " (the stack's own)" if results.get("own") else ""
        print(f"results     {where}{own}  host {status.get('host')}", file=out)
        if results.get("pending_runs"):
            since = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(results["pending_since"] or 0))
            error = f"; last error: {results['last_error']}" if results.get("last_error") else ""
            print(f"            {results['pending_runs']} run(s) not yet in it, waiting since {since}{error} "
                  f"(written by the exporter every 15 s; benchwatch flush waits for them)", file=out)
        if results.get("pending_sweeps"):
            error = f"; last error: {results['sweeps_last_error']}" if results.get("sweeps_last_error") else ""
            print(f"            {results['pending_sweeps']} sweep(s) whose latest plan and state are not yet in it{error} "
                  "(written by the exporter every 15 s)", file=out)
        if results.get("long_term"):
            print(f"long-term   writes to {results['long_term']['write_url']}, queries "
                  f"{results['long_term']['query_url']}", file=out)


@command("down", help="stop the native stack (data is kept)")
def cmd_down(ctx: Context) -> int:
    from benchwatch.stack.shards import stop_shards

    stack = ctx.stack
    # The sharded demo's instances and their agent first: the agent pushes to the stack's Prometheus.
    stopped = stop_shards(stack.cfg.state_dir) + stack.down()
    ctx.say("stopped " + (", ".join(stopped) if stopped else "nothing (no component was running)"))
    return 0


def _status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")


@command("status", help="components, URLs, ports, pids, health", arguments=_status_arguments)
def cmd_status(ctx: Context) -> int:
    status = ctx.stack.status()
    if ctx.args.json:
        print(json.dumps(status, indent=2), file=ctx.stdout)
    else:
        print_status(status, ctx.stdout)
    healthy = (all(c["healthy"] for c in status["components"].values())
               and engines.get(status["engine"]).status_healthy(status))
    return 0 if healthy else 1
