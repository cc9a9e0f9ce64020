"""``benchwatch history`` (workloads, a workload's runs and change points, CI's verdict) and
``benchwatch annotate`` (an external event, for "what changed" and the dashboards)."""

from __future__ import annotations

import argparse
import json

from benchwatch.commands import Context, command
from benchwatch.record.outcome import METRICS


def _history_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="*", metavar="WORKLOAD",
                   help="a workload (its id, its name or any run id of it); 'accept RUN_ID' accepts a change as the new "
                   "baseline; none: list the workloads")
    p.add_argument("--workload", help="the workload, as WORKLOAD")
    p.add_argument("--metric", choices=sorted(METRICS), default="tps", help="the figure followed (default tps)")
    p.add_argument("--json", action="store_true", help="as JSON on stdout")
    p.add_argument("--name", help="give the workload this name (usable as WORKLOAD from then on)")
    p.add_argument("--fail-on-regression", type=float, metavar="PCT",
                   help="exit 1, saying why, when the latest change point is a regression of more than PCT percent, "
                   "or the latest --recent runs are worse than those before them by more than PCT percent")
    p.add_argument("--all-hosts", action="store_true",
                   help="pool every host's runs from the results database (docs/results.md): a workload is then the same "
                   "work on any host, its id the digest of the key without the host")
    p.add_argument("--recent", type=int, default=3, metavar="K",
                   help="with --fail-on-regression: how many latest runs to compare with those before them (default 3)")
    p.add_argument("--comment", metavar="FILE",
                   help="with --fail-on-regression: write a Markdown comment for the pull request to FILE (the verdict "
                   "with its interval, what changed, server measures, dips by cause, links)")
    p.add_argument("--grafana-url", metavar="URL",
                   help="the Grafana the comment links to (default: env BENCHWATCH_GRAFANA_URL, else the stack's own)")


@command("history", help="runs of one workload over time: change points, what changed, regressions for CI",
         arguments=_history_arguments)
def cmd_history(ctx: Context) -> int:
    from benchwatch.history import report

    args, say = ctx.args, ctx.say
    stack = ctx.stack
    hist = report.History.of_state(stack.cfg.state_dir, stack.cfg.runs_dir)
    target = list(args.target)
    if target[:1] == ["accept"]:
        return _accept(ctx, hist, target[1:])
    if args.workload:
        target = [args.workload, *target]
    if len(target) > 1:
        say(f"one workload at a time: got {' '.join(target)}")
        return 2
    if args.recent < 1:
        say("--recent must be 1 or more")
        return 2
    if args.comment and (args.fail_on_regression is None or not (target or args.workload)):
        say("--comment writes the gate's comment: give a WORKLOAD and --fail-on-regression PCT with it")
        return 2
    store = None
    pooled_entries: list = []
    if args.all_hosts:
        store, pooled_entries = _pooled(ctx, hist)
        if store is None:
            return 2
    try:  # the results database stays open to the end: what changed and the comment read runs' meta.json from it
        return _answer(ctx, hist, target, pooled_entries if store is not None else None)
    finally:
        if store is not None:
            store.close()


def _answer(ctx: Context, hist, target: list[str], pooled_entries: list | None) -> int:
    from benchwatch.history import events, report, series

    args, say = ctx.args, ctx.say
    stack = ctx.stack
    try:
        entries = hist.entries() if pooled_entries is None else pooled_entries
        if not target:
            if args.name:
                say("--name names a workload: give it (benchwatch history WORKLOAD --name NAME)")
                return 2
            listing = hist.workloads(entries)
            if args.json:
                print(json.dumps({"workloads": listing}, indent=2), file=ctx.stdout)
            else:
                _print_workloads(ctx, listing)
            return 0
        wid = hist.resolve(target[0], entries)
        if wid is None:
            say(f"no workload or run {target[0]!r} in {stack.cfg.runs_dir} (benchwatch history lists the workloads)")
            return 2
        if args.name:
            events.name(hist.hdir, wid, args.name)
            say(f"workload {wid} is named {args.name}")
            share_state(ctx, hist.hdir)
        result = report.series(hist, wid, args.metric, entries, _evidence(stack) if stack.healthy("prometheus")
                               or stack.cfg.long_term_query_url else None)
        if not result["runs"]:
            say(f"no run of workload {wid} has {args.metric}" + (
                " (latency percentiles need pgbench's per-transaction log: benchwatch run --latency-log)"
                if args.metric.startswith("latency_p") else ""))
    except ValueError as e:  # a damaged names.json or accepted.json
        say(str(e))
        return 2
    if args.json:
        print(json.dumps(result, indent=2), file=ctx.stdout)
    else:
        _print_series(ctx, result)
    _write_change_points(ctx, stack, result)
    if stack.healthy("prometheus"):  # the History dashboard's series (and the annotations, sent again)
        error = series.send(stack.cfg.remote_write_url, series.history_samples(result)
                            + series.annotation_samples(hist.annotations()))
        if error:
            say(f"{error}: the History dashboard does not show this yet")
    if args.fail_on_regression is not None:
        if args.comment:
            code = _comment(ctx, stack, hist, result)
            if code:
                return code
        why = report.regression(result, args.fail_on_regression, args.recent)
        if why:
            say(why)
            return 1
        say(f"no regression of more than {args.fail_on_regression:g} % in {args.metric} "
            f"({len(result['runs'])} runs, {len(result['change_points'])} change points)")
    return 0


