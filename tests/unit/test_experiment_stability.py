"""report's steadiness: per cell the stability measures with intervals, per difference a verdict (Welch's t on
log(value + floor), Holm across the report) and its why by cause; the words, the tables and the PNG's boxes.
The profiles are as summary.json keeps them; their per-interval TPS is a real pgbench run's (the wild corpus)."""

from __future__ import annotations

import json
import os
import re
import struct

from benchwatch.experiment import plan as plans
from benchwatch.experiment import report, spec, steadiness
from benchwatch.share import experiment as bundle
from tests.helpers.corpus import corpus

CALM = {"tps_median": 1000.0, "tps_cov": 0.08, "tps_p1_ratio": 0.8, "tps_p5_ratio": 0.88, "tps_min_ratio": 0.7,
        "dips": 0, "dip_seconds": 0.0, "stall_seconds": 0.0, "lost_transactions": 0.0, "lost_share": 0.0,
        "dips_by_cause": {}, "latency_p99_s": 0.02, "latency_p999_s": 0.04, "latency_max_s": 0.1}


def jittery(k: float) -> dict:
    return {**CALM, "tps_cov": 0.30 + k, "tps_p1_ratio": 0.1, "tps_p5_ratio": 0.3, "tps_min_ratio": 0.0,
            "dips": 11, "dip_seconds": 20.0 + 5 * k, "stall_seconds": 2.0, "lost_transactions": 9200.0 + 100 * k,
            "lost_share": 0.05 + k / 100,
            "dips_by_cause": {"checkpoint": {"dips": 10 + k, "seconds": 18.0, "lost_transactions": 9000.0},
                              "no cause found": {"dips": 1, "seconds": 2.0, "lost_transactions": 200.0}}}


def calm(k: float) -> dict:
    return {**CALM, "tps_cov": 0.08 + k / 100, "dips": 1 if k > 1 else 0, "dip_seconds": 1.0 if k > 1 else 0.0,
            "lost_transactions": 300.0 if k > 1 else 0.0, "lost_share": 0.0003 if k > 1 else 0.0,
            "dips_by_cause": {"checkpoint": {"dips": 1, "seconds": 1.0, "lost_transactions": 300.0}} if k > 1 else {}}


def intervals() -> list[float]:
    """Per-interval TPS of a real pgbench run (its progress lines, corpus file 015: 600 s at -P 10)."""
    text = corpus("015").decode(errors="replace")
    xs = [float(m.group(1)) for m in re.finditer(r"^progress: [\d.]+ s, ([\d.]+) tps", text, re.M)]
    assert len(xs) == 60
    return xs


def sweep(profiles: dict[str, list[dict | None]], variants=("calm", "jit:x=1")) -> dict:
    vs = spec.parse_variants(list(variants))
    cells = [spec.Cell(4)]
    repeat = max(len(p) for p in profiles.values())
    p = plans.Plan("s", ["pgbench", "-T", "60"], vs, cells, repeat, "blocked", 0,
                   plans.order_runs([v.name for v in vs], cells, repeat, "blocked", 0), "postgresql")
    tps = intervals()
    figures: dict[int, dict] = {}
    for run in p.runs:
        mine = profiles[run.variant]
        k = sum(1 for r in p.runs if r.variant == run.variant and r.index < run.index)
        shaky = mine[k] is not None and mine[k].get("dips", 0) > 5
        figures[run.index] = {"run_id": f"{run.variant}-{k}", "tps": 1000.0 + k, "latency_avg_s": 0.004,
                              "latency_p95_s": None, "transactions": 60000, "stability": mine[k],
                              "interval_tps": [x * (0.2 if shaky and i % 7 == 0 else 1) for i, x in enumerate(tps)]}
    events = [{"event": "finished", "index": r.index, "ok": True, "run_id": figures[r.index]["run_id"],
               "figures": figures[r.index]} for r in p.runs]
    return report.build(p, events, figures)


