"""A full disk under the state directory (issue 12): pgbench's output still reaches the terminal
byte for byte, its exit code is unchanged, benchwatch says once what it could not save, and what
was saved up to then is intact. The state dir is a small tmpfs, filled up before the run."""

from __future__ import annotations

import os
import subprocess

import pytest

from benchwatch.engines.postgresql.server import pg_bindir
from tests.helpers.throwaway import BENCHWATCH

pytestmark = pytest.mark.integration


@pytest.fixture
def full_state_dir(tmp_path):
    mount = tmp_path / "state"
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True, text=True)
    assert r.returncode == 0, f"mounting a tmpfs needs root: {r.stderr}"
    try:
        yield str(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: str, leave: int) -> None:
    """Fill the filesystem, then free ``leave`` bytes: room for the run directory and a little output."""
    with open(os.path.join(directory, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    os.truncate(os.path.join(directory, "filler"), max(0, os.path.getsize(os.path.join(directory, "filler")) - leave))


def test_run_on_a_full_disk(live_stack, full_state_dir):
    # -d: pgbench's debug output, a few hundred bytes per transaction on stderr, outgrows the 48 KiB left.
    fill(full_state_dir, 48 * 1024)
    pgbench = os.path.join(pg_bindir(), "pgbench")
    argv = [pgbench, "-n", "-d", "-c", "1", "-t", "300", "-P", "1"]
    env = dict(live_stack.pg_env(), BENCHWATCH_STATE_DIR=full_state_dir)
    direct = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    wrapped = subprocess.run([BENCHWATCH, "run", "--", *argv], capture_output=True, env=env, timeout=120)
    assert direct.returncode == 0 and len(direct.stderr) > 200_000, direct.stderr[-500:]
    assert wrapped.returncode == direct.returncode
    lines = wrapped.stderr.split(b"\n")
    ours = [line for line in lines if line.startswith(b"benchwatch: ")]
    theirs = b"\n".join(line for line in lines if not line.startswith(b"benchwatch: "))
    said = [line for line in ours if b"cannot save" in line]
    assert len(said) == 1, ours
    assert b"No space left on device" in said[0]
    # The terminal got all of pgbench's output: every transaction's debug lines, as the direct run's. (Not its
    # length: how many "receiving" lines -d prints depends on how often the client woke, 10 % apart under load.)
    assert theirs.count(b"sending END;") == direct.stderr.count(b"sending END;") == 300
    assert theirs.rstrip(b"\n").split(b"\n")[-1].startswith(b"pgbench: client 0")
    assert wrapped.stdout.split(b"\n")[-4:] != [] and b"number of transactions actually processed: 300/300" in wrapped.stdout
    # What was saved is intact: a prefix of what the terminal got.
    runs = os.path.join(full_state_dir, "runs")
    (run_id,) = os.listdir(runs)
    with open(os.path.join(runs, run_id, "stderr.log"), "rb") as f:
        saved = f.read()
    assert saved and len(saved) < len(theirs) and theirs.startswith(saved)
