"""go-ycsb is one folder: outside src/benchwatch/loadgens/goycsb/ no source, configuration, script or page names it
but its install step, its own page, docs/extending.md (which lists what adding it touched) and the generated
files (docs/metrics.md, dashboards/*.json). A tool that needs a line elsewhere is a tool the code names."""

from __future__ import annotations

import os
import re
import subprocess

from benchwatch import loadgens

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = re.compile(r"go-?ycsb", re.I)
SEARCHED = ("src", "prometheus", "scripts", "docs")
ALLOWED = {os.path.join("scripts", "install-deps"), os.path.join("docs", "goycsb.md"), os.path.join("docs", "extending.md"),
           os.path.join("docs", "metrics.md")}  # install step, own page, the list of touched files, generated
FOLDER = os.path.join("src", "benchwatch", "loadgens", "goycsb") + os.sep


def _files():
    """The checkout's files (tracked, or new and not ignored: never a build's egg-info or caches) in SEARCHED."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *SEARCHED],
                            cwd=ROOT, capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    for path in (os.path.normpath(p) for p in listed):
        if not path.startswith(FOLDER) and path not in ALLOWED and os.path.isfile(os.path.join(ROOT, path)):
            yield path


def test_the_tool_is_registered_from_its_folder():
    generator = loadgens.by_name("goycsb")
    assert generator.name == "goycsb" and type(generator).__module__ == "benchwatch.loadgens.goycsb"


def test_no_file_outside_its_folder_names_it():
    named = []
    for path in _files():
        with open(os.path.join(ROOT, path), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        named += [f"{path}:{text.count(chr(10), 0, m.start()) + 1}" for m in NAME.finditer(text)]
    assert not named, f"go-ycsb named outside its folder: {named}"


def test_the_search_would_see_a_name_where_it_looks():
    """The test above is not vacuous: it walks the places a tool's name used to be needed."""
    seen = set(_files())
    for path in ("src/benchwatch/history/workload.py", "src/benchwatch/commands/record.py", "src/benchwatch/cli.py",
                 "src/benchwatch/commands/experiment.py", "prometheus/prometheus.yml", "docs/architecture.md"):
        assert path.replace("/", os.sep) in seen, path
    assert NAME.search("benchwatch run -- go-ycsb run") and NAME.search("loadgens.goycsb")