def test_a_jittery_variant_is_less_steady_and_the_why_names_its_causes():
    model = sweep({"calm": [calm(k) for k in range(3)], "jit": [jittery(k / 100) for k in range(3)]})
    (d,) = model["differences"]
    st = d["stability"]
    assert st["verdict"] == "less steady", st
    assert st["decided_by"] == ["tps_cov", "tps_p5_ratio", "dip_seconds", "lost_share", "stall_seconds"]
    assert "Welch" in st["test"] and "Holm" in st["test"] and "floor" in st["test"]
    assert st["measures"]["dip_seconds"]["verdict"] == "less steady"
    assert st["measures"]["tps_cov"]["ratio"] > 3
    # the why: the causes ranked by what changed most, per run
    causes = st["why"]["causes"]
    assert causes[0]["cause"] == "checkpoint"
    assert causes[0]["baseline"]["dips"] == 0.33 and causes[0]["variant"]["dips"] == 10.01
    assert "checkpoint: 0.33 dips and 100 tx lost per run → 10 dips and 9,000 tx" in st["why"]["text"]
    assert st["why"]["during_dips"] == [] and st["why"]["scope"] is None  # no Prometheus asked
    # the TPS verdict is the same as before: the stability object adds, the old keys stay
    assert d["verdict"] == "no difference shown" and d["why"] == [] and "latency" in d
    # each cell: each measure's median, its 95 % interval and n
    cells = {c["variant"]: c for c in model["cells"]}
    dip = cells["jit"]["stability"]["dip_seconds"]
    assert dip["n"] == 3 and dip["ci"][0] <= dip["median"] <= dip["ci"][1]
    zero = cells["calm"]["stability"]["dip_seconds"]
    assert zero["median"] == 0 and zero["ci"][0] == 0
    assert cells["jit"]["stability"]["dips_by_cause"]["checkpoint"]["lost_transactions"] == 9000
    assert cells["calm"]["interval_tps"]["n"] == 3 * len(intervals())
    assert sum(cells["jit"]["interval_tps"]["histogram"]["count"]) == cells["jit"]["interval_tps"]["n"]
    assert cells["jit"]["interval_tps"]["histogram"]["le"] == cells["calm"]["interval_tps"]["histogram"]["le"]
    # the other way round: the calm one is steadier
    other = sweep({"jit": [jittery(k / 100) for k in range(3)], "calm": [calm(k) for k in range(3)]},
                  variants=("jit", "calm:x=1"))
    assert other["differences"][0]["stability"]["verdict"] == "steadier"
    json.dumps(model)


def test_the_same_runs_twice_show_no_difference_and_zeros_are_no_trouble():
    same = [calm(k) for k in range(3)]
    (d,) = sweep({"calm": same, "jit": list(reversed(same))})["differences"]
    assert d["stability"]["verdict"] == "no difference shown"
    assert "why" not in d["stability"]
    quiet = [{**CALM, "tps_cov": 0.08 + k / 100} for k in range(3)]  # no dip on either side at all
    (d,) = sweep({"calm": quiet, "jit": quiet})["differences"]
    assert d["stability"]["verdict"] == "no difference shown"
    assert d["stability"]["measures"]["dip_seconds"]["ratio"] == 1.0


def test_runs_without_a_profile_are_said_and_nothing_breaks():
    model = sweep({"calm": [None, None, None], "jit": [None, None, None]})
    (d,) = model["differences"]
    assert d["stability"]["verdict"] == "no difference shown"
    assert d["stability"]["note"] == "no stability profile to compare"
    assert model["cells"][0]["stability"]["note"] == "3 of 3 runs have no stability profile"
    assert model["cells"][0]["stability"]["tps_cov"] == {"median": None, "ci": None, "n": 0}


def test_disagreeing_measures_are_no_verdict_with_a_note():
    smooth_but_dipping = [{**calm(k), "tps_cov": 0.02 + k / 1000, "dips": 11, "dip_seconds": 20.0 + k,
                           "lost_share": 0.05 + k / 1000} for k in range(3)]
    (d,) = sweep({"calm": [calm(k) for k in range(3)], "jit": smooth_but_dipping})["differences"]
    assert d["stability"]["verdict"] == "no difference shown"
    assert d["stability"]["note"].startswith("mixed: steadier by tps_cov, less steady by dip_seconds")


