"""Where `benchwatch snapshot` and `compare` write: under the state directory unless -o says
otherwise, never into the directory the user happens to be in. Runs the real command on the
captured run directory (--source raw: a private Prometheus rebuilds the panels, no stack)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.dirname(__file__))
RUN_ID = "20261122T181310Z-ece8"
RUN_DIR = os.path.join(HERE, "fixtures", "snapshot", RUN_ID)


def _benchwatch(cwd, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "BENCHWATCH_STATE_DIR"}
    r = subprocess.run([sys.executable, "-m", "benchwatch", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return r


def _check_written(r: subprocess.CompletedProcess, where: str, name: str, a_file: str = "index.html") -> None:
    directory, archive = r.stdout.split()
    assert (directory, archive) == (os.path.join(where, name), os.path.join(where, name + ".tar.gz"))
    assert os.path.isfile(os.path.join(directory, a_file))
    with tarfile.open(archive) as t:
        assert f"{name}/{a_file}" in t.getnames()
    assert where in r.stderr  # said where, not only printed


def test_snapshot_and_compare_write_under_the_state_dir(tmp_path):
    cwd, state = tmp_path / "cwd", str(tmp_path / "state")
    cwd.mkdir()
    shares = os.path.join(state, "shares")
    r = _benchwatch(cwd, "snapshot", "--state-dir", state, "--run-dir", RUN_DIR, "--source", "raw")
    _check_written(r, shares, f"snapshot-{RUN_ID}")
    r = _benchwatch(cwd, "compare", "--state-dir", state, RUN_DIR, RUN_DIR, "--names", "A,B", "--source", "raw")
    _check_written(r, shares, f"compare-{RUN_ID}-vs-{RUN_ID}", "compare.md")
    assert os.listdir(cwd) == []


def test_out_option_still_chooses_the_directory(tmp_path):
    state = str(tmp_path / "state")
    r = _benchwatch(tmp_path, "snapshot", "--state-dir", state, "--run-dir", RUN_DIR, "--source", "raw", "-o", "mine")
    directory, _ = r.stdout.split()
    assert os.path.samefile(os.path.join(tmp_path, directory), tmp_path / "mine" / f"snapshot-{RUN_ID}")
    r = _benchwatch(tmp_path, "snapshot", "--state-dir", state, "--run-dir", RUN_DIR, "--source", "raw",
                    "--out", str(tmp_path / "long"))
    _check_written(r, str(tmp_path / "long"), f"snapshot-{RUN_ID}")
    assert not os.path.exists(os.path.join(state, "shares"))


def test_snapshot_and_compare_keep_the_runs_targets(tmp_path):
    import json
    import shutil

    run_dir = str(tmp_path / RUN_ID)
    shutil.copytree(RUN_DIR, run_dir)
    meta_path = os.path.join(run_dir, "meta.json")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    meta["targets"] = [{"target": "db1", "host": "hostA", "engine": "postgresql"},
                       {"target": "db2a", "host": "hostB", "engine": "postgresql"}]
    with open(meta_path, "w", encoding="utf-8") as f:
        json.dump(meta, f)
    state = str(tmp_path / "state")
    r = _benchwatch(tmp_path, "snapshot", "--state-dir", state, "--run-dir", run_dir, "--source", "raw")
    directory = r.stdout.split()[0]
    with open(os.path.join(directory, "summary.md"), encoding="utf-8") as f:
        assert "watched: db1 on hostA, db2a on hostB" in f.read()
    r = _benchwatch(tmp_path, "compare", "--state-dir", state, run_dir, RUN_DIR, "--names", "A,B", "--source", "raw")
    directory = r.stdout.split()[0]
    with open(os.path.join(directory, "compare.md"), encoding="utf-8") as f:
        text = f.read()
    assert "targets db1 on hostA, db2a on hostB" in text
    with open(os.path.join(directory, "index.html"), encoding="utf-8") as f:
        assert "targets db1 on hostA, db2a on hostB" in f.read()
