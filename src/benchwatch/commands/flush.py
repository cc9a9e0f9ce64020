"""``benchwatch flush [--timeout S]``: before a runner is deleted, wait until nothing is left to write to the
stores it shares (benchwatch.stack.pending), or say what is left and exit with a code of its own."""

from __future__ import annotations

import argparse

from benchwatch.commands import Context, command

NOT_FLUSHED = 3  # the time passed with writes still pending: neither a verdict (1) nor bad input (2)


def _flush_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds to wait at most (default 120); then exit 3 saying what is left")


@command("flush", help="wait until nothing is left to write to the shared stores (exit 3 when --timeout passes first)",
         arguments=_flush_arguments)
def cmd_flush(ctx: Context) -> int:
    from benchwatch.stack import pending

    args = ctx.args
    if args.timeout < 0:
        ctx.say("--timeout cannot be negative")
        return 2
    waited = pending.wait(ctx.stack, args.timeout, say=ctx.say)
    if waited.flushed:
        if waited.last:
            ctx.say(f"flushed: nothing left to write ({'; '.join(o.what for o in waited.last)}; "
                    f"{waited.seconds:.1f} s)")
        else:
            ctx.say("flushed: nothing of this stack buffers writes (nothing running holds any)")
        return 0
    ctx.say(f"not flushed after {args.timeout:g} s: " + "; ".join(str(o) for o in waited.last if not o.done)
            + " (deleting this machine now loses it)")
    return NOT_FLUSHED
