"""``benchwatch run``, ``attach`` and ``import``: a load generator's output recorded, live or saved."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from benchwatch import loadgens
from benchwatch.commands import Context, command
from benchwatch.stack.native import Stack

if TYPE_CHECKING:
    from benchwatch.record.wrapper import CtrlC


def _profile_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", action="store_true",
                   help="CPU profile of the run: perf record on every CPU of this host, folded per second into the "
                        "run directory once it ended (docs/profiles.md)")


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--latency-log", action="store_true",
                   help="pgbench: add -l so the per-transaction log gives latency percentiles (p50/p95/p99)")
    p.add_argument("--target", help="sysbench on a stack of several MariaDB instances: the one to drive (mariadb-1..N)")
    p.add_argument("--experiment", help="a name shared by runs observed as one experiment (e.g. one per instance, side "
                   "by side): benchmark_run_info's experiment label; the sysbench dashboard sums them")
    _profile_argument(p)
    p.add_argument("tool_argv", nargs=argparse.REMAINDER, metavar="-- TOOL ARGS",
                   help=f"the load generator and its arguments: -- {'|'.join(loadgens.titles())} ARGS...")


@command("run", help="run a load generator under observation: benchwatch run -- {tools} ARGS",
         arguments=_run_arguments)
def cmd_run(ctx: Context) -> int:
    args, say = ctx.args, ctx.say
    argv = list(args.tool_argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        say(f"usage: benchwatch run -- {'|'.join(loadgens.titles())} [ARGS...]")
        return 2
    info = {"experiment": args.experiment} if args.experiment else {}
    code, run = record_run(ctx, argv, target_name=args.target, info=info, latency_log=args.latency_log,
                           profile=args.profile)
    if run is None:
        return code
    _say_stability(ctx, run)
    say(f"run {run.run_id} ended with exit code {code}")  # the last line: scripts read it
    return code


def _say_stability(ctx: Context, run) -> None:
    """The run's stability profile, as its summary.json keeps it, in a few lines (nothing when it has none)."""
    from benchwatch.present import stability as words
    from benchwatch.record import outcome

    summary = outcome.read(run) or {}
    for line in words.lines(summary.get("stability")):
        ctx.say(line)
    stab = summary.get("stability") or {}
    if stab.get("dips"):
        ctx.say(f"the dips' causes: benchwatch explain {run.run_id} (their count by cause is added to "
                f"{outcome.SUMMARY} once the exporter has archived the run's series)")


def record_run(ctx: Context, argv: list[str], *, target_name: str | None = None, info: dict[str, str] | None = None,
               latency_log: bool = False, client_env: dict[str, str] | None = None, profile: bool = False):
    """One ordinary run on the stack (``run``, and each run of ``sweep``): (exit code, run directory), or
    (2, None) when it cannot start, the reason said. ``info``: labels of its run_info series (experiment,
    sweep, ...); ``client_env``: the variables that reach another server than the stack's (a sweep's variant);
    ``profile``: perf record beside it, folded into the run directory before this returns."""
    from benchwatch import engines, loadgens
    from benchwatch.record.wrapper import CtrlC

    say = ctx.say
    stack = ctx.stack
    have_stack = os.path.exists(stack.cfg.stack_file)
    generator = loadgens.for_program(argv[0])
    if have_stack and os.path.basename(argv[0]) in generator.programs and stack.engine.name not in generator.engines:
        drives = " or ".join(engines.get(e).title for e in generator.engines)
        say(f"the stack in {stack.cfg.state_dir} runs {stack.engine.title}, which {generator.title} cannot drive "
            f"(it drives {drives}): start a stack for it with benchwatch down, then benchwatch up"
            + ("" if stack.engine.default else " (or --engine NAME)"))
        return 2, None
    if not stack.healthy("benchwatch_exporter"):
        say("the exporter is not running: the run is saved but not sent to Prometheus "
            "(start the stack with benchwatch up, or import the run later with benchwatch import)")
    own_server = client_env is not None
    if client_env is None:
        client_env = stack.server.client_env() if have_stack else {}
    targets = [] if own_server else stack.server.targets()
    # From here on something may be set up that has to be undone (go-tpc's throwaway user): Ctrl-C is noted,
    # not raised at a random line, until it is undone; a Ctrl-C before the tool starts means it never starts.
    with CtrlC() as ctrl_c:
        code, run = _connect_and_run(ctx, stack, argv, generator, targets, target_name, dict(info or {}), latency_log,
                                     client_env, ctrl_c, profile)
    if run is not None:
        _record_targets(ctx, stack, run, since=run.read_meta().get("started_at"))
    return code, run


