"""``benchwatch demo``: README command 1 (the demos themselves are ``benchwatch.demo``)."""

from __future__ import annotations

import argparse

from benchwatch.commands import Context, command


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--duration", type=int, help="seconds of pgbench (default 40; 30 with --shards), or of each sysbench "
                   "run with --engine mariadb (default 20)")
    p.add_argument("--shards", type=int, metavar="N",
                   help="instead: N shard databases (a power of 2) behind a PL/Proxy proxy database, pgbench calling it")
    p.add_argument("--clients", type=int, default=8, help="with --shards: pgbench -c (default 8)")
    p.add_argument("--jobs", type=int, default=2, help="with --shards: pgbench -j (default 2)")
    p.add_argument("--script", choices=("update", "lookup"), default="update",
                   help="with --shards: each transaction updates (default) or looks up one account on its shard")
    p.add_argument("pgbench_args", nargs=argparse.REMAINDER, help="with --shards: -- more pgbench arguments (e.g. -R 2000)")


@command("demo", help="fresh machine: install, start the stack, run a short pgbench, print a summary; "
         "--engine mariadb --instances 4: four MariaDB instances, four sysbench runs side by side", arguments=_arguments)
def cmd_demo(ctx: Context) -> int:
    from benchwatch import demo

    args, say = ctx.args, ctx.say
    stack = ctx.starting_stack()
    if stack is None:
        return 1
    extra = args.pgbench_args[1:] if args.pgbench_args[:1] == ["--"] else args.pgbench_args
    if not stack.engine.default:
        if args.shards is not None or extra:
            say("--shards and extra pgbench arguments are for the PostgreSQL demo")
            return 2
        return getattr(demo, stack.engine.demo)(stack, instances=stack.cfg.mariadb_instances, duration=args.duration or 20,
                                                say=say)
    if args.shards is None:
        if extra:
            say("extra pgbench arguments are for demo --shards")
            return 2
        return demo.demo(stack, duration=args.duration or 40, say=say)
    return demo.demo_shards(stack, shards=args.shards, instances=args.instances or 4, duration=args.duration or 30,
                            clients=args.clients, jobs=args.jobs, script=args.script, extra_args=extra, say=say)
