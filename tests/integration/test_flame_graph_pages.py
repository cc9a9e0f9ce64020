"""The flame graphs as a reader sees them: the report page of a profiled sweep and a snapshot's dips, opened in
headless Chromium (networking off). The page's script runs without an error or a console line, and the
screenshot has the frames in their colours: red where the database's share grew (pglz_compress, absent
from the baseline), blue where it fell. Profiles are real: tests/fixtures/profile (a wal_compression sweep,
a run with busy loops beside it)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from benchwatch.profile import recorder, variants
from benchwatch.share import experiment as report_bundle
from benchwatch.share import html
from tests.integration.test_snapshot import render
from tests.unit.test_experiment_stability import calm, sweep

pytestmark = pytest.mark.integration

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "profile")
RED = (255, 60, 60)  # full colour: a frame's share grew by 5 points or more


def reddish(colours: dict[tuple[int, int, int], int]) -> int:
    """Pixels of frames whose share grew by a point or more (flamegraph._colour: rgb(255, fade, fade))."""
    return sum(n for (r, g, b), n in colours.items() if r == 255 and g == b <= 200)


def bluish(colours: dict[tuple[int, int, int], int]) -> int:
    return sum(n for (r, g, b), n in colours.items() if b == 255 and r == g <= 200)


def pixels(png: str) -> dict[tuple[int, int, int], int]:
    from PIL import Image

    with Image.open(png) as image:
        return {colour: n for n, colour in image.convert("RGB").getcolors(maxcolors=1 << 24)}


def profiled_run(directory, slices: str) -> str:
    os.makedirs(directory / recorder.DIR)
    shutil.copy(slices, directory / recorder.DIR / recorder.SLICES)
    return str(directory)


def test_a_profiled_sweeps_report_page_draws_its_flame_graph_in_chromium(tmp_path):
    runs: dict[str, list[str]] = {"off": [], "pglz": []}
    for name in sorted(os.listdir(os.path.join(FIXTURES, "sweep-pglz"))):
        runs[name.split("-")[0]].append(profiled_run(tmp_path / name.split(".")[0], os.path.join(FIXTURES, "sweep-pglz", name)))
    flames = variants.flame_graphs([{"variant": "pglz", "cell": "", "baseline_runs": runs["off"],
                                     "variant_runs": runs["pglz"]}], "off")
    out = str(tmp_path / "sweep-s")
    report_bundle.write_report(sweep({"calm": [calm(k) for k in range(3)], "jit": [calm(k) for k in range(3)]}), out,
                               flames=flames)
    page = os.path.join(out, "index.html")
    status, console = render(page, str(tmp_path))
    assert status["errors"] == [] and console == [], (status, console)
    shot = str(tmp_path / "report.png")
    _, console = render(page, str(tmp_path), screenshot=shot, size=(1400, 4000))
    colours = pixels(shot)
    assert console == [] and colours.get(RED, 0) > 200, sorted(colours.items(), key=lambda kv: -kv[1])[:12]


def test_a_snapshots_dips_draw_their_flame_graphs_in_chromium(tmp_path):
    run = profiled_run(tmp_path / "run", os.path.join(FIXTURES, "busy-loops-slices.tsv.gz"))
    with open(os.path.join(FIXTURES, "busy-loops-dips.json"), encoding="utf-8") as f:
        dips = json.load(f)["dips"]
    page = str(tmp_path / "index.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(html.page("dips", "<header><h1>dips</h1></header>", {"panels": [], "zoomMode": "time"},
                          html.profile_html(run, dips)))
    status, console = render(page, str(tmp_path))
    assert status["errors"] == [] and console == [], (status, console)
    shot = str(tmp_path / "dips.png")
    _, console = render(page, str(tmp_path), screenshot=shot, size=(1400, 3000))
    colours = pixels(shot)
    assert console == [] and reddish(colours) > 200 and bluish(colours) > 200, \
        sorted(colours.items(), key=lambda kv: -kv[1])[:12]