def _connect_and_run(ctx: Context, stack: Stack, argv: list[str], generator: loadgens.LoadGenerator, targets: list,
                     target_name: str | None, info: dict[str, str], latency_log: bool, client_env: dict[str, str],
                     ctrl_c: CtrlC, profile: bool = False):
    """record_run's connection to the stack's server, the run and the connection's undoing."""
    from benchwatch.alerting.printer import AlertPrinter
    from benchwatch.record.stream import LineSafeStream
    from benchwatch.record.wrapper import run_benchmark
    from benchwatch.stability.runs import stability_profiler

    say = ctx.say
    have_stack = os.path.exists(stack.cfg.stack_file)
    server_facts = None
    undo = None
    if have_stack and targets and generator.engine_of(argv[1:]) == stack.engine.name:
        target = next((t for t in targets if t.name == target_name), None) if target_name else targets[0]
        if target is None:
            say(f"no {stack.engine.title} target {target_name!r} in this stack (its targets: "
                f"{', '.join(t.name for t in targets)})")
            return 2, None
        argv, server_facts, undo = _mysql_connection(ctx, target, argv)
        info["target"] = target.name  # the instance this run drives (benchmark_run_info's target)
    elif have_stack and client_env and generator.engine_of(argv[1:]) == stack.engine.name:
        args_in, added = generator.connect_env(argv[1:], client_env)
        if added:
            say(f"added {' '.join(added)} to the {generator.title} arguments (the stack's {stack.engine.title}; "
                "the password stays in its 0600 passfile)")
            argv = [argv[0], *args_in]
    terminal = LineSafeStream(ctx.stderr.buffer)
    watches = []
    cpu_profiles: list = []

    def started(run) -> None:
        say(f"run {run.run_id}: output saved in {run.path}")
        _record_targets(ctx, stack, run)
        if profile:
            cpu_profiles.append((run, start_profile(run, say)))
        if stack.healthy("alertmanager"):
            # Firing and resolved alerts of this run, one line each, between pgbench's lines.
            watches.append(AlertPrinter(run.run_id, lambda line: terminal.say(f"benchwatch: {line}"),
                                      alertmanager_url=stack.cfg.url("alertmanager")).start())

    try:
        code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, client_env=client_env, notice=say, on_start=started,
                                latency_log=latency_log, stderr_sink=terminal, server_facts=server_facts,
                                info=info, ctrl_c=ctrl_c, stability=stability_profiler)
    finally:
        for watch in watches:
            watch.stop()
        terminal.close()
        for profiled, cpu_profile in cpu_profiles:
            finish_profile(profiled, cpu_profile, say)
        if undo is not None:
            undo()  # e.g. go-tpc's throwaway user, dropped however the run ended
    return code, run


def start_profile(run, say: Callable[[str], None]):
    """perf record beside a run that is about to start (meta.json's "profile" says whether it is profiled)."""
    from benchwatch import engines
    from benchwatch.profile.recorder import Profiler

    meta = run.read_meta()
    try:
        server_pid = engines.get(meta["engine"]).server_pid(meta) if meta.get("engine") else None
    except engines.UnknownEngine:
        server_pid = None
    profiler = Profiler(run.path, say, server_pid=server_pid)
    on = profiler.start()
    run.update_meta(profile={"state": "recording"} if on else {"state": "off", "reason": profiler.reason})
    return profiler if on else None


