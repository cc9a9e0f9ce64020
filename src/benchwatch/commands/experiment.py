"""``benchwatch sweep`` (an experiment: variants x cells x repeats, unattended, resumable) and
``benchwatch report NAME`` (medians, intervals, verdicts and their why; the share bundle or --json)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess

from benchwatch.commands import Context, command

_SWEEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def sweeps_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "sweeps")


def _sweep_arguments(p: argparse.ArgumentParser) -> None:
    from benchwatch import loadgens

    generators = sorted(loadgens.load_generators().values(), key=lambda g: (not g.default, g.title))
    clients = ", ".join(f"{g.title} {g.clients_flag}" for g in generators if g.clients_flag)
    p.add_argument("--name", help="the experiment's name (its directory: <state dir>/sweeps/NAME)")
    p.add_argument("--variant", action="append", default=[], metavar="SPEC",
                   help="NAME, NAME:setting=value[,setting=value...], NAME:bindir=DIR, NAME:dsn=DSN, NAME:target=T "
                   "or NAME:before=COMMAND; the first is the baseline")
    p.add_argument("--clients", metavar="LIST", help=f"client counts, e.g. 1,8,16 ({clients})")
    p.add_argument("--scale", metavar="LIST", help="pgbench scales, e.g. 10,100 (the tables re-created per scale)")
    p.add_argument("--arg", action="append", default=[], metavar="OPTION=V1,V2",
                   help="any other option of the tool swept, e.g. --arg table-size=10000,100000")
    p.add_argument("--repeat", type=int, default=3, help="rounds: runs per variant and cell (default 3)")
    p.add_argument("--order", choices=("interleaved", "blocked"), default="interleaved",
                   help="interleaved (default): each round in a random order, its seed printed and recorded; "
                   "blocked: each variant's runs in turn")
    p.add_argument("--seed", type=int, help="the seed of the interleaved order (default: a random one, printed)")
    p.add_argument("--warmup", type=float, default=0.0, metavar="S",
                   help="seconds of the same run before each run, recorded as a run labelled warmup=1 and not counted")
    p.add_argument("--min-effect", type=float, default=2.0, metavar="PCT",
                   help="differences smaller than this (percent) are not reported as differences (default 2)")
    p.add_argument("--reinit", nargs="?", const="run", choices=("cell", "run"),
                   help="re-create the tables before every run (--reinit, --reinit run) or when the cell changes "
                   "(--reinit cell)")
    p.add_argument("--no-checkpoint", action="store_true", help="no CHECKPOINT before each run")
    p.add_argument("--latency-log", action="store_true",
                   help="pgbench: each run with -l (as run --latency-log), for the 95th percentile of latency in the report")
    p.add_argument("--profile", action="store_true",
                   help="a CPU profile of every run (perf record), folded after each run before the next starts")
    p.add_argument("--resume", metavar="NAME", help="finish the sweep NAME: only what is missing runs")
    p.add_argument("tool", nargs=argparse.REMAINDER, help=f"-- {'|'.join(loadgens.titles())} ARGS...")


@command("sweep", help="run an experiment: --variant A --variant B [--clients 1,8] [--repeat 3] -- pgbench ARGS",
         arguments=_sweep_arguments)
def cmd_sweep(ctx: Context) -> int:
    from benchwatch.engines import ServerControl, VariantServer
    from benchwatch.experiment import plan as plans
    from benchwatch.experiment.spec import SpecError
    from benchwatch.util.errors import StackError

    args, say = ctx.args, ctx.say
    argv = list(args.tool)
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        if args.resume:
            if args.name or args.variant or argv or args.clients or args.scale or args.arg:
                raise SpecError("--resume NAME takes the sweep as it was planned: give no --name, --variant, cells "
                                "or tool arguments with it")
            name = args.resume
        else:
            if not args.name:
                raise SpecError("--name NAME is needed (or --resume NAME)")
            name = args.name
        if not _SWEEP_NAME.match(name):
            raise SpecError(f"sweep name {name!r}: use letters, digits, _ . - (up to 63)")
        if not args.resume:
            _check_new(args, argv)
    except SpecError as e:
        say(str(e))
        return 2
    if args.resume:
        probe = ctx.stack
        sdir = plans.SweepDir(os.path.join(sweeps_dir(probe.cfg.state_dir), name))
        if not sdir.exists():
            say(f"no sweep {name!r} in {sweeps_dir(probe.cfg.state_dir)} (benchwatch sweep --name {name} ... starts one)")
            return 2
        plan = sdir.read_plan()
        args.engine = args.engine or plan.engine
    stack = ctx.starting_stack()
    if stack is None:
        return 1
    try:
        stack.up()
    except StackError as e:
        say(str(e))
        return 1
    sdir = plans.SweepDir(os.path.join(sweeps_dir(stack.cfg.state_dir), name))
    controls: dict[str, ServerControl | None] = {}
    servers: dict[str, VariantServer] = {}  # variant -> its own server (bindir=, dsn=)

    def control(v):
        if v.name in servers:
            return servers[v.name].control()
        key = v.target or ""
        if key not in controls:
            controls[key] = stack.server.server_control(v.target)
        return controls[key]

    if args.resume:
        plan = sdir.read_plan()
        say(f"sweep {name}: resuming ({len(plan.runs)} runs planned, order {plan.order}, seed {plan.seed})")
    else:
        if sdir.exists():
            say(f"sweep {name} exists in {sdir.path}: finish it with benchwatch sweep --resume {name}, "
                "or give another --name")
            return 2
        try:
            plan = _new_plan(ctx, stack, name, argv, control)
        except SpecError as e:
            say(str(e))
            return 2
        sdir.write_plan(plan)
        sdir.append("planned", runs=len(plan.runs), seed=plan.seed)
        say(f"sweep {name}: {len(plan.runs)} runs ({len(plan.variants)} variants x {len(plan.cells)} cells x "
            f"{plan.repeat} rounds), order {plan.order}" + (f", seed {plan.seed}" if plan.order == "interleaved" else "")
            + f"; plan and state in {sdir.path}")
    publisher = _publisher(ctx, stack, sdir, plan)
    code = 1
    try:
        code = _run_planned(ctx, stack, sdir, plan, control, servers)
    finally:
        if publisher is not None:
            from benchwatch.results import sweeps as rows

            # (the runner's last word, "ended", is a sweep whose failed runs are left out; anything else stopped it)
            events = sdir.events()
            last = events[-1].get("event") if events else None
            publisher.close(rows.INTERRUPTED if code == 130 else rows.COMPLETED if code == 0
                            else rows.FAILED if last == "ended" else rows.STOPPED)
    return code


def _publisher(ctx: Context, stack, sdir, plan):
    """The sweep's row in the results database as it runs (experiment.publish), where the stack has one."""
    from benchwatch.experiment.publish import Publisher

    target = stack.results_target_running()
    if target is None:
        return None
    publisher = Publisher(sdir, plan, stack.cfg.host, target, stack.cfg.state_dir, _secrets(stack), ctx.say)
    sdir.listener = publisher.event
    publisher.update()
    return publisher