def test_holm_runs_across_the_report():
    """Many comparisons in one report need more evidence each: the family is every deciding test."""
    diffs = [steadiness.compare([calm(0), calm(1)], [jittery(0), jittery(0.01)]) for _ in range(30)]
    steadiness.decide(diffs, 2.0)
    ps = [d.comparisons["tps_cov"][0] for d in diffs]
    assert all(c.p_adjusted is not None and c.p is not None and c.p_adjusted >= min(1.0, c.p * 2) for c in ps)


def test_the_words_the_tables_and_the_png(tmp_path):
    model = sweep({"calm": [calm(k) for k in range(3)], "jit": [jittery(k / 100) for k in range(3)]})
    lines = bundle.verdict_lines(model)
    assert lines[0].startswith("jit at clients=4: speed: no difference shown against calm (TPS ×")
    assert lines[1].startswith("jit at clients=4: less steady than calm (TPS CoV 0.09 → 0.31; 5th percentile / median 0.88 → 0.3; seconds in dips 0 → 20.1; transactions lost in dips 0 % → 5 %; seconds stalled 0 → 2)")
    assert "why: checkpoint: 0.33 dips and 100 tx lost per run → 10 dips and 9,000 tx" in lines[1]
    out = str(tmp_path / "sweep-s")
    paths = bundle.write_report(model, out)
    assert paths == [out, out + ".tar.gz"]
    with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
        md = f.read()
    assert "## In words" in md and "- jit at clients=4: less steady than calm" in md
    assert "| jit | clients=4 | less steady |" in md and "| jit | clients=4 | checkpoint | 0.33 | 10.01 |" in md
    with open(os.path.join(out, "index.html"), encoding="utf-8") as f:
        page = f.read()
    assert "less steady than calm" in page and "flame" not in page  # no profile, no flame graph
    flamed = str(tmp_path / "sweep-f")
    bundle.write_report(model, flamed, flames=[("jit at clients=4", '<svg class="bw-flame"></svg>')])
    with open(os.path.join(flamed, "index.html"), encoding="utf-8") as f:
        assert '<h3>jit at clients=4</h3><svg class="bw-flame"></svg>' in f.read()
    assert os.path.exists(os.path.join(flamed, "flame-jit-at-clients-4.svg"))
    with open(os.path.join(out, "tps-by-cell.png"), "rb") as f:
        head = f.read(24)
    width, height = struct.unpack(">II", head[16:24])
    assert (width, height) == (1000, 860)  # two charts: the medians, and the per-interval boxes below


def test_a_run_recorded_before_the_profile_gets_it_from_its_raw_output(tmp_path):
    """A run directory without summary.json's stability (as an older benchwatch left it): its profile is
    computed from its saved output, the same pure profile every run gets."""
    from benchwatch.experiment.figures import run_figures
    from benchwatch.record import rundir

    run = rundir.create_run_dir(str(tmp_path / "runs"))
    with open(run.file("stderr.log"), "wb") as f:
        f.write(corpus("015"))
    open(run.file("stdout.log"), "wb").close()
    run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "pgbench", "argv": ["pgbench", "-P", "10", "-T", "600"],
                    "started_at": 1_700_000_000.0, "clock_start_epoch": 1_700_000_000.0, "ended_at": 1_700_000_601.0,
                    "exit_code": 0, "progress_interval": 10, "stdout": "stdout.log", "stderr": "stderr.log"})
    assert not os.path.exists(run.file("summary.json"))
    figures = run_figures(run.path)
    profile = figures["stability"]
    assert profile["intervals"] >= 48 and profile["interval_s"] == 10
    assert 0 < profile["tps_cov"] < 0.5 and profile["dips_by_cause"] is None
    assert len(figures["interval_tps"]) == 60
