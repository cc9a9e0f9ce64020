"""``sweep --profile`` and ``attach --profile`` on a real PostgreSQL 15 stack (issue 30): every repeat of a sweep
profiled and folded before the next run starts, and the report's profile part names in words where the
database's CPU went between two variants; a run piped into ``attach --profile`` keeps its profile too.

The sweep is issue 30's synchronous_commit acceptance: off against on, on a one-INSERT-per-transaction
script whose commit is mostly its WAL flush, so with synchronous_commit on the backends' share of the CPU in
WAL flushing (XLogFlush and what it calls, issue_xlog_fsync, the kernel's fdatasync path) is the largest
change, and with it off that share falls. Repeats: 3 per variant, interleaved (the sweep's default), runs of
5 s, 2 clients (figures in docs/profiles.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.helpers import throwaway
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.integration

# Functions of WAL flushing on the commit's path (PostgreSQL's and the kernel's): any of them falling is the
# effect of synchronous_commit off, whichever unwinding reached.
WAL_FLUSHING = ("XLogFlush", "issue_xlog_fsync", "XLogWrite", "pg_fdatasync", "fdatasync", "__x64_sys_fdatasync",
                "do_fsync", "vfs_fsync_range", "ext4_sync_file", "file_write_and_wait_range")


@pytest.fixture(scope="module")
def live():
    require_tool("perf")
    stack = throwaway.start(scale=1)
    try:
        yield stack
    finally:
        left = stack.close()
        assert not left, f"still running after down: {left}"


def test_synchronous_commit_off_profiled_names_wal_flushing_falling(live, tmp_path):
    script = tmp_path / "commit.sql"
    script.write_text("INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 1, 1, now());\n")
    script.chmod(0o644)
    r = live.benchwatch("sweep", "--name", "syncprof", "--profile", "--variant", "on",
                        "--variant", "off:synchronous_commit=off", "--repeat", "3", "--",
                        "pgbench", "-n", "-c", "2", "-j", "2", "-f", str(script), "-T", "8", timeout=900)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    model = json.loads(_report(live, "syncprof", "--json").stdout)
    part = model["profile"]
    (d,) = part["differences"]
    assert d["variant"] == "off" and d["profiled_runs"] == [3, 3], json.dumps(d, indent=1)[:3000]
    falling = [f for f in d["functions"] if f["function"] in WAL_FLUSHING and f["change"] < 0 and f["excludes_zero"]]
    print(json.dumps(d["functions"][:6], indent=1))
    from benchwatch.profile import variants
    for variant in ("on", "off"):
        for run_id in next(c for c in model["cells"] if c["variant"] == variant)["run_ids"]:
            shares = variants.run_shares(os.path.join(live.state_dir, "runs", run_id))
            print(variant, run_id, shares and shares["samples"], shares and {f: round(shares["total"].get(f, 0), 3) for f in WAL_FLUSHING[:2]})
    print(d["words"])
    assert falling, json.dumps(d["functions"], indent=1)
    # Named in words, as the text report says them.
    assert any(w.startswith(f"`{f['function']}`") for f in falling for w in d["words"]), d["words"]
    text = _report(live, "syncprof").stderr.decode()
    assert any(f"`{f['function']}`" in text for f in falling), text

    # compare of two of those runs, one a side: the same functions in words, no interval (one run a side).
    on_run = next(c for c in model["cells"] if c["variant"] == "on")["run_ids"][0]
    off_run = next(c for c in model["cells"] if c["variant"] == "off")["run_ids"][0]
    r = live.benchwatch("compare", on_run, off_run, "--names", "on,off", "--out", str(tmp_path / "cmp"), timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    directory = r.stdout.decode().split()[0]
    with open(os.path.join(directory, "profile.json"), encoding="utf-8") as f:
        (pair,) = json.load(f)["differences"]
    flushing = [f for f in pair["functions"] if f["function"] in WAL_FLUSHING and f["change"] < 0]
    assert flushing and flushing[0]["change_ci"] is None, json.dumps(pair["functions"][:8], indent=1)
    assert "one run a side" in r.stderr.decode(), r.stderr.decode()


def test_a_run_piped_into_attach_profile_keeps_its_profile(live):
    pgbench = subprocess.Popen([os.path.join(throwaway.pg_bindir(), "pgbench"), "-n", "-c", "2", "-j", "2", "-P", "1",
                                "-T", "5"], env=live.pg_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        r = live.benchwatch("attach", "--profile", "--tool", "pgbench", stdin=pgbench.stdout, timeout=180)
    finally:
        pgbench.stdout.close()
        assert pgbench.wait(60) == 0
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "benchwatch: profile: " in err and "profiling off" not in err, err
    run_ids = re.findall(r"^benchwatch: run (\S+): output saved in ", err, re.M)
    assert len(run_ids) == 1, err
    with open(os.path.join(live.state_dir, "runs", run_ids[0], "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["profile"]["state"] == "profiled" and meta["profile"]["samples"] > 50, meta["profile"]
    assert os.path.exists(os.path.join(live.state_dir, "runs", run_ids[0], "profile", "slices.tsv.gz"))


def _report(live, name: str, *args: str) -> subprocess.CompletedProcess:
    r = live.benchwatch("report", name, *args, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return r