def _run_planned(ctx: Context, stack, sdir, plan, control, servers) -> int:
    from benchwatch.engines import SettingsError
    from benchwatch.experiment.runner import Sweep
    from benchwatch.util.errors import StackError

    say, name = ctx.say, plan.name
    try:
        try:
            for v in plan.variants:
                kind = "bindir" if v.bindir else "dsn" if v.dsn else None
                if kind is None:
                    continue
                server = stack.server.variant_server(kind, v.bindir or v.dsn or "",
                                                     os.path.join(stack.cfg.state_dir, "variant-servers", name, v.name))
                if server is None:
                    say(f"variant {v.name}: {stack.engine.title} has no {kind}= variants")
                    return 2
                servers[v.name] = server
                for done in server.start():
                    say(f"sweep {name}: variant {v.name}: {done}")
                # Watched like the stack's own server, its series labelled with a target of its own: the
                # report's why reads the server that served each run.
                target = variant_target(name, v.name)
                for done in server.watch(target, name):
                    say(f"sweep {name}: variant {v.name}: {done}")
                sdir.append("watched", variant=v.name, target=target, scope=server.scope())
        except StackError as e:
            say(f"sweep {name}: {e}")
            return 1
        _warn_debug_builds(ctx, plan, control)
        targets = {v.name: variant_target(name, v.name) if v.name in servers else (v.target or stack.cfg.target_name)
                   for v in plan.variants}
        hooks = _hooks(ctx, stack, control, {k: s.client_env() for k, s in servers.items()}, plan.latency_log,
                       targets, plan.profile)
        try:
            outcome = Sweep(plan, sdir, hooks, say).run()
        except SettingsError as e:
            say(f"sweep {name}: {e}; stopped (sweep --resume {name} goes on once it is fixed)")
            return 1
    finally:
        for own in servers.values():
            try:
                own.stop()
            except StackError as e:
                say(f"sweep {name}: {e}")
    if outcome.interrupted:
        return 130
    if outcome.failed:
        say(f"sweep {name}: {len(outcome.failed)} runs failed twice and are left out (runs {', '.join(map(str, outcome.failed))}); "
            f"benchwatch sweep --resume {name} tries them again")
        return 1
    say(f"sweep {name}: done; benchwatch report {name} reads it")
    return 0


