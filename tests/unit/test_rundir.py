from __future__ import annotations

import os
import subprocess
import sys
import time

from benchwatch.record import rundir


def _make(runs_dir: str) -> rundir.RunDir:
    run = rundir.create_run_dir(runs_dir)
    run.write_meta({"run_id": run.run_id, "state": rundir.FINISHED})
    return run


def test_ids_made_in_one_second_sort_in_creation_order(tmp_path):
    runs_dir = str(tmp_path)
    created = [_make(runs_dir).run_id for _ in range(200)]  # well under a second
    assert len(set(created)) == len(created)
    assert sorted(created, key=rundir.sort_key) == created
    assert [r.run_id for r in rundir.list_runs(runs_dir)] == created
    assert rundir.find_run(runs_dir, None).run_id == created[-1]


def test_runs_made_by_successive_processes_sort_in_creation_order(tmp_path):
    # `benchwatch run -- pgbench -i` then the measured run: two processes, often the same second.
    runs_dir = str(tmp_path)
    code = ("import sys; from benchwatch.record import rundir; r = rundir.create_run_dir(sys.argv[1]); "
            "r.write_meta({'run_id': r.run_id}); print(r.run_id)")
    created = [subprocess.run([sys.executable, "-c", code, runs_dir], capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip() for _ in range(5)]
    assert [r.run_id for r in rundir.list_runs(runs_dir)] == created
    assert rundir.find_run(runs_dir, None).run_id == created[-1]


def test_an_id_made_just_after_an_existing_one_sorts_after_it():
    # Another process's run, stamped slightly ahead of this clock (or in the same ms).
    existing = rundir.new_run_id(now=time.time() + 0.5)[:-4] + "ffff"  # the largest suffix
    assert rundir.sort_key(rundir.new_run_id(after=existing)) > rundir.sort_key(existing)
    # A clock far behind an existing id (stepped back) keeps the true time instead of drifting.
    future = rundir.new_run_id(now=4102444800.0)  # 2100-01-01
    assert rundir.new_run_id(after=future)[:4] != "2100"


def test_explicit_start_is_kept_and_old_ids_are_still_read(tmp_path):
    assert rundir.new_run_id(1704110400.5).startswith("20240101T120000.500Z-")
    old, new, next_second = "20240101T120000Z-ffff", "20240101T120000.001Z-0000", "20240101T120001Z-0000"
    for name in (next_second, new, old, "baseline"):  # "baseline": import --run-id baseline
        run = rundir.create_run_dir(str(tmp_path), name)
        run.write_meta({"run_id": name})
    assert [r.run_id for r in rundir.list_runs(str(tmp_path))] == [old, new, next_second, "baseline"]  # no start known
    # A named import is placed by the start its meta.json records, not after every id.
    rundir.RunDir(os.path.join(str(tmp_path), "baseline")).write_meta({"run_id": "baseline", "started_at": 1704110400.5})
    assert [r.run_id for r in rundir.list_runs(str(tmp_path))] == [old, new, "baseline", next_second]
    assert rundir.find_run(str(tmp_path), None).run_id == next_second
    assert rundir.find_run(str(tmp_path), old).path == os.path.join(str(tmp_path), old)
    assert rundir.sort_key("99999999T999999Z-x") == "99999999T999999Z-x"  # digits, but no date
