"""Follow a growing file line by line, as ``tail -F`` would.

Used for run output, and for logs that rotate or do not exist yet: a file that
shrinks or is replaced (new inode) is read again from its start.
"""

from __future__ import annotations

import os

READ_CHUNK = 1 << 20


class LineFollower:
    def __init__(self, path: str, *, from_end: bool = False):
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.partial = b""
        self.from_end = from_end

    def read_lines(self, max_bytes: int = 16 * READ_CHUNK) -> list[bytes]:
        """Complete lines (without newline) appended since the last call."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        if self.inode is None:
            self.inode = st.st_ino
            if self.from_end:
                self.offset = st.st_size
        elif st.st_ino != self.inode or st.st_size < self.offset:
            # Rotated or truncated: start over on the new file.
            self.inode, self.offset, self.partial = st.st_ino, 0, b""
        if st.st_size <= self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(max_bytes, st.st_size - self.offset))
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return lines

    def read_chunk(self, max_bytes: int = 16 * READ_CHUNK) -> bytes:
        """Like read_lines, as one bytes object of complete newline-terminated lines (no per-line split)."""
        lines_before = self.partial
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return b""
        if self.inode is None:
            self.inode = st.st_ino
            if self.from_end:
                self.offset = st.st_size
        elif st.st_ino != self.inode or st.st_size < self.offset:
            self.inode, self.offset, self.partial, lines_before = st.st_ino, 0, b"", b""
        if st.st_size <= self.offset:
            return b""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(max_bytes, st.st_size - self.offset))
        self.offset += len(data)
        data = lines_before + data
        cut = data.rfind(b"\n") + 1
        self.partial = data[cut:]
        return data[:cut]

    def take_partial(self) -> bytes | None:
        """The unterminated last line, once the writer is known to be done."""
        rest, self.partial = self.partial, b""
        return rest or None