def variant_target(sweep: str, variant: str) -> str:
    """The ``target`` label of a variant's own server (bindir=, dsn=) while its sweep runs."""
    return f"sweep-{sweep}-{variant}"


def _check_new(args: argparse.Namespace, argv: list[str]) -> None:
    """Everything that can be checked without a server: what was typed."""
    from benchwatch import loadgens
    from benchwatch.experiment import spec

    variants = spec.parse_variants(args.variant)
    if not argv:
        raise spec.SpecError(f"no tool: end with -- {'|'.join(loadgens.titles())} ARGS...")
    generator = loadgens.for_program(argv[0])
    if os.path.basename(argv[0]) not in generator.programs:
        raise spec.SpecError(f"{argv[0]!r} is not a load generator benchwatch knows ({', '.join(loadgens.titles())})")
    if args.repeat < 1:
        raise spec.SpecError(f"--repeat {args.repeat}: at least 1")
    if args.warmup < 0 or args.min_effect < 0:
        raise spec.SpecError("--warmup and --min-effect cannot be negative")
    clients = spec.parse_list("--clients", args.clients)
    if clients:
        given = generator.clients_option(argv[1:])
        if given:
            raise spec.SpecError(f"{given} is in the {generator.title} arguments and --clients sets it per cell: "
                                 "remove one of them")
        try:
            generator.with_clients(argv[1:], 1, 1)
        except NotImplementedError as e:
            raise spec.SpecError(f"--clients: {e}") from None
    if spec.parse_list("--scale", args.scale) or args.reinit:
        if not generator.init_argvs(argv[1:], 1):
            raise spec.SpecError(f"--scale/--reinit: benchwatch does not know how to re-create {generator.title}'s tables "
                                 "from these arguments")
    for a in args.arg:
        spec.parse_arg(a)
    for v in variants:
        spec.check_bindir(v)
        if v.bindir and not args.scale:
            raise spec.SpecError(f"variant {v.name}: a bindir= variant needs --scale (each build's tables are made "
                                 "at that scale, the same for every variant)")


