"""Wait until a followed file changes: Linux inotify through libc, polling elsewhere.

The exporter used to look at every file four times a second, the supervisor at
its pid files once a second. With inotify they sleep until one of the files
they follow (or a directory watched for new runs) changes, or, for the
supervisor, until a process it holds a pidfd of ends (``wait(fds=...)``), so an
idle second costs nothing and a change is seen within milliseconds. Where
inotify is missing (another OS, no libc, no watch left), :meth:`Waker.wait`
simply sleeps for the poll interval, as before.

Watches are on directories, filtered by file name: files that are replaced by
rename (meta.json) or rotated (server logs) keep being seen, and a busy file in
the same directory (a transaction log, other components' logs) wakes no one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

log = logging.getLogger("benchwatch.wake")

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then len bytes of name


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch  # noqa: B018 - present?
    except (OSError, AttributeError):
        return None
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


@dataclass
class Wakeup:
    """What ended a :meth:`Waker.wait`; false when nothing did (the timeout)."""

    woken: bool = False  # wake() was called
    changed: bool = False  # a watched path changed
    fds: list[int] = field(default_factory=list)  # those of the extra fds that became readable

    def __bool__(self) -> bool:
        return self.woken or self.changed or bool(self.fds)


class Waker:
    """``watch(paths)`` says what to wait for; ``wait(timeout)`` returns early when one of them changes.

    A path that is a directory wakes on any change inside it (a new run); any
    other path wakes on changes to that file, which need not exist yet.
    """

    def __init__(self, *, use_inotify: bool = True):
        self.fd: int | None = None
        self._libc = _libc() if use_inotify else None
        if self._libc is not None:
            fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd >= 0:
                self.fd = fd
            else:
                log.info("inotify unavailable (%s): polling files instead", os.strerror(ctypes.get_errno()))
        # A pipe that wake() writes to, so that stopping need not wait for a timeout.
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._dirs: dict[str, int] = {}  # watched directory -> watch descriptor
        self._wanted: dict[int, set[str] | None] = {}  # wd -> file names that wake, None: any
        self._failed: set[str] = set()

    @property
    def active(self) -> bool:
        return self.fd is not None

    def watch(self, paths: Iterable[str]) -> None:
        """Wait for changes to exactly these paths from now on (idempotent; cheap when unchanged)."""
        fd, libc = self.fd, self._libc
        if fd is None or libc is None:
            return
        wanted: dict[str, set[str] | None] = {}
        for path in paths:
            if os.path.isdir(path):
                wanted[path] = None
            else:
                directory, name = os.path.split(path)
                names = wanted.setdefault(directory or ".", set())
                if names is not None:
                    names.add(name)
        for directory in [d for d in self._dirs if d not in wanted]:
            gone = self._dirs.pop(directory)
            self._wanted.pop(gone, None)
            libc.inotify_rm_watch(fd, gone)
        for directory, names in wanted.items():
            wd = self._dirs.get(directory)
            if wd is None:
                wd = libc.inotify_add_watch(fd, os.fsencode(directory), MASK)
                if wd < 0:
                    err = ctypes.get_errno()
                    if directory not in self._failed and err != errno.ENOENT:
                        self._failed.add(directory)
                        log.warning("cannot watch %s (%s): it is polled every wait instead", directory, os.strerror(err))
                    continue
                self._dirs[directory] = wd
            self._wanted[wd] = names

    def wait(self, timeout: float, fds: Collection[int] = ()) -> Wakeup:
        """Sleep until a watched path changes, wake() is called, one of ``fds`` is readable, or ``timeout`` s pass.

        True if woken early; the :class:`Wakeup` says by what. ``fds`` are the
        caller's (pidfds, a listening socket): they are reported, never read.
        """
        own = [self._r] if self.fd is None else [self.fd, self._r]
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select(own + list(fds), [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return Wakeup()
            woken = Wakeup(fds=[fd for fd in ready if fd in fds])
            if self._r in ready:
                self._drain(self._r)
                woken.woken = True
            if self.fd is not None and self.fd in ready:
                woken.changed = self._read_events()
            if woken:
                return woken
            # Only files nobody follows changed (a transaction log, another log): sleep on.

    def wake(self) -> None:
        """End the current wait() now (safe from a signal handler or another thread)."""
        try:
            os.write(self._w, b"\0")
        except BlockingIOError:
            pass  # the pipe is full: a wake-up is pending anyway

    def _read_events(self) -> bool:
        relevant = False
        assert self.fd is not None  # only called when inotify is active
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return relevant
            offset = 0
            while offset + _EVENT.size <= len(buf):
                wd, mask, _cookie, length = _EVENT.unpack_from(buf, offset)
                name = buf[offset + _EVENT.size:offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    relevant = True  # events were lost: look at everything
                    continue
                if mask & IN_IGNORED:  # the directory went away
                    for directory, d in list(self._dirs.items()):
                        if d == wd:
                            del self._dirs[directory]
                    self._wanted.pop(wd, None)
                    relevant = True
                    continue
                names = self._wanted.get(wd, set())
                if names is None or os.fsdecode(name) in names:
                    relevant = True

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        for fd in (self.fd, self._r, self._w):
            if fd is not None:
                os.close(fd)
        self.fd = None
