"""Copying a load generator's output: to the terminal unchanged, to the run directory as it arrives.

Before the first progress line is saved, the moment the load generator's clock
started (arrival of that line minus its elapsed time) is stamped into
meta.json, so every progress sample lands at the load generator's own time.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import BinaryIO, TextIO

from benchwatch.record import rundir


class SaveFailures:
    """Says once, and clearly, what could not be saved (a full disk), and keeps the run going.

    pgbench's output must still reach the terminal byte for byte and its exit code stay as it
    is: a failed write of the saved copy or of meta.json is reported here, never raised."""

    def __init__(self, notice: Callable[[str], None]):
        self.notice = notice
        self.failed: list[str] = []
        self.lock = threading.Lock()

    def failure(self, what: str, error: OSError, saved_bytes: int | None = None) -> None:
        with self.lock:
            first = not self.failed
            self.failed.append(what)
        if first:
            kept = f" (the first {saved_bytes} bytes are saved and intact)" if saved_bytes is not None else ""
            self.notice(f"cannot save {what}: {error.strerror or error}{kept}; the run goes on and its output "
                        "still reaches the terminal, but the rest is not saved, nor sent to Prometheus")


class SavedCopy:
    """The run directory's copy of a stream: stops writing at the first failure, said once via SaveFailures."""

    def __init__(self, f: BinaryIO, path: str, failures: SaveFailures | None):
        self.f, self.path, self.failures = f, path, failures
        self.written = 0
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            return
        view = memoryview(data)
        try:
            while view:
                n = self.f.write(view)  # unbuffered files may take part of it (the disk filling up)
                n = len(view) if n is None else n
                self.written += n
                view = view[n:]
            self.f.flush()  # each chunk to the file now: the exporter follows it, and a full disk shows here
        except OSError as e:
            self._fail(e)

    def flush(self) -> None:
        if self.broken:
            return
        try:
            self.f.flush()
        except OSError as e:
            self._fail(e)

    def _fail(self, error: OSError) -> None:
        self.broken = True
        if self.failures is None:
            raise error
        self.failures.failure(self.path, error, self.written)


class ClockStamper:
    """Writes clock_start_epoch into meta.json when the first progress line arrives.

    ``elapsed`` reads a line's elapsed seconds (the load generator's, see
    benchwatch.loadgens), None for lines that are not progress lines.

    A load generator whose lines carry no time (``arrivals``: its test of a
    progress line) gets every progress line's arrival appended to the run
    directory's ARRIVALS file (one epoch per line, in order) before the line is
    saved, so the line and its time are read together, live or replayed; its
    clock starts one ``interval`` before the first line.
    """

    def __init__(self, run: rundir.RunDir, elapsed: Callable[[bytes], float | None],
                 clock: Callable[[], float] = time.time, failures: SaveFailures | None = None,
                 arrivals: Callable[[bytes], bool] | None = None, interval: float | None = None):
        self.run = run
        self.failures = failures
        self.elapsed = elapsed
        self.clock = clock
        self.stamped = False
        self.lock = threading.Lock()
        self.arrivals = arrivals
        self.interval = interval or 0.0
        self._arrivals_file: TextIO | None = None

    @property
    def done(self) -> bool:
        """Nothing more to stamp: the output may be saved without looking at its lines."""
        return self.stamped and self.arrivals is None

    def see(self, line: bytes) -> None:
        if self.arrivals is not None:
            self._arrival(line)
            return
        if self.stamped:
            return
        elapsed = self.elapsed(line)
        if elapsed is None:
            return
        with self.lock:
            if self.stamped:
                return
            # With --progress-timestamp the line carries epoch seconds: it is its own clock.
            if elapsed <= 1e8:
                self._stamp(round(self.clock() - elapsed, 6))
            self.stamped = True

    def _stamp(self, start: float) -> None:
        try:
            self.run.update_meta(clock_start_epoch=start)
        except OSError as e:
            if self.failures is None:
                raise
            self.failures.failure(self.run.file(rundir.META), e)

    def _arrival(self, line: bytes) -> None:
        assert self.arrivals is not None
        if not self.arrivals(line.rstrip(b"\r")):
            return
        now = self.clock()
        with self.lock:
            if not self.stamped:
                self._stamp(round(now - self.interval, 6))
                self.stamped = True
            try:
                if self._arrivals_file is None:
                    self._arrivals_file = open(self.run.file(rundir.ARRIVALS), "a", encoding="ascii")
                self._arrivals_file.write(f"{now:.6f}\n")
                self._arrivals_file.flush()
            except OSError as e:
                if self.failures is None:
                    raise
                self.failures.failure(self.run.file(rundir.ARRIVALS), e)

    def close(self) -> None:
        if self._arrivals_file is not None:
            try:
                self._arrivals_file.close()
            except OSError:
                pass


class LineSafeStream:
    """The load generator's stream to the terminal, with benchwatch's own lines put only between its lines.

    pgbench may write a progress line in several pieces; an alert printed in
    between would split it. Lines said mid-line wait for the next newline.
    """

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.lock = threading.Lock()
        self.at_line_start = True
        self.pending: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        with self.lock:
            self._out(chunk)
            self.at_line_start = chunk.endswith(b"\n")
            if self.at_line_start and self.pending:
                self._out(b"".join(self.pending))
                self.pending.clear()

    def flush(self) -> None:
        pass  # every write is flushed

    def say(self, line: str) -> None:
        data = line.rstrip("\n").encode() + b"\n"
        with self.lock:
            if self.at_line_start:
                self._out(data)
            else:
                self.pending.append(data)

    def close(self) -> None:
        with self.lock:
            if self.pending:
                self._out((b"" if self.at_line_start else b"\n") + b"".join(self.pending))
                self.pending.clear()

    def _out(self, data: bytes) -> None:
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the run


def _echo(sinks: list[BinaryIO], data: bytes) -> None:
    for sink in sinks:
        try:
            sink.write(data)
            sink.flush()
        except (OSError, ValueError):
            pass  # a closed terminal must not lose the saved copy


def pump(source_fd: int, sinks: list[BinaryIO], saved: BinaryIO, stamper: ClockStamper | None,
         redact: Callable[[bytes], bytes] | None = None) -> None:
    """Copy a stream to the terminal unchanged and to its file in the run directory.

    ``redact`` (a tool that prints back a secret it was given: LoadGenerator.output_redactor): every line
    as it leaves it, on the terminal and in the file alike; a line is then shown once it is complete."""
    pending = b""  # while unstamped, hold a line starting with "progress:" until it is complete
    while True:
        try:
            chunk = os.read(source_fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        if redact is not None:
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            lines = [redact(line) for line in lines]
            if stamper is not None:
                for line in lines:
                    stamper.see(line)  # before the line is saved, as below
            data = b"".join(line + b"\n" for line in lines)
            _echo(sinks, data)
            saved.write(data)
            saved.flush()
            continue
        _echo(sinks, chunk)
        if stamper is None or stamper.done:
            saved.write(chunk)
            saved.flush()
            continue
        data = pending + chunk
        lines = data.split(b"\n")
        pending = lines.pop()
        for line in lines:
            stamper.see(line)
            saved.write(line + b"\n")
        if stamper.done and pending:
            saved.write(pending)
            pending = b""
        saved.flush()
    if pending:
        if redact is not None:
            pending = redact(pending)
            if stamper is not None:
                stamper.see(pending)
            _echo(sinks, pending)
        saved.write(pending)
    saved.flush()