def _new_plan(ctx: Context, stack, name: str, argv: list[str], control):
    """The plan of a new sweep, every variant checked against the running server."""
    from benchwatch import loadgens
    from benchwatch.experiment import plan as plans
    from benchwatch.experiment import spec

    args = ctx.args
    generator = loadgens.for_program(argv[0])
    if stack.engine.name not in generator.engines:
        raise spec.SpecError(f"the stack runs {stack.engine.title}, which {generator.title} cannot drive")
    variants = spec.parse_variants(args.variant)
    targets = [t.name for t in stack.server.targets()]
    originals: dict[str, dict] = {}
    for v in variants:
        if v.target and v.target not in targets:
            raise spec.SpecError(f"variant {v.name}: no target {v.target!r} in this stack (its targets: "
                                 f"{', '.join(targets) or 'none'})")
        if not v.settings:
            continue
        server = control(v)
        if server is None:
            raise spec.SpecError(f"variant {v.name}: benchwatch cannot change the settings of this server")
        facts = server.settings(list(v.settings))
        unknown = [k for k, f in facts.items() if f is None]
        if unknown:
            raise spec.SpecError(f"variant {v.name}: unknown setting{'s' if len(unknown) > 1 else ''} "
                                 f"{', '.join(unknown)} (not a setting of {stack.engine.title})")
        fixed = [k for k, f in facts.items() if f and not f.get("changeable", True)]
        if fixed:
            raise spec.SpecError(f"variant {v.name}: {', '.join(fixed)} cannot be changed on a running server "
                                 f"({facts[fixed[0]].get('context')})")
        if any(f and f.get("restart") for f in facts.values()) and not getattr(server, "can_restart", True):
            raise spec.SpecError(f"variant {v.name}: a setting needs a restart, which benchwatch cannot do on this server")
        for k, f in facts.items():
            originals.setdefault(k, dict(f or {}))
    args_swept = [spec.parse_arg(a) for a in args.arg]
    cells = spec.cells(spec.parse_list("--clients", args.clients), spec.parse_list("--scale", args.scale), args_swept)
    seed = args.seed if args.seed is not None else plans.new_seed()
    runs = plans.order_runs([v.name for v in variants], cells, args.repeat, args.order, seed)
    return plans.Plan(name=name, argv=argv, variants=variants, cells=cells, repeat=args.repeat, order=args.order,
                      seed=seed, runs=runs, engine=stack.engine.name, warmup_s=args.warmup,
                      min_effect_pct=args.min_effect, reinit=args.reinit or "", checkpoint=not args.no_checkpoint,
                      latency_log=args.latency_log, profile=args.profile,
                      originals=originals)


def _warn_debug_builds(ctx: Context, plan, control) -> None:
    seen: set[str] = set()
    for v in plan.variants:
        key = v.bindir or v.dsn or v.target or ""
        if key in seen:
            continue
        seen.add(key)
        server = control(v)
        facts = server.facts() if server is not None else {}
        if facts.get("debug_assertions"):
            ctx.say(f"warning: variant {v.name}'s server ({facts.get('server_version')}) is a build with assertions on "
                    "(debug_assertions): its numbers mean little")


def _hooks(ctx: Context, stack, control, own_env: dict[str, dict[str, str]], latency_log: bool = False,
           targets: dict[str, str] | None = None, profile: bool = False):
    """How the sweep acts: ``own_env`` has the client environment of each variant that runs on a server of
    its own (bindir=, dsn=), every other variant runs on the stack's; ``targets`` the target that serves
    each variant's runs (recorded with each run: its evidence reads that target's series alone)."""
    from benchwatch import loadgens
    from benchwatch.commands.record import record_run
    from benchwatch.experiment.runner import Hooks

    def record(argv, info, v):
        if targets and v.name in targets:
            info = dict(info, target=targets[v.name])
        code, run = record_run(ctx, argv, target_name=v.target, info=info, client_env=own_env.get(v.name),
                               latency_log=latency_log, profile=profile)
        return code, (run.path if run is not None else None)

    def init(argv, v):
        generator = loadgens.for_program(argv[0])
        args, undo = list(argv[1:]), None
        pg_env = own_env.get(v.name) or stack.server.client_env()
        targets = [] if v.name in own_env else stack.server.targets()
        if targets:
            target = next((t for t in targets if t.name == v.target), targets[0])
            args, undo = generator.connect(args, target, ctx.say)
        else:
            args, _ = generator.connect_env(args, pg_env)
        env = dict(os.environ)
        for k, val in pg_env.items():
            env.setdefault(k, val)
        ctx.say(f"re-creating the tables: {' '.join([argv[0], *generator.redact_argv(list(argv[1:]))])}")
        try:
            return subprocess.run([argv[0], *args], env=env, stdout=ctx.stderr, stderr=ctx.stderr,
                                  stdin=subprocess.DEVNULL).returncode
        finally:
            if undo is not None:
                undo()

    def shell(text):
        return subprocess.run(text, shell=True, stdin=subprocess.DEVNULL, stdout=ctx.stderr, stderr=ctx.stderr).returncode

    return Hooks(record=record, control=control, init=init, shell=shell, cores=os.cpu_count() or 1)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="the sweep's name; NAME@HOST: the sweep HOST ran, read from the results database "
                   "(a sweep this host has no directory of is looked for there by NAME alone too)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object instead of writing the bundle")
    p.add_argument("-o", "--out", metavar="DIR", help="where to write the directory sweep-NAME and its .tar.gz "
                   "(default: <state dir>/shares/)")
    p.add_argument("--no-why", action="store_true", help="leave out the server-side evidence (no Prometheus needed)")
    p.add_argument("--baseline", metavar="VARIANT",
                   help="compare every variant against this one (default: the sweep's first variant); the runs are "
                        "the same, only the direction of each verdict changes")
    p.add_argument("--fail-on", metavar="VERDICTS",
                   help="for CI: exit 1 when a variant is slower (slower) or less steady (less-steady) than the "
                        "baseline beyond the sweep's --min-effect, e.g. --fail-on slower,less-steady; 0 otherwise")
    p.add_argument("--comment", metavar="FILE",
                   help="write a Markdown comment for the pull request to FILE: verdicts with intervals, the why, links")
    p.add_argument("--grafana-url", metavar="URL",
                   help="the Grafana the comment links to (default: env BENCHWATCH_GRAFANA_URL, else the stack's own)")


