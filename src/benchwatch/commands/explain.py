"""``benchwatch explain``: every TPS dip of a run with its most likely cause."""

from __future__ import annotations

import argparse
import json

from benchwatch.commands import Context, command


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="the run (default: the latest)")
    p.add_argument("--json", action="store_true", help="one JSON object: dips, causes, evidence, scores")
    p.add_argument("--source", choices=("auto", "prometheus", "raw"), default="auto",
                   help="auto: the stack's Prometheus if it has the run, else the run directory (the pgbench or sysbench output, series/*.csv)")
    p.add_argument("--prometheus", metavar="URL", help="the Prometheus to read (default: the stack's)")


@command("explain", help="every TPS dip of a run with its most likely cause (docs/explain.md)", arguments=_arguments)
def cmd_explain(ctx: Context) -> int:
    from benchwatch.explain import report
    from benchwatch.record import rundir
    from benchwatch.share.collect import explain_series

    args, stack = ctx.args, ctx.stack
    run = rundir.find_run(stack.cfg.runs_dir, args.run_id)
    if run is None and args.run_id:  # a run of another host, from the results database (docs/results.md)
        from benchwatch.commands.share import from_results

        run = from_results(stack, args.run_id)
    if run is None:
        ctx.say(f"no run {args.run_id} in {stack.cfg.runs_dir}" if args.run_id else f"no run yet in {stack.cfg.runs_dir}")
        return 2
    prometheus = None if args.source == "raw" else (args.prometheus or stack.cfg.url("prometheus"))
    try:
        series, meta, run_id, used = explain_series(run, prometheus, args.source)
    except (RuntimeError, OSError) as e:
        ctx.say(f"explain {run.run_id}: {e}")
        return 1
    from benchwatch.record.replay import saved_output

    output = saved_output(run.path).decode("utf-8", "replace")  # where the end of a run that died is told
    result = report.explain(series, meta, run_id, ongoing=meta.get("state") == rundir.RUNNING, output=output)
    result["source"] = used
    profile_text = _profiles(run.path, result)
    if args.json:
        print(json.dumps(result, indent=2), file=ctx.stdout)
    else:
        ctx.stdout.write(report.text_table(result) + profile_text)
    return 0


def _profiles(run_path: str, result: dict) -> str:
    """Each dip's ``profile`` (a run recorded with --profile): where the CPU went in the dip against the rest
    of the run; its text, for the text report."""
    import time

    from benchwatch.profile import window

    profile = window.load(run_path)
    if profile is None or not result.get("dips"):
        return ""
    lines = []
    for number, dip in enumerate(result["dips"], 1):
        dip["profile"] = window.compare_windows(profile, dip["start"], dip["end"])
        lines.append(f"dip {number} ({time.strftime('%H:%M:%S', time.gmtime(dip['start']))}, "
                     f"{dip['end'] - dip['start']:.0f} s), its CPU profile against the rest of the run:")
        lines += window.text_lines(dip["profile"])
    return "\n".join(lines) + "\n"
