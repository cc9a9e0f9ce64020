"""benchwatch.util.private: every 0600 file is born 0600 and replaced whole."""

from __future__ import annotations

import os
import pwd
import stat
import threading
import time

import pytest

from benchwatch.util.private import append_private, write_private


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask():
    # The widest umask: the mode must come from the writer, not from the environment.
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_file_is_0600_whatever_the_umask(tmp_path, open_umask):
    path = tmp_path / "secret"
    write_private(str(path), "pässword\n")
    assert mode(path) == 0o600
    assert path.read_bytes() == "pässword\n".encode()
    write_private(str(path), b"\x00bytes", fsync=True)
    assert path.read_bytes() == b"\x00bytes" and mode(path) == 0o600
    assert os.listdir(tmp_path) == ["secret"]  # no temporary file left behind


def test_a_wider_file_already_there_is_replaced_not_reused(tmp_path, open_umask):
    path = tmp_path / "pgpass"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    inode = os.stat(path).st_ino
    write_private(str(path), "new\n")
    assert mode(path) == 0o600 and path.read_text() == "new\n"
    assert os.stat(path).st_ino != inode


def test_a_link_at_the_path_is_replaced_not_written_through(tmp_path):
    elsewhere = tmp_path / "world-readable"
    elsewhere.write_text("public\n")
    os.chmod(elsewhere, 0o644)
    path = tmp_path / "secret"
    path.symlink_to(elsewhere)
    write_private(str(path), "hidden\n")
    assert not path.is_symlink() and mode(path) == 0o600 and path.read_text() == "hidden\n"
    assert elsewhere.read_text() == "public\n"


def test_exclusive_keeps_the_first_file(tmp_path):
    path = tmp_path / "password"
    write_private(str(path), "first\n", exclusive=True)
    with pytest.raises(FileExistsError):
        write_private(str(path), "second\n", exclusive=True)
    assert path.read_text() == "first\n" and mode(path) == 0o600
    assert os.listdir(tmp_path) == ["password"]


def test_owner_is_set_before_the_file_appears(tmp_path):
    me = pwd.getpwuid(os.geteuid())
    path = tmp_path / "pwfile"
    write_private(str(path), "x\n", owner=me.pw_name)
    assert os.stat(path).st_uid == me.pw_uid and mode(path) == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "secret"
    write_private(str(path), "old\n")
    with pytest.raises(TypeError):
        write_private(str(path), 42)  # type: ignore[arg-type]
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["secret"]


def test_readers_see_the_old_or_the_new_file_never_a_part_nor_a_wider_mode(tmp_path, open_umask):
    """A reader beside the writer: every read is one whole version, every file in the directory 0600."""
    path = str(tmp_path / "components.json")
    versions = [b"a" * 300_000, b"b" * 200_000]
    write_private(path, versions[0])
    seen: set[bytes] = set()
    problems: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            with open(path, "rb") as f:
                data = f.read()
            if data not in versions:
                problems.append(f"read {len(data)} bytes, not a whole version")
            seen.add(data)
            for name in os.listdir(tmp_path):
                try:
                    m = mode(tmp_path / name)
                except FileNotFoundError:
                    continue  # a temporary file renamed meanwhile
                if m != 0o600:
                    problems.append(f"{name} had mode {m:o}")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        n = 0
        while (n < 200 or len(seen) < 2) and time.monotonic() < deadline:
            n += 1
            write_private(path, versions[n % 2])
    finally:
        done.set()
        reader.join()
    assert not problems, problems[:5]
    assert seen == set(versions)


def test_append_creates_0600_and_adds_lines(tmp_path, open_umask):
    path = tmp_path / "state.jsonl"
    append_private(str(path), '{"event": "start"}\n', fsync=True)
    append_private(str(path), b'{"event": "end"}\n')
    assert mode(path) == 0o600
    assert path.read_text().splitlines() == ['{"event": "start"}', '{"event": "end"}']