@command("report", help="read an experiment: medians with intervals, verdicts and why; the share bundle or --json",
         arguments=_report_arguments)
def cmd_report(ctx: Context) -> int:
    import json

    from benchwatch.experiment import plan as plans
    from benchwatch.experiment import report

    args, say = ctx.args, ctx.say
    fail_on: tuple[str, ...] = ()
    if args.comment and args.fail_on is None:
        say("--comment writes the gate's comment: give --fail-on slower[,less-steady] with it")
        return 2
    if args.fail_on is not None:
        from benchwatch.gate import sweep as gate

        try:
            fail_on = gate.parse_fail_on(args.fail_on)
        except ValueError as e:
            say(str(e))
            return 2
    stack = ctx.stack
    from benchwatch.results.sweeps import split_name

    name, host = split_name(args.name)
    sdir = plans.SweepDir(os.path.join(sweeps_dir(stack.cfg.state_dir), name))
    local = sdir.exists() and host in (None, stack.cfg.host)
    if local:
        plan, events = sdir.read_plan(), sdir.events()
    else:
        found = _stored_sweep(ctx, stack, name, host)
        if isinstance(found, int):
            return found
        plan, events, host = found.plan, found.events, found.host
    if args.baseline is not None:
        names = [v.name for v in plan.variants]
        if args.baseline not in names:
            say(f"sweep {name} has no variant {args.baseline!r} (its variants: {', '.join(names)})")
            return 2
        # The baseline is the first variant: the report reads the same runs with another one first.
        plan.variants = [plan.variant(args.baseline)] + [v for v in plan.variants if v.name != args.baseline]
    figures = report.collect(plan, events, stack.cfg.runs_dir, fetch=lambda run_id: _fetched_path(stack, run_id))
    why = None if args.no_why else _why(ctx, stack)
    dips_why = None
    if why is not None:
        from benchwatch.evidence import dips_why as dips_evidence

        dips_why = dips_evidence(stack.cfg.url("prometheus"), stack.cfg.runs_dir, stack.engine.name,
                                 path_of=lambda run_id: _run_path(stack, run_id))
    model = report.build(plan, events, figures, why, dips_why)
    profile_groups = _profile_groups(plan, figures, lambda run_id: _run_path(stack, run_id))
    profile_part = None
    if profile_groups is not None:
        from benchwatch.profile import variants

        profile_part = model["profile"] = variants.report_part(profile_groups)
    if not figures:
        say(f"sweep {name}: no finished run yet")
    if local:  # (another host's sweep is that host's to write: its report there writes its verdicts)
        _write_verdicts(ctx, stack, model)
        _write_series(ctx, stack, model)  # (labelled with the baseline: a report against another one adds its own)
    if args.json:
        print(json.dumps(model, indent=2), file=ctx.stdout)
        return _gate(ctx, stack, model, fail_on, [])
    from benchwatch.share import experiment as bundle

    shown = name if local else f"{name}@{host}".replace("/", "_")
    out_dir = os.path.join(os.path.abspath(args.out or os.path.join(stack.cfg.state_dir, "shares")), f"sweep-{shown}")
    try:
        flames = None
        if profile_groups is not None:
            from benchwatch.profile import variants

            flames = variants.flame_graphs(profile_groups, plan.baseline)
        paths = bundle.write_report(model, out_dir, _secrets(stack), flames=flames)
    except bundle.bundle.SecretFound as e:
        # 2, not 1: with --fail-on, 1 means the verdict and nothing else
        say(f"{e} (the report of sweep {shown} is not written: remove the secret from what the sweep recorded)")
        return 2
    # The verdicts and their why on the terminal (stderr: stdout keeps the bundle's paths, as compare's)
    for line in bundle.verdict_lines(model):
        say(line)
    say(f"report of sweep {shown} in {out_dir}")
    if profile_part is not None:
        from benchwatch.profile import variants

        for line in variants.text_lines(profile_part):
            say(line)
    for path in paths:
        print(path, file=ctx.stdout)
    return _gate(ctx, stack, model, fail_on, paths)


