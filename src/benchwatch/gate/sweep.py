"""``benchwatch report NAME --fail-on slower[,less-steady] --comment FILE``: a sweep's report (its JSON model,
benchwatch.experiment.report) as a gate. The verdicts are the report's own — decided with the sweep's
--min-effect and Holm's adjustment —, so a gate fails exactly when the report says "slower" or "less steady".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchwatch import engines, loadgens
from benchwatch.dashboards.run import run_dashboard_for
from benchwatch.gate import FAILED, PASSED
from benchwatch.gate.markdown import code, percent, table
from benchwatch.history import changed
from benchwatch.record import rundir

# --fail-on's words -> what each fails on (the report's verdicts).
FAIL_ON = {"slower": "a TPS verdict \"slower\"", "less-steady": "a stability verdict \"less steady\""}
EXPERIMENT_DASHBOARD = "benchwatch-experiment"
WHY_ROWS = 5


def parse_fail_on(text: str) -> tuple[str, ...]:
    """``slower,less-steady`` -> ("slower", "less-steady"); a word it does not know is refused, saying the known."""
    words = tuple(w.strip() for w in text.split(","))
    unknown = [w for w in words if w not in FAIL_ON]
    if not words or unknown:
        raise ValueError(f"--fail-on {text!r}: {', '.join(repr(w) for w in unknown) or 'nothing given'} is not one of "
                         f"{', '.join(FAIL_ON)} (comma-separated, e.g. --fail-on slower,less-steady)")
    return tuple(dict.fromkeys(words))


@dataclass(frozen=True)
class Failure:
    variant: str
    cell: str
    kind: str   # a FAIL_ON word
    text: str


def _where(d: Mapping[str, Any]) -> str:
    return f"{d['variant']} at {d['cell']}" if d.get("cell") and d["cell"] != "all" else str(d["variant"])


def failures(model: Mapping[str, Any], fail_on: Sequence[str]) -> list[Failure]:
    """The differences that fail the gate, each with a sentence saying why."""
    base, effect = model["baseline"], model["min_effect_pct"]
    out = []
    for d in model["differences"]:
        if "slower" in fail_on and d["verdict"] == "slower":
            out.append(Failure(d["variant"], d["cell"], "slower",
                               f"{_where(d)} is slower than {base}: TPS {percent(d['ratio'], d['ratio_ci'])}, "
                               f"Holm-adjusted p = {d['p_adjusted']:.2g}, beyond the minimum effect of {effect:g} %"))
        st = d.get("stability") or {}
        if "less-steady" in fail_on and st.get("verdict") == "less steady":
            shown = [k for k in st.get("decided_by") or [] if st["measures"][k]["verdict"] == "less steady"]
            words = "; ".join(f"{k} ×{st['measures'][k]['ratio']:.3g} (95 % interval "
                              f"{st['measures'][k]['ratio_ci'][0]:.3g} – {st['measures'][k]['ratio_ci'][1]:.3g})"
                              for k in shown if st["measures"][k].get("ratio_ci"))
            out.append(Failure(d["variant"], d["cell"], "less-steady",
                               f"{_where(d)} is less steady than {base}" + (f": {words}" if words else "")
                               + f", beyond the minimum effect of {effect:g} %"))
    return out


def exit_code(found: Sequence[Failure]) -> int:
    return FAILED if found else PASSED


def server_changes(model: Mapping[str, Any], runs_dir: str,
                   path_of: Callable[[str], str] | None = None) -> dict[str, dict[str, list[Any]]]:
    """Per variant, what differs between its server and the baseline's as the runs recorded them (version,
    chosen settings, the data directory's filesystem): one run of each side in the same cell, as history's
    "what changed" reads two runs. ``path_of``: where a run's directory is (default ``runs_dir``/id)."""
    where_run = path_of or (lambda run_id: os.path.join(runs_dir, run_id))
    first: dict[tuple[str, str], str] = {}
    for c in model["cells"]:
        if c["run_ids"]:
            first.setdefault((c["variant"], c["cell"]), c["run_ids"][0])
    try:
        where = set(engines.get(model["engine"]).address_settings)
    except engines.UnknownEngine:
        where = set()
    out: dict[str, dict[str, list[Any]]] = {}
    for v in model["variants"][1:]:
        for (name, cell), run_id in first.items():
            if name != v["name"] or (model["baseline"], cell) not in first:
                continue
            before, after = _meta(where_run(first[(model["baseline"], cell)])), _meta(where_run(run_id))
            if before and after:
                out[v["name"]] = {k: w for k, w in changed.diff(before, after).items()
                                 if k != "argv" and k not in where}
                break
    return out