def finish_profile(run, profiler, say: Callable[[str], None]) -> None:
    """The run ended: perf stopped and folded into its directory (before anything else runs on the host)."""
    from benchwatch.profile.recorder import DIR

    if profiler is None:
        return
    summary = profiler.finish()
    if summary.get("error") and not summary.get("samples"):
        say(f"profile not kept: {summary['error']}")
        run.update_meta(profile={"state": "failed", "reason": summary["error"]})
        return
    groups = summary.get("by_group") or {}
    busy = sum(v for k, v in groups.items() if k != "idle") or 1
    shares = ", ".join(f"{k.replace('_', ' ')} {100 * v / busy:.0f} %" for k, v in groups.items() if k != "idle")
    say(f"profile: {summary['samples']} samples ({shares} of the busy ones; {summary['unknown_leaf']} with an "
        f"unnamed leaf), folded in {summary['fold_seconds']:.1f} s into {os.path.join(run.path, DIR)}")
    run.update_meta(profile={"state": "profiled", "samples": summary["samples"], "dir": DIR})


def _record_targets(ctx: Context, stack: Stack, run, since: float | None = None) -> None:
    """meta.json["targets"]: the databases watched while the run ran (at its start, and any seen up to its end)."""
    from benchwatch.query import targets
    from benchwatch.query.prometheus import PrometheusError

    if not stack.healthy("prometheus"):
        return
    try:
        seen = targets.watched(stack.cfg.url("prometheus"), since=since)
    except PrometheusError as e:
        ctx.say(f"could not list the watched targets: {e}")
        return
    meta = run.read_meta()
    run.update_meta(targets=targets.merge_watched(meta.get("targets") or [], seen))


def _mysql_connection(ctx: Context, target, argv: list[str]) -> tuple[list[str], dict, Callable[[], None] | None]:
    """The load generator pointed at a MariaDB of the stack (its own way: benchwatch.loadgens.<tool>.connect),
    the server's facts for meta.json, and what undoes the connection once the run ended."""
    from benchwatch import loadgens

    if not os.path.exists(target.client_file):
        return argv, {}, None
    args, undo = loadgens.for_program(argv[0]).connect(argv[1:], target, ctx.say)
    return [argv[0], *args], target.server_facts(), undo


def _attach_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tool", choices=loadgens.names(), default=loadgens.default().name,
                   help=f"the load generator whose output comes on stdin (default {loadgens.default().name})")
    p.add_argument("--interval", type=float, help="the tool's progress interval (" + ", ".join(sorted(
        {g.progress_option for g in loadgens.load_generators().values()})) + "), if not 1 and not learnt from the lines")
    # --tool-args, and each tool's --NAME-args as it was first spelled (--pgbench-args, --sysbench-args): one dest.
    p.add_argument("--tool-args", *(f"--{name}-args" for name in loadgens.names()), dest="tool_args", metavar="ARGS",
                   help="the tool's arguments of that run, for the run's metadata (one string, split as a shell would)")
    p.add_argument("--quiet", action="store_true", help="do not echo the stream to stdout")
    _profile_argument(p)


@command("attach", help="observe a pgbench (or, with --tool sysbench, a sysbench) started elsewhere: "
         "pgbench ... 2>&1 | benchwatch attach", arguments=_attach_arguments)
def cmd_attach(ctx: Context) -> int:
    from benchwatch.record.wrapper import attach_stream
    from benchwatch.stability.runs import stability_profiler

    args = ctx.args
    stack = ctx.stack
    tool_args = shlex.split(args.tool_args) if args.tool_args else None
    cpu_profiles: list = []

    def started(run) -> None:
        if args.profile:  # the database on this host: perf sees its processes as it sees the tool's
            cpu_profiles.append((run, start_profile(run, ctx.say)))

    try:
        run = attach_stream(sys.stdin.fileno(), runs_dir=stack.cfg.runs_dir,
                            echo=None if args.quiet else ctx.stdout.buffer,
                            tool_args=tool_args, interval=args.interval, tool=args.tool, stability=stability_profiler,
                            on_start=started)
    finally:
        for profiled, cpu_profile in cpu_profiles:
            finish_profile(profiled, cpu_profile, ctx.say)
    ctx.say(f"run {run.run_id}: output saved in {run.path}")
    from benchwatch.record import outcome

    for note in outcome.unread_notes(outcome.read(run)):
        ctx.say(note)
    return 0