def _gate(ctx: Context, stack, model: dict, fail_on: tuple[str, ...], paths: list[str]) -> int:
    """--fail-on's exit code (1: the verdict, said line by line) and --comment's Markdown; without either, 0."""
    from benchwatch import gate
    from benchwatch.gate import sweep

    args = ctx.args
    if fail_on and not model["runs"]["done"]:
        ctx.say(f"gate: sweep {model['sweep']} has no finished run: nothing to judge (not a pass)")
        return 2
    found = sweep.failures(model, fail_on)
    if args.comment:
        links = {"grafana": args.grafana_url or os.environ.get("BENCHWATCH_GRAFANA_URL") or stack.cfg.url("grafana")}
        if paths:
            links["bundle"] = os.path.join(paths[0], "index.html")
            if len(paths) > 1:
                links["archive"] = paths[1]
        text = sweep.markdown(model, fail_on, found,
                              sweep.server_changes(model, stack.cfg.runs_dir, lambda run_id: _run_path(stack, run_id)), links)
        from benchwatch.commands.share import write_comment

        if write_comment(ctx, stack, args.comment, text):
            return 2
    if not fail_on:
        return 0
    for f in found:
        ctx.say(f"gate: {f.text}")
    if found:
        return gate.FAILED
    ctx.say(f"gate: passed (--fail-on {','.join(fail_on)}: no such verdict beyond the minimum effect of "
            f"{model['min_effect_pct']:g} %)")
    return gate.PASSED


def _profile_groups(plan, figures: dict, path_of) -> list[dict] | None:
    """The comparisons of the report's "profile" (a sweep --profile), each variant and cell against the baseline
    with its profiled runs' directories (``path_of(run_id)``); None when no run of the sweep was profiled."""
    paths: dict[tuple[str, int], list[str]] = {}
    for run in plan.runs:
        f = figures.get(run.index)
        if f is not None and f.get("run_id"):
            path = path_of(f["run_id"])
            if os.path.isdir(os.path.join(path, "profile")):
                paths.setdefault((run.variant, run.cell), []).append(path)
    if not paths:
        return None
    groups = [{"variant": v.name, "cell": cell.words if len(plan.cells) > 1 else "",
               "baseline_runs": paths.get((plan.baseline, ci), []), "variant_runs": paths.get((v.name, ci), [])}
              for v in plan.variants[1:] for ci, cell in enumerate(plan.cells)]
    return groups


def _write_verdicts(ctx: Context, stack, model: dict) -> None:
    """The report's verdicts to the results database's sweep_verdicts, where there is one (said, not fatal,
    when it is down: the next report writes them)."""
    import json

    from benchwatch.experiment.verdicts import verdict_rows
    from benchwatch.results.store import write_to
    from benchwatch.share.bundle import carries_secret

    target = stack.results_target_running()
    if target is None:
        return
    rows = verdict_rows(model)
    whole: dict | None = model
    if carries_secret(json.dumps(model), _secrets(stack)):  # as the bundle refuses one: the verdicts alone
        whole = None
        ctx.say("the report is not written whole to the results database: it would carry one of the stack's "
                "secrets (its verdicts are)")
    error = write_to(target, lambda store: store.write_verdicts(
        stack.cfg.host, model["sweep"], model["baseline"], rows, whole))
    if error:
        ctx.say(f"could not write the report's verdicts to {error} (the Experiment dashboard's SQL tables will "
                "not show them)")


