"""The wrapper's copy of a tool's output with the tool's redaction: a secret the tool prints back is neither
shown nor saved, even when a read cuts its line in two."""

from __future__ import annotations

import io
import os
import threading

from benchwatch.record.stream import pump


def _redact(line: bytes) -> bytes:
    return line.replace(b"hunter2", b"*****")


def test_each_line_is_redacted_on_the_terminal_and_in_the_file_across_reads(tmp_path):
    r, w = os.pipe()
    terminal = io.BytesIO()
    path = tmp_path / "stdout.log"
    with open(path, "wb") as saved:
        t = threading.Thread(target=pump, args=(r, [terminal], saved, None, _redact))
        t.start()
        os.write(w, b'"mysql.user"="bw"\n"mysql.password"="hun')
        os.write(w, b'ter2"\nREAD   - Takes(s): 1.0\nlast line hunter2')  # no newline at the end
        os.close(w)
        t.join(10)
    os.close(r)
    expected = b'"mysql.user"="bw"\n"mysql.password"="*****"\nREAD   - Takes(s): 1.0\nlast line *****'
    assert path.read_bytes() == expected
    assert terminal.getvalue() == expected


def test_without_a_redaction_the_bytes_pass_unchanged(tmp_path):
    r, w = os.pipe()
    terminal = io.BytesIO()
    path = tmp_path / "stdout.log"
    data = b"hunter2\npartial"
    with open(path, "wb") as saved:
        t = threading.Thread(target=pump, args=(r, [terminal], saved, None))
        t.start()
        os.write(w, data)
        os.close(w)
        t.join(10)
    os.close(r)
    assert path.read_bytes() == data and terminal.getvalue() == data