def _import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="+", help="saved pgbench or sysbench outputs (stdout and stderr together), or run directories")
    p.add_argument("--start", help="when the (first) run started (RFC 3339, e.g. 2016-01-06T10:00:00Z, or Unix seconds)")
    p.add_argument("--openmetrics", action="store_true", help="print OpenMetrics text for promtool tsdb create-blocks-from openmetrics instead")
    p.add_argument("--run-id", help="the run id to use (default: from the start time); refused for a file with several runs")
    p.add_argument("--list", action="store_true", help="show the runs found in each file and what was read, write nothing")
    p.add_argument("--json", action="store_true", help="report per file and run what was read and what was not, as JSON on stdout")
    p.add_argument("--strict", action="store_true", help="exit non-zero, writing nothing, when any line was not read")
    p.add_argument("--verbose", action="store_true", help="list every line not read, by number and reason")


@command("import", help="backfill a saved pgbench or sysbench output into Prometheus", arguments=_import_arguments)
def cmd_import(ctx: Context) -> int:
    import json

    from benchwatch.record import importer, replay, rundir
    from benchwatch.sink.openmetrics import write_openmetrics
    from benchwatch.sink.remote_write import RemoteWriteError, RemoteWriter
    from benchwatch.stability.runs import stability_profiler

    args, say = ctx.args, ctx.say
    if args.json and args.openmetrics:
        say("--json and --openmetrics both write to stdout: use one of them")
        return 2
    if args.run_id and len(args.file) > 1:
        say("--run-id names one run: give one file")
        return 2
    start_arg: float | None = None
    if args.start:
        try:
            start_arg = importer.parse_start(args.start)
        except ValueError:
            say(f"--start {args.start!r} is not a time: use RFC 3339 like 2016-01-06T10:00:00Z or Unix seconds")
            return 2
    # Read every file first: nothing is written unless all of them can be.
    files: list[tuple[str, bytes, list[replay.ReadRun], list[tuple[int, str]], str | None]] = []
    reports: list[dict[str, object]] = []
    code = 0
    for path in args.file:
        try:
            data, recorded_start = importer.read_source(path)
        except OSError as e:
            say(f"cannot read {path}: {e.strerror or e}")
            return 2
        start = start_arg if start_arg is not None else recorded_start
        placed_by = importer.BY_START if start_arg is not None else (
            "the run directory's recorded start" if recorded_start is not None else None)
        if start is None:
            start, placed_by, note = importer.placement(path, data)
            if note:
                say(f"{path}: {note}")
        saved = replay.read_saved(data)
        runs_found = saved[0]
        if args.run_id and len(runs_found) > 1:
            say(f"{path} holds {len(runs_found)} runs: --run-id names one run (each run gets its own id)")
            return 2

        def name(k: int, run_start: float | None) -> str:
            return args.run_id or rundir.new_run_id(run_start)

        reads, set_aside = replay.replay_saved(data, name, start, saved=saved)
        report = {"file": path, "runs": [importer.run_report(r, len(r.samples)) for r in reads],
                  "set_aside": [{"line": n, "reason": why} for n, why in set_aside], "placed_by": placed_by}
        reports.append(report)
        if not reads or all(r.read_nothing for r in reads):
            say(f"{path}: nothing read: {importer.EXPECTED}")
            report["error"] = "nothing read"
            code = 1
            continue
        for r in reads:
            what = (f"{path}: run {r.index} of {len(reads)}, lines {r.first_line}-{r.last_line}" if len(reads) > 1
                    else f"{path}")
            if r.skipped is not None:
                say(f"{what}: not imported: {r.skipped} (its lines are kept in the file)")
                continue
            counts = f"{r.model.progress_lines} progress lines, {len(r.samples)} samples"
            if "tps" in r.model.summary:
                counts += f", summary tps {r.model.summary['tps']}"
            if args.verbose:
                for number, reason, text in r.unread:
                    say(f"line {number}: {reason}; not read: {text}")
            else:
                for note in importer.short_unread(r):
                    say(note)
            say(f"{what}: run {r.run_id}: {counts}, {len(r.unread)} unparsed lines")
            if r.placed_after_previous:
                say(f"{path}: run {r.index} placed right after run {r.index - 1} ends, at {importer.when(r.start_epoch)}: "
                    "the file gives no start of its own")
        if set_aside and not args.verbose:
            say(f"{path}: {len(set_aside)} lines read as a paste's, not the tool's (lines "
                f"{', '.join(str(n) for n, _ in set_aside[:8])}{' …' if len(set_aside) > 8 else ''}: --verbose says why)")
        if args.verbose:
            for number, reason in set_aside:
                say(f"  line {number} set aside: {reason}")
        if args.strict and any(r.unread for r in reads):
            say(f"{path}: --strict: {sum(len(r.unread) for r in reads)} lines not read")
            report["error"] = "partial read"
            code = 1
            continue
        files.append((path, data, reads, set_aside, placed_by))
    if args.json:
        print(json.dumps({"files": reports}, indent=2, default=str), file=ctx.stdout)
    if args.list or code:
        if code and not args.list:
            say("nothing written")
        return code
    if args.openmetrics:
        samples = [s for _, _, reads, _, _ in files for r in reads for s in r.samples]
        write_openmetrics(samples, ctx.stdout, types={k: v[0] for k, v in replay.run_metrics().items()},
                          help={k: v[1] for k, v in replay.run_metrics().items()})
        return 0
    stack = ctx.stack
    try:
        RemoteWriter(stack.cfg.remote_write_url).send(
            [s for _, _, reads, _, _ in files for r in reads for s in r.samples + r.model.end_markers()])
    except (RemoteWriteError, OSError) as e:
        say(f"could not write to Prometheus at {stack.cfg.remote_write_url}: {e} (is the stack up? benchwatch up)")
        return 1
    imported: list[str] = []
    for path, data, reads, _, placed_by in files:
        for r in reads:
            if r.skipped is not None:
                continue
            chunk = data if len(reads) == 1 else importer.run_lines(data, r)
            run = importer.save_import(stack.cfg.runs_dir, r.run_id, path, chunk, r.start_epoch, r.model, r.samples,
                                       "after the previous run of the file" if r.placed_after_previous else placed_by,
                                       stability=stability_profiler)
            say(f"imported run {r.run_id}; saved in {run.path}")
            if not args.json:
                print(r.run_id, file=ctx.stdout)
            imported.append(run.path)
    _complete_long_term(ctx, imported)
    return 0


def _complete_long_term(ctx: Context, run_paths: list[str]) -> None:
    """An imported run's samples are older than what Prometheus appends in order, so its remote write does not
    forward them: they are written to the long-term store directly (docs/long-term.md)."""
    from benchwatch.query import longterm
    from benchwatch.sink.remote_write import RemoteWriteError

    store = longterm.store_of(ctx.stack.cfg.url("prometheus"))
    if store is None or not run_paths:
        return
    for k, path in enumerate(run_paths):
        try:
            done = longterm.complete_run(path, ctx.stack.cfg.url("prometheus"), store, wait=k == 0)
        except (OSError, ValueError, RuntimeError, RemoteWriteError) as e:
            ctx.say(f"{os.path.basename(path)}: not completed in the long-term store {store}: {e} "
                    "(its samples are kept in the stack's Prometheus and the run directory)")
            continue
        ctx.say(f"{os.path.basename(path)} in the long-term store {store}: {done.local} samples, "
                f"{done.forwarded} forwarded by Prometheus, {done.written} written directly"
                + (f", {done.refused} refused by the store (older than its retention?)" if done.refused else ""))
