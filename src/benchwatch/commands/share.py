"""``benchwatch snapshot`` and ``benchwatch compare``: shareable results (the work itself is ``benchwatch.share``)."""

from __future__ import annotations

import argparse
import os

from benchwatch.commands import Context, command
from benchwatch.record import rundir


def _snapshot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", help="the run (default: the latest)")
    p.add_argument("--run-dir", help="a run directory to snapshot instead of a run of the stack (e.g. the raw/ folder of a snapshot)")
    _common(p)
    p.add_argument("--upload", metavar="URL", help="also post the snapshot to this Grafana's snapshot API "
                   "(token from $GRAFANA_TOKEN) and print the snapshot URL")
    p.add_argument("--expires", type=int, default=0, help="with --upload: seconds until Grafana deletes the snapshot (default never)")
    p.add_argument("--name", help="the snapshot's name (default: TOOL run RUN_ID, e.g. pgbench run RUN_ID)")


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids (or run directories); the first is the baseline")
    _common(p)
    p.add_argument("--by", metavar="LABEL", help="a sweep: TPS against this run label (clients, threads, scale, "
                   "server_version, or any benchmark_run_info label), one line per variant")
    p.add_argument("--variant", metavar="LABEL", help="with --by: the label that tells variants apart "
                   "(default: the pgbench or sysbench arguments without the --by option, or --names)")
    p.add_argument("--names", help="comma-separated names for the runs, in order (e.g. HEAD,PATCH); "
                   "with --by, runs of the same name form one variant")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--out", metavar="DIR", help="where to write the directory and the .tar.gz "
                   "(default: <state dir>/shares/)")
    p.add_argument("--source", choices=("auto", "prometheus", "raw"), default="auto",
                   help="auto: the stack's Prometheus if it still has the run, else rebuild from the run directory")
    p.add_argument("--prometheus", metavar="URL", help="the Prometheus to read (default: the stack's)")


def _prometheus(args, stack) -> str | None:
    if args.source == "raw":
        return None
    return args.prometheus or stack.cfg.url("prometheus")


def _secrets(stack) -> list[str]:
    out = []
    try:
        server_secrets = stack.server.secret_values()
    except (OSError, ValueError):
        server_secrets = []
    for value in (*server_secrets, os.environ.get("GRAFANA_TOKEN")):
        if value:
            out.append(value)
    return out


def write_comment(ctx, stack, path: str, text: str) -> int:
    """A gate's Markdown comment (report --comment, history --comment) written whole, or refused when it
    would carry one of the stack's secrets: 0, or 2 said why."""
    from benchwatch import gate
    from benchwatch.share.bundle import carries_secret

    if carries_secret(text, _secrets(stack)):
        ctx.say(f"the comment would contain a secret (a password or token): {path} is not written")
        return 2
    try:
        gate.write_comment(path, text)
    except OSError as e:
        ctx.say(f"cannot write the comment to {path}: {e}")
        return 2
    ctx.say(f"comment for the pull request in {path}")
    return 0


def _out_dir(args, stack) -> str:
    # Not the current directory: that is wherever the user happens to be (often a source tree).
    out = args.out or os.path.join(stack.cfg.state_dir, "shares")
    os.makedirs(out, exist_ok=True)
    return out


def from_results(stack, run_id: str) -> rundir.RunDir | None:
    """A run this host does not have, from the results database (docs/results.md), materialized under
    ``<state dir>/results/fetched/`` (not the runs directory: the exporter does not follow it, and this host's
    history does not list it); None without a database, while it is down, or when it has no such run."""
    from benchwatch.results.store import fetch_run

    return fetch_run(stack.cfg.results_target(), run_id, os.path.join(stack.cfg.state_dir, "results", "fetched"))


def run_path(stack, run_id: str, fetch: bool = True) -> str:
    """Where a run is here: its directory in the runs directory, else the copy already fetched from the results
    database, else (``fetch``) a copy fetched now; a path without a run in it when there is none (its readers
    then know nothing of it, which is what they say)."""
    local = os.path.join(stack.cfg.runs_dir, run_id)
    if os.path.isdir(local):
        return local
    copy = os.path.join(stack.cfg.state_dir, "results", "fetched", run_id)
    if os.path.isfile(os.path.join(copy, rundir.META)) or not fetch:
        return copy
    found = from_results(stack, run_id)
    return found.path if found is not None else local


def _find(stack, ref: str | None) -> rundir.RunDir | None:
    if ref and os.path.isfile(os.path.join(ref, rundir.META)):
        return rundir.RunDir(os.path.abspath(ref))
    found = rundir.find_run(stack.cfg.runs_dir, ref)
    if found is None and ref:  # a run of another host
        found = from_results(stack, ref)
    return found


@command("snapshot", help="a shareable snapshot of a run: Grafana snapshot JSON, HTML, PNG, CSV, summary",
         arguments=_snapshot_arguments)