def _write_series(ctx: Context, stack, model: dict) -> None:
    """The report's figures to Prometheus for the Experiment dashboard (said, not fatal, when it is down)."""
    import time

    from benchwatch.experiment.series import report_samples
    from benchwatch.sink.remote_write import RemoteWriteError, RemoteWriter

    if not stack.healthy("prometheus"):
        return
    try:
        RemoteWriter(stack.cfg.remote_write_url).send(report_samples(model, int(time.time() * 1000)))
    except (RemoteWriteError, OSError) as e:
        ctx.say(f"could not write the report's series to Prometheus: {e} (the Experiment dashboard will not show it)")


def _secrets(stack) -> list[str]:
    from benchwatch.commands.share import _secrets as stack_secrets

    return stack_secrets(stack)


def _why(ctx: Context, stack):
    """The evidence of each difference from the stack's Prometheus, or None (said) when it is not up."""
    from benchwatch.evidence import experiment_why

    # (With a long-term store, the runs the stack's Prometheus lacks are read from it: benchwatch.query.longterm.)
    if not stack.healthy("prometheus") and not stack.cfg.long_term_query_url:
        ctx.say("Prometheus is not up: the report has no server-side why (benchwatch up, then report again)")
        return None
    from benchwatch.experiment.figures import run_figures

    # Another host's runs: the copies report.collect fetched from the results database (their series from the
    # long-term store, where this Prometheus has none).
    return experiment_why(stack.cfg.url("prometheus"), stack.cfg.runs_dir, stack.engine.name, run_figures,
                          path_of=lambda run_id: _run_path(stack, run_id))


def _run_path(stack, run_id: str) -> str:
    """Where a run of the sweep is here: the runs directory, else the copy fetched from the results database
    (report.collect fetched every run it lacked first)."""
    from benchwatch.commands.share import run_path

    return run_path(stack, run_id, fetch=False)


def _stored_sweep(ctx: Context, stack, name: str, host: str | None):
    """A sweep this host has no directory of, from the results database (``NAME`` or ``NAME@HOST``): what
    experiment.publish reads back of its row, or the exit code, said why (2: none such, or which host is meant
    is not said; 1: the database could not be read)."""
    from benchwatch.experiment.publish import stored
    from benchwatch.results.dsn import public
    from benchwatch.results.store import Store

    here = sweeps_dir(stack.cfg.state_dir)
    target = stack.cfg.results_target()
    if target is None:
        ctx.say(f"no sweep {name!r} in {here} (and no results database to look in)")
        return 2
    try:
        with Store(target) as store:
            hosts = store.sweep_hosts(name)
            chosen = [h for h in hosts if host is None or h[0] == host]
            row = store.read_sweep(chosen[0][0], name) if len(chosen) == 1 else None
    except Exception as e:  # psycopg.OperationalError (down), RuntimeError (a newer schema)
        ctx.say(f"no sweep {name!r} in {here}, and the results database ({public(target)}) could not be read: "
                f"{type(e).__name__}: {str(e).strip()[:300]}")
        return 1
    if not chosen:
        where = f" of host {host!r}" if host is not None else ""
        others = f" (hosts with a sweep {name}: {', '.join(h[0] for h in hosts)})" if hosts else ""
        ctx.say(f"no sweep {name!r} in {here}, nor{where} in the results database{others}")
        return 2
    if len(chosen) > 1:
        ctx.say(f"sweep {name} was run on {len(chosen)} hosts ({', '.join(f'{h} ({state})' for h, state, _ in chosen)}): "
                f"say which, e.g. benchwatch report {name}@{chosen[0][0]}")
        return 2
    if row is None:  # deleted between the two reads
        ctx.say(f"no sweep {name!r} in {here}, nor in the results database")
        return 2
    found = stored(row)
    ctx.say(f"sweep {name} of host {found.host}, from the results database ({found.state}, "
            f"{row.get('runs_done')}/{row.get('runs_planned')} runs)")
    return found


def _fetched_path(stack, run_id: str) -> str | None:
    """A run of the sweep whose directory is gone here, from the results database (its figures and stability
    profile as recorded), or None."""
    from benchwatch.commands.share import from_results

    found = from_results(stack, run_id)
    return found.path if found is not None else None
