"""The benchwatch command."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys

from benchwatch.stack.config import DEFAULT_PORTS, ENGINES, load_config
from benchwatch.stack.native import Stack, StackError


def say(message: str) -> None:
    """benchwatch's own messages go to stderr, prefixed, so pgbench's output stays as it is."""
    print(f"benchwatch: {message}", file=sys.stderr, flush=True)


def _add_stack_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help="where the stack keeps data, logs and runs (env BENCHWATCH_STATE_DIR)")
    p.add_argument("--pg-dsn", help="use this existing PostgreSQL instead of the embedded one (env BENCHWATCH_PG_DSN; prefer a pgpass file to a password here)")
    p.add_argument("--engine", choices=ENGINES, help="the database the stack runs and watches (default postgres; env BENCHWATCH_ENGINE)")
    p.add_argument("--mysql-defaults-file", help="watch this existing MySQL/MariaDB, whose [client] section (a my.cnf-style file) says how to connect; implies --engine mariadb")
    p.add_argument("--instances", type=int, help="with --engine mariadb: embedded MariaDB instances to run side by side, "
                   "targets mariadb-1..N, each with its own port, data directory and mysqld_exporter (default 1: target local); "
                   "with demo --shards: PostgreSQL instances holding the shards (default 4)")
    for component, port in DEFAULT_PORTS.items():
        p.add_argument(f"--{component.replace('_', '-')}-port", type=int, dest=f"port_{component}",
                       help=f"port of {component} on 127.0.0.1 (default {port})")


def _stack(args: argparse.Namespace) -> Stack:
    ports = {c: port for c in DEFAULT_PORTS if (port := getattr(args, f"port_{c}", None))}
    cfg = load_config(getattr(args, "state_dir", None), ports, getattr(args, "pg_dsn", None),
                      getattr(args, "engine", None), getattr(args, "mysql_defaults_file", None),
                      getattr(args, "instances", None))
    return Stack(cfg, out=say)


def cmd_up(args: argparse.Namespace) -> int:
    stack = _stack(args)
    try:
        status = stack.up()
    except StackError as e:
        say(str(e))
        return 1
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    return 0


def _print_status(status: dict) -> None:
    pg = status["postgres"]
    print(f"state dir   {status['state_dir']}")
    mysql = status.get("mysql")
    if mysql:
        print(f"mariadb     {mysql['defaults_file']}" + (f"  pid {mysql.get('pid')}  log {mysql['log_file']}" if mysql["embedded"] else "  (external)"))
    else:
        print(f"postgres    {pg['dsn']}" + (f"  pid {pg.get('pid')}  log {pg['log_file']}" if pg.get("embedded") else "  (external)")
              + (f"  restarted {pg['restarts']}x" if pg.get("restarts") else ""))
    for name, c in status["components"].items():
        state = "healthy" if c["healthy"] else ("running, not healthy" if c["pid"] else "not running")
        restarts = f"  restarted {c['restarts']}x" if c.get("restarts") else ""
        print(f"{name:<20} {c['url']:<26} pid {c['pid'] or '-':<8} {state}{restarts}")
    if not status["grafana"]["installed"]:
        print(f"grafana     {status['grafana']['hint']}")
    print(f"runs        {status['runs_dir']}")


def cmd_down(args: argparse.Namespace) -> int:
    from benchwatch.stack.shards import stop_shards

    stack = _stack(args)
    # The sharded demo's instances and their agent first: the agent pushes to the stack's Prometheus.
    stopped = stop_shards(stack.cfg.state_dir) + stack.down()
    say("stopped " + (", ".join(stopped) if stopped else "nothing (no component was running)"))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    stack = _stack(args)
    status = stack.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        _print_status(status)
    healthy = (all(c["healthy"] for c in status["components"].values()) and status["postgres"].get("healthy", True)
               and status.get("mysql", {}).get("healthy", True))
    return 0 if healthy else 1


def cmd_run(args: argparse.Namespace) -> int:
    from benchwatch import loadgens
    from benchwatch.alerting.printer import AlertPrinter
    from benchwatch.record.stream import LineSafeStream
    from benchwatch.record.wrapper import run_benchmark

    argv = list(args.pgbench)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        say("usage: benchwatch run -- pgbench [ARGS...]")
        return 2
    stack = _stack(args)
    if not stack.healthy("benchwatch_exporter"):
        say("the exporter is not running: the run is saved but not sent to Prometheus "
            "(start the stack with benchwatch up, or import the run later with benchwatch import)")
    have_stack = os.path.exists(stack.cfg.stack_file)
    pg_env = stack.pg_env() if have_stack and stack.cfg.engine == "postgres" else {}
    server_facts = None
    info: dict[str, str] = {}
    if have_stack and stack.cfg.engine == "mariadb" and loadgens.for_program(argv[0]).engine_of(argv[1:]) == "mysql":
        target = stack.mysql_target_named(args.target) if args.target else stack.mysql
        if target is None:
            say(f"no MariaDB target {args.target!r} in this stack (its targets: "
                f"{', '.join(t.name for t in stack.mysql_targets())})")
            return 2
        argv, server_facts = _mysql_connection(target, argv)
        info["target"] = target.name  # the instance this run drives (benchmark_run_info's target)
    if args.experiment:
        info["experiment"] = args.experiment
    terminal = LineSafeStream(sys.stderr.buffer)
    watches = []

    def started(run) -> None:
        say(f"run {run.run_id}: output saved in {run.path}")
        _record_targets(stack, run)
        if stack.healthy("alertmanager"):
            # Firing and resolved alerts of this run, one line each, between pgbench's lines.
            watches.append(AlertPrinter(run.run_id, lambda line: terminal.say(f"benchwatch: {line}"),
                                      alertmanager_url=stack.cfg.url("alertmanager")).start())

    try:
        code, run = run_benchmark(argv, runs_dir=stack.cfg.runs_dir, pg_env=pg_env, notice=say, on_start=started,
                                latency_log=args.latency_log, stderr_sink=terminal, server_facts=server_facts,
                                info=info)
    finally:
        for watch in watches:
            watch.stop()
        terminal.close()
    _record_targets(stack, run, since=run.read_meta().get("started_at"))
    say(f"run {run.run_id} ended with exit code {code}")
    return code


def _record_targets(stack: Stack, run, since: float | None = None) -> None:
    """meta.json["targets"]: the databases watched while the run ran (at its start, and any seen up to its end)."""
    from benchwatch.query import targets
    from benchwatch.query.prometheus import PrometheusError

    if not stack.healthy("prometheus"):
        return
    try:
        seen = targets.watched(stack.cfg.url("prometheus"), since=since)
    except PrometheusError as e:
        say(f"could not list the watched targets: {e}")
        return
    meta = run.read_meta()
    run.update_meta(targets=targets.merge_watched(meta.get("targets") or [], seen))


def _mysql_connection(target, argv: list[str]) -> tuple[list[str], dict]:
    """sysbench pointed at a MariaDB of the stack through its 0600 --config-file; the server's facts for meta.json."""
    from benchwatch.loadgens.sysbench.connect import sysbench_connection

    if not os.path.exists(target.sysbench_file):
        return argv, {}
    args, added = sysbench_connection(argv[1:], target.sysbench_file)
    if added:
        say(f"added {' '.join(added)} to the sysbench arguments (the connection to the stack's MariaDB {target.name}; "
            "the password stays in that 0600 file)")
    facts = target.server_facts()
    return [argv[0], *args], facts