def _meta(path: str) -> dict[str, Any]:
    try:
        return rundir.RunDir(path).read_meta()
    except (rundir.CorruptMeta, OSError):
        return {}


def _cells(model: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(c["variant"], c["cell"]): c for c in model["cells"]}


def _tps(c: Mapping[str, Any] | None) -> str:
    if not c or c.get("tps_median") is None:
        return "-"
    ci = c.get("tps_ci")
    return f"{c['tps_median']:,.1f}" + (f" ({ci[0]:,.1f} – {ci[1]:,.1f})" if ci else "") + f", n={c['n']}"


def markdown(model: Mapping[str, Any], fail_on: Sequence[str], found: Sequence[Failure],
             changes: Mapping[str, Mapping[str, list[Any]]] | None = None,
             links: Mapping[str, str] | None = None) -> str:
    """The pull request's comment."""
    base = model["baseline"]
    cells = _cells(model)
    lines = [f"## benchwatch: sweep {code(model['sweep'])} — " + ("**failed**" if found else "**passed**"), ""]
    gate = f"{code('--fail-on ' + ','.join(fail_on))}, minimum effect {model['min_effect_pct']:g} %"
    if found:
        lines.append(f"The gate ({gate}) fails:")
        lines += [f"- {f.text}" for f in found]
    else:
        lines.append(f"The gate ({gate}) passes: no variant is " + " or ".join(
            {"slower": "slower", "less-steady": "less steady"}[w] for w in fail_on) + f" than {base}.")
    runs = model["runs"]
    lines += ["", f"{model['tool']} {code(' '.join(model['argv'][1:]))}, {runs['done']} of {runs['planned']} runs, "
              f"{model['repeat']} per variant and cell, order {model['order']}"
              + (f" (seed {model['seed']})" if model.get("seed") is not None else "") + "."]
    if runs.get("missing"):
        lines.append(f"Runs missing: {len(runs['missing'])} (their cells have fewer runs).")
    lines += ["", f"### Verdicts against {code(base)}", ""]
    lines += table(["variant", "cell", f"TPS {base} (95 %)", "TPS variant (95 %)", "TPS change (95 %)", "verdict",
                    "p (Holm)", "steadiness"],
                   [[d["variant"], d["cell"], _tps(cells.get((base, d["cell"]))), _tps(cells.get((d["variant"], d["cell"]))),
                     percent(d["ratio"], d["ratio_ci"]), d["verdict"] + _needed(d),
                     "-" if d.get("p_adjusted") is None else f"{d['p_adjusted']:.2g}",
                     (d.get("stability") or {}).get("verdict", "-")] for d in model["differences"]])
    lines += ["", f"<sub>{model['test']}; TPS intervals: {model['tps_interval']}; change: {model['ratio_interval']}."
              "</sub>"]
    variants = {v["name"]: v for v in model["variants"]}
    lines += ["", "### What differs between the servers", ""]
    lines += table(["variant", "as the sweep gave it"], [[v["name"], v.get("what") or ""] for v in model["variants"]])
    if changes:
        diff_rows = [[name, key, _value(w[0]), _value(w[1])] for name, kv in changes.items() for key, w in kv.items()]
        if diff_rows:
            lines += ["", "As the runs recorded them (server version, every setting chosen, the data directory's "
                      "filesystem):", ""]
            lines += table(["variant", "what", base, "variant"], diff_rows)
        else:
            lines += ["", "The runs recorded the same server version and settings on both sides."]
    lines += _why(model)
    lines += _links(model, links or {}, variants)
    return "\n".join(lines) + "\n"


