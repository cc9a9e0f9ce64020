"""``benchwatch targets``: the database instances watched, and the series budget."""

from __future__ import annotations

import argparse
import json

from benchwatch.commands import Context, command


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.add_argument("--series", action="store_true", help="also count the series of each target and each run (the series budget)")
    p.add_argument("--window", default="1h", help="the window --series counts series in (default 1h)")


@command("targets", help="the watched databases: host, instance, engine, last sample age, healthy", arguments=_arguments)
def cmd_targets(ctx: Context) -> int:
    from benchwatch.query import targets
    from benchwatch.query.prometheus import PrometheusError

    args, out = ctx.args, ctx.stdout
    base = ctx.stack.cfg.url("prometheus")
    try:
        listed = targets.list_targets(base)
        series = targets.series_counts(base, args.window) if args.series else None
    except PrometheusError as e:
        ctx.say(f"cannot ask Prometheus at {base}: {e} (is the stack up? benchwatch up)")
        return 1
    if args.json:
        result: dict = {"targets": listed}
        if series is not None:
            result["series"] = series
        print(json.dumps(result, indent=2), file=out)
    else:
        print(f"{'TARGET':<16} {'HOST':<20} {'INSTANCE':<24} {'ENGINE':<11} {'LAST SAMPLE':>11}  HEALTHY", file=out)
        for t in listed:
            age = "-" if t["last_sample_age_s"] is None else f"{t['last_sample_age_s']:.1f}s ago"
            print(f"{t['target']:<16} {t['host'] or '-':<20} {t['instance'] or '-':<24} {t['engine'] or '-':<11} "
                  f"{age:>11}  {'yes' if t['healthy'] else 'NO'}", file=out)
        if series is not None:
            b = series["budget"]
            print(f"\nseries within {series['window']} (budget: a target <= {b['target']}, a run <= {b['run']})", file=out)
            for kind in ("targets", "runs"):
                for name, c in series[kind].items():
                    print(f"{kind[:-1]:<7} {name:<32} {c['series']:>6}{'' if c['within_budget'] else '  OVER BUDGET'}", file=out)
    if not listed:
        ctx.say(f"no target has sent a sample to {base} within 24 h")
    for t in listed:
        if not t["healthy"]:
            ctx.say(f"target {t['target']} on {t['host'] or '?'} is not healthy: {'; '.join(t['problems'])}")
    return 0 if listed and all(t["healthy"] for t in listed) else 1
