"""Files only their owner may read (0600): passwords, DSNs, client option files, what the supervisor restarts.

Every such file is written here, one way: the bytes go into a new file beside
the target, created 0600 and exclusively (``mkstemp``: a stale temporary file
of a wider mode is never reused), then renamed over the target. So no reader
ever sees half of it (the supervisor follows components.json, an exporter
reads its client file at any moment), and no moment exists where its bytes
sit in a file others may read: ``open(path, O_CREAT | O_TRUNC, 0o600)`` keeps
the mode of a file that is already there, and an earlier ``chmod`` or a copy
may have widened it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

MODE = 0o600


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_private(path: str, data: str | bytes, *, owner: str | None = None, fsync: bool = False,
                  exclusive: bool = False) -> None:
    """``path`` holding ``data`` (str as UTF-8), mode 0600, replaced whole or not at all.

    ``owner``: the OS user (and group of the same name) the file belongs to, set before it appears
    (libpq and initdb running as postgres read it). ``fsync``: on the disk before this returns (the
    rename as well). ``exclusive``: raise FileExistsError instead of replacing a file already there
    (two processes creating the same password: the first one's stays)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        # mkstemp creates 0600 already; said again so that this module alone decides the mode.
        os.fchmod(fd, MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(_bytes(data))
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if owner:
            shutil.chown(tmp, owner, owner)
        if exclusive:
            os.link(tmp, path)  # fails if path exists, and path appears whole
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if fsync:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def append_private(path: str, data: str | bytes, *, fsync: bool = False) -> None:
    """``data`` added at the end of ``path`` in one write, the file created 0600 if it is not there yet."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, MODE)
    try:
        os.write(fd, _bytes(data))
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