def _write_change_points(ctx: Context, stack, result: dict) -> None:
    """The change points to the results database's history_change_points, where there is one (said, not fatal,
    when it is down: the next history of the workload writes them)."""
    from benchwatch.history.rows import change_point_rows
    from benchwatch.results.store import write_to

    rows = change_point_rows(result)
    error = write_to(stack.results_target_running(), lambda store: store.write_change_points(
        stack.cfg.host, result["workload"], result["metric"], rows))
    if error:
        ctx.say(f"could not write the change points to {error} (the History dashboard's SQL table does not "
                "show them)")


def _pooled(ctx: Context, hist):
    """(the results database, every host's entries pooled), or (None, []) with the reason said."""
    from benchwatch.history import events
    from benchwatch.history.index import pooled, pooled_ids
    from benchwatch.results.store import Store

    cfg = ctx.stack.cfg
    dsn = cfg.results_target()
    if dsn is None:
        ctx.say("--all-hosts reads the results database, and this stack has none (up --results-dsn off): "
                "give one with benchwatch up --results-dsn DSN")
        return None, []
    store = Store(dsn)
    try:
        stored = store.runs()
    except Exception as e:  # psycopg.OperationalError: down, refused; RuntimeError: a newer schema
        store.close()
        from benchwatch.results.dsn import public

        ctx.say(f"cannot read the results database ({public(dsn)}): {type(e).__name__}: {str(e).strip()}")
        return None, []
    hist.meta_of = lambda run_id: store.meta(run_id) or hist_meta(hist, run_id)
    hist.stability_of = store.stability  # another host's run (this host's own are read from their directories)
    local = hist.entries()
    try:  # names, accepted changes and annotations of every host, under pooled workload ids
        hist.shared = events.pool(store.history_states(), hist.hdir, pooled_ids(stored, local))
    except Exception as e:  # a database that lost its connection since: the runs are read, this host's state stays
        ctx.say(f"the other hosts' history state (names, accepted changes, annotations) is not read: "
                f"{type(e).__name__}: {str(e).strip()}")
    return store, pooled(stored, local, cfg.host)


def hist_meta(hist, run_id: str) -> dict:
    """A local run's meta.json (one not in the database yet)."""
    from benchwatch.history import report

    return report._meta(hist.runs_dir, run_id)


def _comment(ctx: Context, stack, hist, result: dict) -> int:
    """--comment: the gate's Markdown written to FILE; 0, or 2 (said) when it cannot be written."""
    import os

    from benchwatch.gate import history as history_gate

    args = ctx.args
    assessed = history_gate.assess(result, args.fail_on_regression, args.recent, history_gate.Runs(hist.meta, hist.stability),
                                   hist.annotations(),
                                   _evidence(stack) if stack.healthy("prometheus") else None)
    grafana = args.grafana_url or os.environ.get("BENCHWATCH_GRAFANA_URL") or stack.cfg.url("grafana")
    text = history_gate.markdown(result, assessed, {"grafana": grafana})
    from benchwatch.commands.share import write_comment

    return write_comment(ctx, stack, args.comment, text)


def _accept(ctx: Context, hist, rest: list[str]) -> int:
    from benchwatch.history import events

    if len(rest) != 1:
        ctx.say("usage: benchwatch history accept RUN_ID")
        return 2
    entries = hist.entries()
    run = next((e for e in entries if e.run_id == rest[0]), None)
    if run is None:
        ctx.say(f"no run {rest[0]!r} in {hist.runs_dir}")
        return 2
    events.accept(hist.hdir, run.workload, run.run_id)
    ctx.say(f"run {run.run_id} accepted as the new baseline of workload {run.workload}: "
            "--fail-on-regression no longer fails on changes up to it")
    share_state(ctx, hist.hdir)
    return 0