def _needed(d: Mapping[str, Any]) -> str:
    if d["verdict"] == "no difference shown" and d.get("repeats_needed"):
        return f" ({d['repeats_needed']} repeats would show a change of this size)"
    return ""


def _value(v: Any) -> str:
    return "; ".join(str(x) for x in v) if isinstance(v, list) else "(none)" if v is None else str(v)


def _why(model: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for d in model["differences"]:
        st = d.get("stability") or {}
        part: list[str] = []
        if d.get("why"):
            part += ["", f"Server measures ({d.get('why_scope') or 'the runs of each side'}):", ""]
            part += table(["measure", model["baseline"], d["variant"], "change", "unit"],
                          [[w["signal"], f"{w['baseline']:g}", f"{w['variant']:g}",
                            "-" if w.get("change") is None else f"{w['change'] * 100:+.0f} %".replace("-", "−"),
                            w.get("unit") or ""] for w in d["why"][:WHY_ROWS]])
        elif d["verdict"] != "no difference shown" and "why" in d and not d.get("why_text"):
            part += ["", "Server measures: not read (report --no-why, or Prometheus was not up)."]
        why = st.get("why") or {}
        if why.get("causes"):
            part += ["", "Dips by cause (per run):", ""]
            part += table(["cause", f"dips {model['baseline']}", f"dips {d['variant']}", f"tx lost {model['baseline']}",
                           f"tx lost {d['variant']}"],
                          [[r["cause"], f"{r['baseline']['dips']:g}", f"{r['variant']['dips']:g}",
                            f"{r['baseline']['lost_transactions']:,.0f}", f"{r['variant']['lost_transactions']:,.0f}"]
                           for r in why["causes"]])
        if why.get("text") and not why.get("causes"):
            part += ["", f"Steadiness: {why['text']}."]
        elif why.get("during_dips"):
            part += ["", f"During the dips of {why.get('during_dips_of')}: " + "; ".join(
                f"{r['signal']} {r['outside_dips']:g} → {r['during_dips']:g}{' ' + r['unit'] if r.get('unit') else ''}"
                for r in why["during_dips"][:WHY_ROWS]) + "."]
        if part:
            out += ["", f"#### {_where(d)}: {d['verdict']}" + (f", steadiness: {st['verdict']}" if st.get("verdict") else "")] + part
    profiled = [p for p in (model.get("profile") or {}).get("differences", []) if p.get("words")]
    if profiled:
        out += ["", "#### Where the database's CPU went against the baseline (sweep --profile)", ""]
        out += [f"- {p['variant']}" + (f" at {p['cell']}" if p.get("cell") else "") + ": " + "; ".join(p["words"][:WHY_ROWS])
                for p in profiled]
    return (["", "### Why"] + out) if out else []


def _links(model: Mapping[str, Any], links: Mapping[str, str], variants: Mapping[str, Any]) -> list[str]:
    out = ["", "### Links", ""]
    if links.get("bundle"):
        out.append(f"- The report (HTML, PNG, CSV, JSON): {code(links['bundle'])}"
                   + (f", packed as {code(links['archive'])}" if links.get("archive") else ""))
    if links.get("grafana"):
        out.append(f"- Grafana, the Experiment dashboard: {links['grafana'].rstrip('/')}/d/{EXPERIMENT_DASHBOARD}"
                   f"?var-experiment={model['sweep']}")
    run_link = None
    if links.get("grafana"):
        uid = run_dashboard_for(loadgens.for_program(model["tool"]).name, model["engine"]).uid
        run_link = f"{links['grafana'].rstrip('/')}/d/{uid}?var-run_id="
    for name in variants:
        ids = [r for c in model["cells"] if c["variant"] == name for r in c["run_ids"]]
        if ids:
            out.append(f"- Runs of {code(name)}" + (" (each on its run dashboard)" if run_link else "") + ": "
                       + ", ".join(f"[{code(r)}]({run_link}{r})" if run_link else code(r) for r in ids))
    return out if len(out) > 3 else []