def cmd_attach(args: argparse.Namespace) -> int:
    from benchwatch.record.wrapper import attach_stream

    stack = _stack(args)
    pgbench_args = shlex.split(args.pgbench_args) if args.pgbench_args else None
    if args.sysbench_args:
        pgbench_args = shlex.split(args.sysbench_args)
    run = attach_stream(sys.stdin.fileno(), runs_dir=stack.cfg.runs_dir,
                        echo=None if args.quiet else sys.stdout.buffer,
                        pgbench_args=pgbench_args, interval=args.interval, tool=args.tool)
    say(f"run {run.run_id}: output saved in {run.path}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from benchwatch.model import replay
    from benchwatch.record import importer, rundir
    from benchwatch.sink.openmetrics import write_openmetrics
    from benchwatch.sink.remote_write import RemoteWriteError, RemoteWriter

    try:
        data, recorded_start = importer.read_source(args.file)
    except OSError as e:
        say(f"cannot read {args.file}: {e.strerror or e}")
        return 2
    start: float | None
    if args.start:
        try:
            start = importer.parse_time(args.start)
        except ValueError:
            say(f"--start {args.start!r} is not a time: use RFC 3339 like 2016-01-06T10:00:00Z or Unix seconds")
            return 2
    elif recorded_start is not None:
        start = recorded_start
    else:
        start, note = importer.default_start(args.file, data)
        if note:
            say(note)
    run_id = args.run_id or rundir.new_run_id(start)
    model, samples = replay.replay_output(data, run_id, start)
    counts = f"{model.progress_lines} progress lines, {len(samples)} samples, {model.unparsed_lines} unparsed lines"
    if args.openmetrics:
        write_openmetrics(samples, sys.stdout, types={k: v[0] for k, v in replay.run_metrics().items()},
                          help={k: v[1] for k, v in replay.run_metrics().items()})
        say(f"run {run_id}: {counts}")
        return 0
    stack = _stack(args)
    try:
        RemoteWriter(stack.cfg.remote_write_url).send(samples + model.end_markers())
    except (RemoteWriteError, OSError) as e:
        say(f"could not write to Prometheus at {stack.cfg.remote_write_url}: {e} (is the stack up? benchwatch up)")
        return 1
    run = importer.save_import(stack.cfg.runs_dir, run_id, args.file, data, start, model)
    say(f"imported run {run_id}: {counts}; saved in {run.path}")
    print(run_id)
    return 0


# What picks the server a libpq client reaches: cleared so that psql/env mean
# the stack's server whatever the shell had (PGPASSWORD would beat the pgpass file).
# PGSSLMODE is left alone: clearing a user's "require" would weaken it.
PG_TARGET_VARS = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE", "PGPASSWORD", "PGPASSFILE", "PGSERVICE")


def _stack_pg_env(stack: Stack) -> dict[str, str] | None:
    """The stack's PG* variables (password in the pgpass file), or None with the reason said."""
    if not os.path.exists(stack.cfg.stack_file):
        say(f"no stack in {stack.cfg.state_dir}: start it with benchwatch up")
        return None
    return stack.pg_env()


def cmd_psql(args: argparse.Namespace) -> int:
    from benchwatch.stack.native import pg_bindir

    stack = _stack(args)
    pg_env = _stack_pg_env(stack)
    if pg_env is None:
        return 1
    bindir = pg_bindir()
    psql = os.path.join(bindir, "psql") if bindir and os.path.exists(os.path.join(bindir, "psql")) else shutil.which("psql")
    if not psql:
        say("psql is not installed: apt-get install postgresql-client")
        return 127
    argv = list(args.args)
    if argv and argv[0] == "--":
        argv = argv[1:]
    env = {k: v for k, v in os.environ.items() if k not in PG_TARGET_VARS}
    env.update(pg_env)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(psql, [psql, *argv], env)  # psql owns the terminal; its exit code is ours


def shell_exports(pg_env: dict[str, str]) -> str:
    """POSIX shell lines that set exactly these PG* variables and clear the other ones that pick a server."""
    lines = [f"export {key}={shlex.quote(value)}" for key, value in sorted(pg_env.items())]
    cleared = [k for k in PG_TARGET_VARS if k not in pg_env]
    if cleared:
        lines.append("unset " + " ".join(cleared))
    return "\n".join(lines) + "\n"


def cmd_env(args: argparse.Namespace) -> int:
    pg_env = _stack_pg_env(_stack(args))
    if pg_env is None:
        return 1
    sys.stdout.write(shell_exports(pg_env))
    return 0


def _passthrough(argv: list[str], command: str) -> list[str]:
    """For `command`, benchwatch's stack options come first; everything after them is the program's.

    argparse cannot leave options it does not know (psql's -c, -At) to a REMAINDER
    positional, so a "--" is put where benchwatch's options end."""
    if not argv or argv[0] != command:
        return argv
    probe = argparse.ArgumentParser(add_help=False)
    _add_stack_options(probe)
    takes_value = {o for a in probe._actions for o in a.option_strings}  # each takes one value
    i = 1
    while i < len(argv):
        if argv[i] in takes_value:
            i += 2
        elif "=" in argv[i] and argv[i].split("=", 1)[0] in takes_value:
            i += 1
        else:
            break
    if i < len(argv) and argv[i] == "--":
        return argv
    return argv[:i] + ["--"] + argv[i:]


def cmd_explain(args: argparse.Namespace) -> int:
    from benchwatch.explain import report
    from benchwatch.record import rundir
    from benchwatch.share.collect import explain_series

    stack = _stack(args)
    run = rundir.find_run(stack.cfg.runs_dir, args.run_id)
    if run is None:
        say(f"no run {args.run_id} in {stack.cfg.runs_dir}" if args.run_id else f"no run yet in {stack.cfg.runs_dir}")
        return 2
    prometheus = None if args.source == "raw" else (args.prometheus or stack.cfg.url("prometheus"))
    try:
        series, meta, run_id, used = explain_series(run, prometheus, args.source)
    except (RuntimeError, OSError) as e:
        say(f"explain {run.run_id}: {e}")
        return 1
    result = report.explain(series, meta, run_id, ongoing=meta.get("state") == rundir.RUNNING)
    result["source"] = used
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(report.text_table(result))
    return 0


def cmd_targets(args: argparse.Namespace) -> int:
    from benchwatch.query import targets
    from benchwatch.query.prometheus import PrometheusError

    stack = _stack(args)
    base = stack.cfg.url("prometheus")
    try:
        listed = targets.list_targets(base)
        series = targets.series_counts(base, args.window) if args.series else None
    except PrometheusError as e:
        say(f"cannot ask Prometheus at {base}: {e} (is the stack up? benchwatch up)")
        return 1
    if args.json:
        out: dict = {"targets": listed}
        if series is not None:
            out["series"] = series
        print(json.dumps(out, indent=2))
    else:
        print(f"{'TARGET':<16} {'HOST':<20} {'INSTANCE':<24} {'ENGINE':<11} {'LAST SAMPLE':>11}  HEALTHY")
        for t in listed:
            age = "-" if t["last_sample_age_s"] is None else f"{t['last_sample_age_s']:.1f}s ago"
            print(f"{t['target']:<16} {t['host'] or '-':<20} {t['instance'] or '-':<24} {t['engine'] or '-':<11} "
                  f"{age:>11}  {'yes' if t['healthy'] else 'NO'}")
        if series is not None:
            b = series["budget"]
            print(f"\nseries within {series['window']} (budget: a target <= {b['target']}, a run <= {b['run']})")
            for kind in ("targets", "runs"):
                for name, c in series[kind].items():
                    print(f"{kind[:-1]:<7} {name:<32} {c['series']:>6}{'' if c['within_budget'] else '  OVER BUDGET'}")
    if not listed:
        say(f"no target has sent a sample to {base} within 24 h")
    for t in listed:
        if not t["healthy"]:
            say(f"target {t['target']} on {t['host'] or '?'} is not healthy: {'; '.join(t['problems'])}")
    return 0 if listed and all(t["healthy"] for t in listed) else 1


def _agent(args: argparse.Namespace):
    from benchwatch.stack.agent import Agent, default_agent_state_dir, load_agent_config

    state_dir = os.path.abspath(args.state_dir or default_agent_state_dir())
    cfg = load_agent_config(state_dir)
    if cfg is None:
        say(f"no agent in {state_dir}: start one with benchwatch agent up --central URL --name NAME")
        return None
    return Agent(cfg, out=say)


def _print_agent_status(status: dict) -> None:
    print(f"agent       {status['name']} on {status['host']} -> {status['central']}")
    print(f"state dir   {status['state_dir']}")
    for t in status["targets"]:
        print(f"target      {t['target']:<16} {t['server']:<24} log {t['server_log'] or '-'}")
    for name, c in status["components"].items():
        state = "healthy" if c["healthy"] else ("running, not healthy" if c["pid"] else "not running")
        print(f"{name:<28} 127.0.0.1:{c['port'] or '-':<6} pid {c['pid'] or '-':<8} {state}")
    rw = status.get("remote_write")
    if rw and rw.get("lag_s") is not None:
        print(f"remote write  {rw['lag_s']:.1f} s behind, {rw['samples_pending'] or 0:.0f} samples pending")


def cmd_agent(args: argparse.Namespace) -> int:
    from benchwatch.stack import agent

    if args.agent_command == "up":
        auth = agent.CentralAuth(args.basic_auth_user, args.password_file, args.bearer_token_file)
        try:
            a = agent.start_agent(args.state_dir or agent.default_agent_state_dir(), name=args.name,
                                  central_url=args.central, postgres=args.postgres, server_logs=args.server_log,
                                  targets=args.target, host=args.host, auth=auth, out=say)
        except StackError as e:
            say(str(e))
            return 1
        status = a.status()
        print(json.dumps(status, indent=2)) if args.json else _print_agent_status(status)
        return 0
    a = _agent(args)
    if a is None:
        return 1
    if args.agent_command == "down":
        stopped = a.down()
        say("stopped " + (", ".join(stopped) if stopped else "nothing (no component was running)"))
        return 0
    status = a.status()
    print(json.dumps(status, indent=2)) if args.json else _print_agent_status(status)
    return 0 if all(c["healthy"] for c in status["components"].values()) else 1


def _add_agent_parser(sub) -> None:
    p = sub.add_parser("agent", help="on a database host: watch its PostgreSQL instances and push to the central stack")
    asub = p.add_subparsers(dest="agent_command", required=True)
    up = asub.add_parser("up", help="start the agent (idempotent)")
    up.add_argument("--central", required=True, help=f"the central Prometheus, e.g. http://BENCH_HOST:{DEFAULT_PORTS['prometheus']}")
    up.add_argument("--name", required=True, help="this agent's name: the target label (with one instance)")
    up.add_argument("--host", help="the host label (default: this machine's host name)")
    up.add_argument("--postgres", action="append", default=[], metavar="DSN",
                    help="a PostgreSQL instance to watch (libpq DSN; a password is kept in a 0600 file); repeatable")
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
    p.set_defaults(func=cmd_agent)


def cmd_demo(args: argparse.Namespace) -> int:
    from benchwatch import demo

    stack = _stack(args)
    extra = args.pgbench_args[1:] if args.pgbench_args[:1] == ["--"] else args.pgbench_args
    if stack.cfg.engine == "mariadb":
        if args.shards is not None or extra:
            say("--shards and extra pgbench arguments are for the PostgreSQL demo")
            return 2
        return demo.demo_mariadb(stack, instances=stack.cfg.mariadb_instances, duration=args.duration or 20, say=say)
    if args.shards is None:
        if extra:
            say("extra pgbench arguments are for demo --shards")
            return 2
        return demo.demo(stack, duration=args.duration or 40, say=say)
    return demo.demo_shards(stack, shards=args.shards, instances=args.instances or 4, duration=args.duration or 30,
                            clients=args.clients, jobs=args.jobs, script=args.script, extra_args=extra, say=say)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchwatch", description="Live observability for pgbench runs.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("up", help="start the native stack (idempotent)")
    _add_stack_options(p)
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the native stack (data is kept)")
    _add_stack_options(p)
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("status", help="components, URLs, ports, pids, health")
    _add_stack_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("run", help="run pgbench under observation: benchwatch run -- pgbench ARGS")
    _add_stack_options(p)
    p.add_argument("--latency-log", action="store_true",
                   help="add -l so the per-transaction log gives latency percentiles (p50/p95/p99)")
    p.add_argument("--target", help="sysbench on a stack of several MariaDB instances: the one to drive (mariadb-1..N)")
    p.add_argument("--experiment", help="a name shared by runs observed as one experiment (e.g. one per instance, side "
                   "by side): benchmark_run_info's experiment label; the sysbench dashboard sums them")
    p.add_argument("pgbench", nargs=argparse.REMAINDER, help="-- pgbench ARGS...")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("attach", help="observe a pgbench (or, with --tool sysbench, a sysbench) started elsewhere: "
                       "pgbench ... 2>&1 | benchwatch attach")
    _add_stack_options(p)
    p.add_argument("--tool", choices=("pgbench", "sysbench"), default="pgbench",
                   help="the load generator whose output comes on stdin (default pgbench)")
    p.add_argument("--interval", type=float, help="pgbench's -P (sysbench's --report-interval), if not 1 and not learnt from the lines")
    p.add_argument("--pgbench-args", help="the pgbench arguments of that run, for the run's metadata")
    p.add_argument("--sysbench-args", help="with --tool sysbench: the sysbench arguments of that run, for the run's metadata")
    p.add_argument("--quiet", action="store_true", help="do not echo the stream to stdout")
    p.set_defaults(func=cmd_attach)

    p = sub.add_parser("import", help="backfill a saved pgbench output into Prometheus")
    _add_stack_options(p)
    p.add_argument("file", help="a saved pgbench output (stdout and stderr together), or a run directory")
    p.add_argument("--start", help="when the run started (RFC 3339, e.g. 2016-01-06T10:00:00Z, or Unix seconds)")
    p.add_argument("--openmetrics", action="store_true", help="print OpenMetrics text for promtool tsdb create-blocks-from openmetrics instead")
    p.add_argument("--run-id", help="the run id to use (default: from the start time)")
    p.set_defaults(func=cmd_import)

    # Listed here; main() hands its arguments to the daemon, which parses its own (collector flags included).
    sub.add_parser("exporter", add_help=False, help="the exporter daemon (started by up; benchwatch exporter --help)")
    sub.add_parser("supervise", add_help=False, help="the supervisor that restarts dead components (started by up)")

    p = sub.add_parser("explain", help="every TPS dip of a run with its most likely cause (docs/explain.md)")
    _add_stack_options(p)
    p.add_argument("run_id", nargs="?", help="the run (default: the latest)")
    p.add_argument("--json", action="store_true", help="one JSON object: dips, causes, evidence, scores")
    p.add_argument("--source", choices=("auto", "prometheus", "raw"), default="auto",
                   help="auto: the stack's Prometheus if it has the run, else the run directory (pgbench output, series/*.csv)")
    p.add_argument("--prometheus", metavar="URL", help="the Prometheus to read (default: the stack's)")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("demo", help="fresh machine: install, start the stack, run a short pgbench, print a summary; "
                       "--engine mariadb --instances 4: four MariaDB instances, four sysbench runs side by side")
    _add_stack_options(p)
    p.add_argument("--duration", type=int, help="seconds of pgbench (default 40; 30 with --shards), or of each sysbench "
                   "run with --engine mariadb (default 20)")
    p.add_argument("--shards", type=int, metavar="N",
                   help="instead: N shard databases (a power of 2) behind a PL/Proxy proxy database, pgbench calling it")
    p.add_argument("--clients", type=int, default=8, help="with --shards: pgbench -c (default 8)")
    p.add_argument("--jobs", type=int, default=2, help="with --shards: pgbench -j (default 2)")
    p.add_argument("--script", choices=("update", "lookup"), default="update",
                   help="with --shards: each transaction updates (default) or looks up one account on its shard")
    p.add_argument("pgbench_args", nargs=argparse.REMAINDER, help="with --shards: -- more pgbench arguments (e.g. -R 2000)")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("psql", add_help=False, help="psql connected to the stack's server: benchwatch psql [PSQL ARGS]")
    _add_stack_options(p)
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed to psql unchanged")
    p.set_defaults(func=cmd_psql)

    p = sub.add_parser("targets", help="the watched databases: host, instance, engine, last sample age, healthy")
    _add_stack_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object for scripts")
    p.add_argument("--series", action="store_true", help="also count the series of each target and each run (the series budget)")
    p.add_argument("--window", default="1h", help="the window --series counts series in (default 1h)")
    p.set_defaults(func=cmd_targets)
    _add_agent_parser(sub)

    p = sub.add_parser("env", help='PG* variables of the stack\'s server, for eval "$(benchwatch env)"')
    _add_stack_options(p)
    p.set_defaults(func=cmd_env)
    from benchwatch.share.commands import register as register_snapshot
    register_snapshot(sub, _add_stack_options, _stack)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["exporter"]:
        from benchwatch.exporter import server

        return server.main(argv[1:])
    if argv[:1] == ["supervise"]:
        from benchwatch.stack import supervisor

        return supervisor.main(argv[1:])
    parser = build_parser()
    argv = _passthrough(argv, "psql")
    args = parser.parse_args(argv)
    return args.func(args)