def share_state(ctx: Context, hdir: str) -> None:
    """What history was just told, into the results database at once (other hosts' history --all-hosts reads
    it); when the database cannot take it, said: the exporter writes it with the next run it records."""
    from benchwatch.history import events
    from benchwatch.results.dsn import public
    from benchwatch.results.store import Store

    cfg = ctx.stack.cfg
    dsn = ctx.stack.results_target_running()  # not the stack's own database while it is stopped: nothing to wait on
    if dsn is None:
        return
    try:
        with Store(dsn) as store:
            for kind, content in events.state(hdir):
                store.write_history_state(cfg.host, kind, content)
    except Exception as e:  # psycopg.OperationalError: down, refused; kept here, written with the next run
        ctx.say(f"not in the results database ({public(dsn)}) yet: {type(e).__name__}: {str(e).strip()}; "
                "kept here, and written with the next run this host records")


def _print_workloads(ctx: Context, listing: list[dict]) -> None:
    if not listing:
        ctx.say("no runs yet")
        return
    for w in listing:
        name = f" ({w['name']})" if w["name"] else ""
        hosts = f" on {', '.join(w['hosts'])}" if w.get("hosts") else ""
        print(f"{w['workload']}{name}: {w['runs']} runs{hosts}, {w['first']} .. {w['last']}: {w['description']}",
              file=ctx.stdout)


def _evidence(stack):
    """The run-level evidence of the runs around a change point, from the stack's Prometheus (the module the
    experiment report's why uses; one reader per engine)."""
    from benchwatch import evidence
    from benchwatch.commands.share import run_path
    from benchwatch.experiment.figures import run_figures

    readers: dict = {}
    # Another host's run (history --all-hosts) is fetched from the results database only where its series can be
    # read here too, from the long-term store: else it stays unknown, without a fetch for nothing.
    fetch = bool(stack.cfg.long_term_query_url)

    def why(before: list[str], after: list[str], engine: str | None) -> list[dict]:
        if engine not in readers:
            readers[engine] = evidence.experiment_why(stack.cfg.url("prometheus"), stack.cfg.runs_dir, engine or "",
                                                      figures_of=run_figures,
                                                      path_of=lambda run_id: run_path(stack, run_id, fetch=fetch))
        return readers[engine](before, after)

    return why


def _print_series(ctx: Context, result: dict) -> None:
    from benchwatch.history import report

    print(f"{result['workload']}: {result['description'] or ''}", file=ctx.stdout)
    starts = {cp["index"]: cp for cp in result["change_points"]}
    for i, r in enumerate(result["runs"]):
        if i in starts:
            print(f"  --- {report.describe_change(result['metric'], starts[i])}", file=ctx.stdout)
        host = f"  {r['host']}" if r.get("host") else ""
        print(f"  {r['started_at']}  {r['run_id']}{host}  {result['metric']} {r['value']:.6g}", file=ctx.stdout)
    if not result["change_points"]:
        print(f"  no change point in {len(result['runs'])} runs", file=ctx.stdout)


def _annotate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("text", help="what happened (a deploy, a remount, a firmware update)")
    p.add_argument("--run", metavar="RUN_ID", help="the run it concerns")


@command("annotate", help="record an external event at now, for history's what-changed and the dashboards",
         arguments=_annotate_arguments)
def cmd_annotate(ctx: Context) -> int:
    from benchwatch.history import events, series

    args = ctx.args
    stack = ctx.stack
    if not args.text.strip():
        ctx.say("an annotation needs some text")
        return 2
    event = events.annotate(events.history_dir(stack.cfg.state_dir), args.text, args.run)
    ctx.say(f"annotation recorded at {event['at']:.3f}")
    share_state(ctx, events.history_dir(stack.cfg.state_dir))
    if not stack.healthy("prometheus"):
        ctx.say("not on the dashboards yet: the stack's Prometheus is not running (kept; benchwatch history "
                "WORKLOAD sends it once it is)")
        return 0
    error = series.send_annotation(stack.cfg.remote_write_url, event)
    if error:
        ctx.say(f"not on the dashboards yet: {error} (kept; benchwatch history sends it again)")
    return 0
