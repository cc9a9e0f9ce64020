"""A run's CPU profile: perf script folded per slice and group, windows compared (benchwatch.profile), on
output captured from real runs on this machine (tests/fixtures/profile)."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter

from benchwatch.engines.postgresql.processes import process_kind
from benchwatch.profile import fold, window

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "profile")


def _script() -> list[str]:
    with gzip.open(os.path.join(FIXTURES, "perf-script-pgbench.txt.gz"), "rt", encoding="utf-8") as f:
        return f.readlines()


def _kinds() -> dict[int, str]:
    with open(os.path.join(FIXTURES, "postgres-cmdlines.json"), encoding="utf-8") as f:
        cmdlines = json.load(f)["cmdlines"]
    return {int(pid): process_kind(text) or "server" for pid, text in cmdlines.items()}


def test_process_titles_name_the_kind():
    kinds = Counter(_kinds().values())
    assert kinds["postmaster"] == 3 and kinds["checkpointer"] == 3 and kinds["client backend"] >= 6, kinds
    assert process_kind("postgres: 15/main: walwriter   ") == "walwriter"
    assert process_kind("postgres: 15/main: postgres bench [local] idle") == "client backend"
    assert process_kind("postgres: autovacuum worker bench") == "autovacuum worker"
    assert process_kind("postgres: parallel worker for PID 4242") == "parallel worker"
    assert process_kind("") is None


def test_perf_script_samples_are_read_whole():
    lines = _script()
    samples = list(fold.parse_script(lines))
    assert len(samples) == sum(1 for line in lines if line.strip() and not line[0].isspace()) == 293
    postgres = [s for s in samples if s.comm == "postgres"]
    assert postgres, Counter(s.comm for s in samples)
    # DWARF unwinding names the callers up to main, through frames it cannot name ([unknown], kept so).
    assert any("PostgresMain" in s.frames and s.frames[-1] == "_start" for s in postgres)
    assert any(fold.UNKNOWN in s.frames for s in postgres)
    assert all(not (a == b == fold.UNKNOWN) for s in samples for a, b in zip(s.frames, s.frames[1:]))
    assert all(s.time > 0 and s.pid >= 0 for s in samples)


def test_folding_puts_samples_in_their_group_and_slice(tmp_path):
    kinds = fold.Kinds(frozenset({"postgres"}), frozenset({"pgbench"}), _kinds())
    samples = list(fold.parse_script(_script()))
    first = min(s.time for s in samples)
    folded = fold.fold(_script(), kinds, 1000.0, lambda t: t - first + 1000.0)
    assert folded.samples == 293 and folded.before_start == 0
    groups = Counter()
    for (_i, group, kind), stacks in folded.slices.items():
        groups[(group, kind)] += sum(stacks.values())
    assert groups[("database", "client backend")] > 0 and groups[("load_generator", "pgbench")] > 0, groups
    assert folded.unknown_leaf > 0 and folded.unknown_frames >= folded.unknown_leaf
    path = str(tmp_path / "slices.tsv.gz")
    folded.write(path)
    start, slice_s, rows = fold.read_slices(path)
    assert start == 1000.0 and slice_s == 1.0
    assert sum(r[3] for r in rows) == 293
    assert max(r[0] for r in rows) <= 4  # 3 s of samples: slices 0..3 (4 at most when the clocks straddle)
    # Root first: every database stack of a backend starts where the process does.
    assert all(r[4].startswith(("_start", fold.UNKNOWN, "[")) for r in rows if r[2] == "client backend"), rows[:3]


def test_a_slice_keeps_its_most_frequent_stacks_and_counts_the_rest():
    folded = fold.Folded(0.0)
    for n in range(fold.MAX_STACKS + 50):
        folded.add(0.5, "database", "client backend", [f"f{n}", "main"], 0)
    folded.add(0.5, "database", "client backend", ["f0", "main"], 0)
    folded.bounded()
    stacks = folded.slices[(0, "database", "client backend")]
    assert len(stacks) == fold.MAX_STACKS + 1
    assert stacks[fold.OTHER_STACKS] == 50 - 1 + 1 or sum(stacks.values()) == fold.MAX_STACKS + 51
    assert sum(stacks.values()) == fold.MAX_STACKS + 51 and stacks["main;f0"] == 2


def test_deep_stacks_keep_the_frames_nearest_the_leaf():
    frames = [f"f{i}" for i in range(fold.MAX_DEPTH + 10)]
    stack = fold.stack_of(frames).split(";")
    assert stack[0] == fold.TRUNCATED and stack[-1] == "f0" and len(stack) == fold.MAX_DEPTH + 1


def _busy_loops_profile() -> tuple[window.Profile, dict]:
    path = os.path.join(FIXTURES, "busy-loops-slices.tsv.gz")
    start, slice_s, rows = fold.read_slices(path)
    with open(os.path.join(FIXTURES, "busy-loops-dips.json"), encoding="utf-8") as f:
        return window.Profile(start, slice_s, rows, {}), json.load(f)


def test_a_dip_with_busy_loops_beside_the_run_shows_them_taking_the_cpus():
    """A real profiled pgbench run with four `sh` busy loops for 8 s (on a machine busy with other tests)."""
    profile, fixture = _busy_loops_profile()
    dip = fixture["dips"][0]
    p = window.compare_windows(profile, dip["start"], dip["end"])
    by = {g["group"]: g["per_second"] for g in p["groups"]}
    assert by["database"][1] < by["database"][0], p
    assert by["other"][1] > by["other"][0], p
    sh = next(m for m in p["processes"] if m["process"] == "sh")
    assert sh["group"] == "other" and sh["per_second"][1] > sh["per_second"][0] + 3, p
    assert p["functions"] and p["seconds"][1] == 7.0 and sum(p["seconds"]) == profile.last + 1
    shares = [f["self"] for f in p["functions"]] + [f["total"] for f in p["functions"]]
    assert all(0 <= s <= 1 for pair in shares for s in pair)
    text = "\n".join(window.text_lines(p))
    assert "sh (other)" in text and "database" in text and "[unknown]" in text


def test_a_dip_outside_the_profile_says_so():
    profile, _ = _busy_loops_profile()
    p = window.compare_windows(profile, profile.start - 100, profile.start - 90)
    assert p["functions"] == [] and "no whole second" in p["functions_note"]


def test_another_servers_processes_are_other():
    kinds = fold.Kinds(frozenset({"postgres"}), frozenset({"pgbench"}), {10: "client backend"}, frozenset({20}))
    assert kinds.of("postgres", 10) == ("database", "client backend")
    assert kinds.of("postgres", 20) == ("other", "postgres (another server)")
    assert kinds.of("postgres", 30) == ("database", "unknown kind")  # never seen by the sampler: cannot tell
    assert kinds.of("pgbench", 40) == ("load_generator", "pgbench")
    assert kinds.of("sh", 50) == ("other", "sh")


def test_the_postmasters_pid_is_read_from_its_data_directory(tmp_path):
    from benchwatch import engines

    (tmp_path / "postmaster.pid").write_text("4242\n/var/lib/postgresql/15/main\n1795873575\n5432\n")
    assert engines.get("postgres").server_pid({"data_directory": str(tmp_path)}) == 4242
    assert engines.get("postgres").server_pid({}) is None
    (tmp_path / "mariadbd.pid").write_text("777\n")
    assert engines.get("mariadb").server_pid({"server_settings": {"pid_file": str(tmp_path / "mariadbd.pid")}}) == 777
    assert engines.get("mariadb").server_pid({"server_settings": {}}) is None


def _profiled_run(path, stacks: dict[str, int]) -> str:
    """A run directory whose profile holds ``stacks`` (folded -> samples) of the database, in one slice."""
    from benchwatch.profile import recorder

    os.makedirs(os.path.join(path, recorder.DIR))
    folded = fold.Folded(100.0)
    for stack, n in stacks.items():
        for _ in range(n):
            folded.add(100.5, "database", "client backend", list(reversed(stack.split(";"))), 0)
    folded.write(os.path.join(path, recorder.DIR, recorder.SLICES))
    return str(path)


def test_a_variants_functions_against_the_baseline_with_their_interval(tmp_path):
    from benchwatch.profile import variants

    base = [_profiled_run(tmp_path / f"b{i}", {"main;PostgresMain;CommitTransaction;XLogFlush": 30 + i,
                                                "main;PostgresMain;ExecScan": 70 - i}) for i in range(3)]
    var = [_profiled_run(tmp_path / f"v{i}", {"main;PostgresMain;CommitTransaction;XLogFlush": 2 + i % 2,
                                               "main;PostgresMain;ExecScan": 98 - i % 2}) for i in range(3)]
    part = variants.report_part([{"variant": "off", "cell": "", "baseline_runs": base, "variant_runs": var}])
    d = part["differences"][0]
    assert d["profiled_runs"] == [3, 3] and d["database_samples"] == [300, 300]
    top = d["functions"][0]
    assert top["function"] in ("XLogFlush", "ExecScan", "CommitTransaction") and top["excludes_zero"], d
    flush = next(r for r in d["functions"] if r["function"] == "XLogFlush")
    assert flush["baseline"] == 0.31 and flush["change"] < -0.27 and flush["change_ci"][1] < 0, flush
    # XLogFlush's self and total share are the same here: it is shown once, as self.
    assert [r["measure"] for r in d["functions"] if r["function"] == "XLogFlush"] == ["self"]
    assert any(w.startswith("`XLogFlush` 31 % → 2.3 % of the database's CPU (self; 95 % interval") for w in d["words"])
    assert all(r["function"] not in ("main", "PostgresMain") for r in d["functions"])  # in every stack: no change
    # Unwinding that stops short of main in some of the variant's stacks: main's total share falls, which says
    # how far unwinding reached, not where the work went; it is not among the changes.
    cut = [_profiled_run(tmp_path / f"c{i}", {"main;PostgresMain;ExecScan": 60 + i, "pglz_compress": 40 - i})
           for i in range(3)]
    rows = variants.compare([variants.run_shares(p) for p in base], [variants.run_shares(p) for p in cut])
    assert rows[0]["function"] == "pglz_compress" and rows[0]["excludes_zero"], rows
    assert not any(r["function"] in ("main", "PostgresMain") and r["measure"] == "total" for r in rows), rows
    one = variants.report_part([{"variant": "off", "cell": "", "baseline_runs": base[:1], "variant_runs": var[:1]}])
    assert "one run a side: no interval" in one["differences"][0]["words"][0]


def test_grafanas_flame_graph_frame_is_the_call_tree_depth_first():
    from benchwatch.profile import flamegraph

    left = {"main;a;b": 3, "main;a": 1, "main;c": 2}
    cols = flamegraph.grafana_frame(left)
    assert cols["label"] == ["total", "main", "a", "b", "c"]
    assert cols["level"] == [0, 1, 2, 3, 2]
    assert cols["value"] == [6, 6, 4, 3, 2] and cols["self"] == [0, 0, 1, 3, 2]
    diff = flamegraph.grafana_frame(left, {"main;c": 5})
    assert diff["label"] == ["total", "main", "c", "a", "b"]  # c: 2 + 5 now the larger child
    # Grafana's panel draws a node as wide as value + valueRight: value is the left side's alone.
    assert diff["value"] == [6, 6, 2, 4, 3] and diff["valueRight"] == [5, 5, 5, 0, 0]
    assert diff["self"] == [0, 0, 2, 1, 3] and diff["selfRight"] == [0, 0, 5, 0, 0]
    assert flamegraph.folded_text(Counter(left)) == "main;a;b 3\nmain;c 2\nmain;a 1\n"


def test_a_differential_flame_graph_shows_what_grew_red_and_what_shrank_blue():
    from benchwatch.profile import flamegraph

    rest, dip = {"main;a": 90, "main;b": 10}, {"main;a": 10, "main;b": 90}
    grew = flamegraph.diff_svg(rest, dip, "dip against the rest", "the rest", "the dip")
    assert grew.startswith("<svg") and grew.endswith("</svg>") and "{y" not in grew
    b = grew.split("<title>b: ")[1]
    assert b.startswith("10.0 % of the rest's samples → 90.0 % of the dip's") and 'fill="rgb(255,60,60)"' in b[:300]
    a = grew.split("<title>a: ")[1]
    assert 'fill="rgb(60,60,255)"' in a[:300]
    shrank = flamegraph.diff_svg(rest, dip, "t", widths_from="left")
    assert 'width="900.0"' in shrank.split("<title>a: ")[1][:300]  # as wide as a was before
    assert flamegraph.diff_svg({}, {}, "t") == ""


def test_the_snapshot_draws_each_dip_as_differential_flame_graphs(tmp_path):
    import shutil

    from benchwatch.profile import recorder
    from benchwatch.share.html import profile_html

    os.makedirs(tmp_path / recorder.DIR)
    shutil.copy(os.path.join(FIXTURES, "busy-loops-slices.tsv.gz"), tmp_path / recorder.DIR / recorder.SLICES)
    with open(os.path.join(FIXTURES, "busy-loops-dips.json"), encoding="utf-8") as f:
        dips = json.load(f)["dips"]
    page = profile_html(str(tmp_path), dips)
    assert page.count("<svg") == 2 and "what grew" in page and "what shrank" in page and "PostgresMain" in page
    assert profile_html(str(tmp_path), []) == "" and profile_html(str(tmp_path / "none"), dips) == ""


def test_a_real_sweep_of_wal_compression_names_pglz_compress(tmp_path):
    """sweep --profile of wal_compression=pglz against off, pgbench -c 4 -T 8 after a CHECKPOINT each, three
    repeats, on this machine (the database's rows of each run's slices, tests/fixtures/profile/sweep-pglz)."""
    import shutil

    from benchwatch.profile import recorder, variants

    runs: dict[str, list[str]] = {"off": [], "pglz": []}
    for name in sorted(os.listdir(os.path.join(FIXTURES, "sweep-pglz"))):
        run = tmp_path / name.split(".")[0]
        os.makedirs(run / recorder.DIR)
        shutil.copy(os.path.join(FIXTURES, "sweep-pglz", name), run / recorder.DIR / recorder.SLICES)
        runs[name.split("-")[0]].append(str(run))
    part = variants.report_part([{"variant": "pglz", "cell": "", "baseline_runs": runs["off"],
                                  "variant_runs": runs["pglz"]}])
    d = part["differences"][0]
    grew = [r for r in d["functions"] if r["change"] > 0 and r["excludes_zero"]]
    assert grew[0]["function"] == "pglz_compress" and grew[0]["baseline"] == 0.0, d["functions"]
    assert grew[0]["change_ci"][0] > 0.05, grew[0]
    assert d["words"][0].startswith("`pglz_compress` 0.0 % → 11 % of the database's CPU (total; 95 % interval")
    assert sum(w.startswith("`pglz_compress`") for w in d["words"]) == 1


def test_a_profiled_sweeps_report_page_draws_the_variant_against_the_baseline_as_a_flame_graph(tmp_path):
    """The same real sweep of wal_compression: the report's bundle carries a differential flame graph, on its page
    and as an SVG file, where pglz_compress (absent from the baseline's runs) is red and has its shares."""
    import re
    import shutil

    from benchwatch.profile import recorder, variants
    from benchwatch.share import experiment as report_bundle

    runs: dict[str, list[str]] = {"off": [], "pglz": []}
    for name in sorted(os.listdir(os.path.join(FIXTURES, "sweep-pglz"))):
        run = tmp_path / "runs" / name.split(".")[0]
        os.makedirs(run / recorder.DIR)
        shutil.copy(os.path.join(FIXTURES, "sweep-pglz", name), run / recorder.DIR / recorder.SLICES)
        runs[name.split("-")[0]].append(str(run))
    groups = [{"variant": "pglz", "cell": "", "baseline_runs": runs["off"], "variant_runs": runs["pglz"]}]
    flames = variants.flame_graphs(groups, "off")
    assert [name for name, _ in flames] == ["pglz"]
    svg = flames[0][1]
    frame = re.search(r"<title>pglz_compress: 0\.0 % of off's samples → ([0-9.]+) % of pglz's[^<]*</title><rect [^>]*"
                      r'fill="([^"]+)"', svg)
    assert frame, svg[:2000]
    assert float(frame.group(1)) > 5 and frame.group(2) == "rgb(255,60,60)"  # grew by more than 5 points: full red
    # Each run weighed as one: a baseline run twice as long would not change the shares.
    doubled = variants.pooled_stacks(runs["off"][:1] * 2)
    single = variants.pooled_stacks(runs["off"][:1])
    assert doubled == single + single
    page = report_bundle.flames_html(flames)
    assert page.count("<svg") == 1 and "differential flame graphs" in page
    assert report_bundle.flames_html([]) == ""
