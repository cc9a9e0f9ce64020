"""summary.json: a run's result figures, from its raw output, for run, attach and import alike."""

from __future__ import annotations

import json
import os
import shutil

from benchwatch.record import importer, outcome, replay, rundir
from benchwatch.record.host import filesystem

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")


def _fixture(*parts: str) -> bytes:
    with open(os.path.join(FIXTURES, *parts), "rb") as f:
        return f.read()


def _recorded_pgbench(runs_dir: str) -> rundir.RunDir:
    """A finished `benchwatch run -- pgbench` directory, as the wrapper leaves it (before summary.json)."""
    run = rundir.create_run_dir(runs_dir)
    for name in ("stdout", "stderr"):
        with open(run.file(f"{name}.log"), "wb") as f:
            f.write(_fixture("pgbench", f"pg15_plain.{name}"))
    run.write_meta({"run_id": run.run_id, "mode": "run", "tool": "pgbench", "state": rundir.FINISHED,
                    "argv": ["pgbench", "-c", "4", "-T", "5", "-P", "1"], "progress_interval": 1.0,
                    "started_at": 1_700_000_000.0, "ended_at": 1_700_000_005.0, "exit_code": 0,
                    "stdout": "stdout.log", "stderr": "stderr.log"})
    return run


def test_a_pgbench_run_keeps_its_summary_figures(tmp_path):
    run = _recorded_pgbench(str(tmp_path))
    saved = outcome.save(run)
    assert saved is not None
    with open(run.file(outcome.SUMMARY)) as f:
        on_disk = json.load(f)
    assert on_disk == saved
    assert on_disk["tps"] == 1577.704338 and on_disk["tps_source"] == "summary"
    assert on_disk["latency_avg_s"] == 0.000633
    assert on_disk["latency_p95_s"] is None and on_disk["percentile_source"] is None  # no -l log: none
    assert on_disk["tool_summary"]["transactions_processed"] == 7890
    assert outcome.value(on_disk, "tps") == 1577.704338
    assert not os.path.exists(run.file(outcome.SUMMARY + ".tmp"))


def test_an_old_run_directory_without_summary_json_still_gives_its_figures(tmp_path):
    run = _recorded_pgbench(str(tmp_path))
    assert outcome.read(run) is None
    assert outcome.outcome(run)["tps"] == 1577.704338
    assert not os.path.exists(run.file(outcome.SUMMARY))  # reading writes nothing


def test_a_run_cut_short_takes_the_mean_of_its_progress_lines(tmp_path):
    run = _recorded_pgbench(str(tmp_path))
    with open(run.file("stdout.log"), "wb") as f:
        f.write(b"")  # killed before the summary
    figures = outcome.compute(run)
    assert figures["tps_source"].startswith("mean of the progress lines")
    assert 1000 < figures["tps"] < 2500


def test_sysbench_percentile_is_kept_as_the_one_it_printed(tmp_path):
    data = _fixture("sysbench", "plain.txt")
    reads, _ = replay.replay_saved(data, lambda k, s: f"sb-{k}", 1_700_000_000.0)
    run = importer.save_import(str(tmp_path), "sb-1", "plain.txt", data, None, reads[0].model, reads[0].samples)
    figures = outcome.read(run)
    assert figures is not None
    assert figures["tps"] == 664.19 and abs(figures["latency_avg_s"] - 0.00301) < 1e-12
    assert abs(figures["latency_p95_s"] - 0.01145) < 1e-12 and "95th percentile" in figures["percentile_source"]
    meta = run.read_meta()
    assert set(meta["lacks"]) >= {"server_settings", "data_filesystem", "argv"}  # an import says what it lacks


def test_pgbench_latency_log_gives_percentiles(tmp_path):
    run = _recorded_pgbench(str(tmp_path))
    src = os.path.join(FIXTURES, "txlog", "threads")
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), run.file(name))
    prefix = os.listdir(src)[0].split(".")[0]
    run.update_meta(txlog_prefix=run.file(prefix))
    figures = outcome.compute(run)
    assert figures["latency_p50_s"] is not None and figures["latency_p95_s"] >= figures["latency_p50_s"]
    assert "per-transaction log" in figures["percentile_source"]


def test_filesystem_of_a_path_from_the_mount_table(tmp_path):
    table = tmp_path / "mountinfo"
    table.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
                     "30 22 8:2 / " + str(tmp_path) + " rw,noatime,nobarrier - xfs /dev/sdb rw,attr2,inode64\n")
    fs = filesystem(str(tmp_path / "mountinfo"), mountinfo=str(table))
    assert fs == {"mount_point": str(tmp_path), "type": "xfs", "device": "/dev/sdb",
                  "mount_options": "rw,noatime,nobarrier", "super_options": "rw,attr2,inode64"}
    assert filesystem("/no/such/path", mountinfo=str(table)) is None


def test_a_summary_that_cannot_be_computed_never_ends_the_run_badly(tmp_path, monkeypatch):
    run = _recorded_pgbench(str(tmp_path))
    said = []
    monkeypatch.setattr(replay, "replay_run_dir_model", lambda *a: (_ for _ in ()).throw(KeyError("boom")))
    assert outcome.save(run, notice=said.append) is None
    assert not os.path.exists(run.file(outcome.SUMMARY)) and "not written (KeyError" in said[0]


def test_settings_keep_no_secret():
    from benchwatch.util.secrets import redact_settings

    got = redact_settings({"primary_conninfo": "host=db1 user=rep password=s3cret sslmode=require",
                           "wsrep_sst_auth": "root:s3cret", "ssl_passphrase_command": "echo s3cret",
                           "shared_buffers": "16384 8kB", "ssl_key_file": "server.key", "wsrep_sst_auth_empty": ""})
    assert "s3cret" not in json.dumps(got)
    assert got["primary_conninfo"] == "host=db1 user=rep password=<redacted> sslmode=require"
    assert got["shared_buffers"] == "16384 8kB" and got["ssl_key_file"] == "server.key"


def test_lines_not_read_are_told_by_their_own_file_and_line(tmp_path):
    run = _recorded_pgbench(str(tmp_path))
    lines = _fixture("pgbench", "pg15_plain.stderr").split(b"\n")
    progress = [i for i, line in enumerate(lines) if line.startswith(b"progress:")]
    bad = progress[1]  # a progress line whose tps is nan: it costs that line, never the run
    lines[bad] = lines[bad].replace(lines[bad].split(b", ")[1], b"nan tps")
    with open(run.file("stderr.log"), "wb") as f:
        f.write(b"\n".join(lines))
    with open(run.file("stdout.log"), "ab") as f:
        f.write(b"progress: this line is cut\n")  # stdout is fed after stderr: numbered from 1 all the same
    saved = outcome.save(run)
    assert saved is not None
    assert saved["unread_lines"] == 2
    assert saved["unread"][0] == {"file": "stderr.log", "line": bad + 1, "reason": "tps is nan"}
    stdout_lines = _fixture("pgbench", "pg15_plain.stdout").rstrip(b"\n").count(b"\n") + 2
    assert saved["unread"][1]["file"] == "stdout.log" and saved["unread"][1]["line"] == stdout_lines
    notes = outcome.unread_notes(saved)
    assert notes[0].startswith("2 lines of the output not read")
    assert notes[1] == f"stderr.log line {bad + 1}: tps is nan; not read (kept in the raw output)"
    assert saved["progress_lines"] == len(progress) - 1 and saved["tps"] == 1577.704338