def cmd_snapshot(ctx: Context) -> int:
    from benchwatch.share import bundle, collect, grafana_snapshot

    args, stack, _say = ctx.args, ctx.stack, ctx.say
    run = _find(stack, args.run_dir) if args.run_dir else _find(stack, args.run_id)
    if run is None:
        _say(f"no run {args.run_id or args.run_dir} in {stack.cfg.runs_dir}" if (args.run_id or args.run_dir)
             else f"no run yet in {stack.cfg.runs_dir}")
        return 2
    try:
        c = collect.collect(run, _prometheus(args, stack), args.source, say=_say)
    except (RuntimeError, OSError) as e:
        _say(f"snapshot of {run.run_id} failed: {e}")
        return 1
    out = _out_dir(args, stack)
    try:
        directory, archive, body = bundle.write_snapshot(c, run, out, _secrets(stack))
    except bundle.SecretFound as e:
        _say(str(e))
        return 1
    _say(f"snapshot of run {c.run_id} from {'Prometheus' if c.source == 'prometheus' else 'the run directory'}, in {out}")
    print(directory, file=ctx.stdout)
    print(archive, file=ctx.stdout)
    if args.upload:
        if args.name:
            body["name"] = args.name
        body["expires"] = args.expires
        try:
            answer = grafana_snapshot.upload(args.upload, body)
        except grafana_snapshot.UploadError as e:
            _say(str(e))
            return 1
        print(answer["url"], file=ctx.stdout)
        if answer.get("deleteUrl"):
            _say(f"to delete it: {answer['deleteUrl']}")
    return 0


@command("compare", help="compare runs: TPS curves overlaid, summaries side by side, sweeps", arguments=_compare_arguments)
def cmd_compare(ctx: Context) -> int:
    from benchwatch.share import collect, compare

    args, stack, _say = ctx.args, ctx.stack, ctx.say
    if len(args.runs) < 2:
        _say("compare needs at least two runs")
        return 2
    found = []
    for ref in args.runs:
        run = _find(stack, ref)
        if run is None:
            _say(f"no run {ref} in {stack.cfg.runs_dir}")
            return 2
        found.append(run)
    try:
        names = compare.parse_names(args.names, len(found))
    except ValueError as e:
        _say(str(e))
        return 2
    collected = []
    for run in found:
        try:
            collected.append(collect.collect(run, _prometheus(args, stack), args.source, say=_say))
        except (RuntimeError, OSError) as e:
            _say(f"run {run.run_id}: {e}")
            return 1
    named = names is not None
    labels = names or compare.default_names(collected)
    if named and len(set(labels)) < len(labels):
        # Several runs per name (a sweep of HEAD and PATCH): tell them apart in the side-by-side table.
        labels = [f"{n} {args.by}={compare.run_labels(c.summary).get(args.by, '?')}" if args.by else f"{n} #{i + 1}"
                  for i, (n, c) in enumerate(zip(labels, collected))]
        variant_names = names
    else:
        variant_names = labels
    out = _out_dir(args, stack)
    try:
        directory, archive, sw = compare.write_compare(
            labels, collected, out, by=args.by, variant_key=args.variant, named=named,
            secrets=_secrets(stack), variant_names=variant_names)
    except compare.bundle.SecretFound as e:
        _say(str(e))
        return 1
    if args.by and (not sw or not sw["values"]):
        _say(f"no run has the label {args.by!r}: no sweep table")
    counts = compare.steadier_counts(labels, [c.summary for c in collected])
    if any(counts.values()):
        _say("steadier (stability measures each run is the steadiest on, one run each): "
             + ", ".join(f"{n} {k}" for n, k in counts.items()))
    elif any((c.summary.get("stability") or {}).get("intervals") for c in collected):
        _say("stability: no run is steadier than another on any measure")
    _say(f"comparison of {len(collected)} runs in {out}")
    _compare_profiles(ctx, [run.path for run in found], list(variant_names or labels), directory)
    print(directory, file=ctx.stdout)
    print(archive, file=ctx.stdout)
    return 0


def _compare_profiles(ctx: Context, paths: list[str], names: list[str], directory: str) -> None:
    """Profiled runs (run --profile): the functions whose share of the database's CPU changed most from the
    first name's runs to each other name's, said and kept in the comparison as profile.json."""
    import json

    from benchwatch.profile import recorder, variants

    if not any(os.path.isdir(os.path.join(p, recorder.DIR)) for p in paths):
        return
    groups: dict[str, list[str]] = {}
    for path, name in zip(paths, names):
        groups.setdefault(name, []).append(path)
    base = names[0]
    part = variants.report_part([{"variant": name, "cell": "", "baseline_runs": groups[base], "variant_runs": runs}
                                 for name, runs in groups.items() if name != base])
    part["baseline"] = base
    with open(os.path.join(directory, "profile.json"), "w", encoding="utf-8") as f:
        json.dump(part, f, indent=1)
    for line in variants.text_lines(part):
        ctx.say(line.replace("against the baseline", f"against {base}"))
