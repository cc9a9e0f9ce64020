"""Facts about the machine a run ran on: read once, when the run starts, kept in meta.json["host"].

Snapshots and summaries read them back from there (benchwatch.share), so a run
directory copied elsewhere still says which CPU and disks produced its curve.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any

# Block devices that are not disks: RAM disks, loop devices, swap on zram, floppies, optical drives.
NOT_DISK_PATTERN = "(ram|loop|fd|sr|zram|nbd)"
NOT_DISKS = re.compile(NOT_DISK_PATTERN)
# The PromQL matcher of node_exporter's devices that are disks a database can live on (dashboards, evidence).
DISKS = f'device!~"{NOT_DISK_PATTERN}.*"'


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def disks(sys_block: str = "/sys/block") -> list[dict[str, Any]]:
    out = []
    try:
        names = sorted(os.listdir(sys_block))
    except OSError:
        return []
    for name in names:
        if NOT_DISKS.match(name):
            continue
        base = os.path.join(sys_block, name)
        size = _read(os.path.join(base, "size"))
        out.append({"name": name, "size_bytes": int(size) * 512 if size and size.isdigit() else None,
                    "rotational": _read(os.path.join(base, "queue", "rotational")) == "1",
                    "model": _read(os.path.join(base, "device", "model")),
                    "scheduler": _read(os.path.join(base, "queue", "scheduler"))})
    return out


_name: str | None = None


def set_name(name: str | None) -> None:
    """This host's name on the runs it records (``up --host``, kept in stack.json), set by the commands."""
    global _name
    _name = name or None


def name() -> str:
    """This host's name on its records (meta.json's hostname): ``up --host`` or BENCHWATCH_HOST, else the machine's.
    The machine's own name stays in meta.json's host facts (``nodename``)."""
    return _name or os.environ.get("BENCHWATCH_HOST") or socket.gethostname()


def host_facts() -> dict[str, Any]:
    """Name, CPUs, memory, kernel and block devices of this machine (best effort, a few ms)."""
    host: dict[str, Any] = {"nodename": socket.gethostname(), "cpus": os.cpu_count(), "kernel": os.uname().release}
    cpuinfo = _read("/proc/cpuinfo") or ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), None)
    if model:
        host["cpu_model"] = " ".join(model.split())
    meminfo = _read("/proc/meminfo") or ""
    total = next((line.split()[1] for line in meminfo.splitlines() if line.startswith("MemTotal:")), None)
    if total and total.isdigit():
        host["memory_bytes"] = int(total) * 1024
    host["disks"] = disks()
    return host


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem(path: str, mountinfo: str = "/proc/self/mountinfo") -> dict[str, Any] | None:
    """The filesystem holding ``path`` on this machine: mount point, type, device and mount options
    (per mount and per superblock, as the kernel lists them); None when the path or the mount table
    cannot be read (a server on another machine: its data directory is not ours to look at)."""
    try:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            return None
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best: dict[str, Any] | None = None
    for line in lines:
        # id parent major:minor root mount_point mount_options [optional...] - fstype source super_options
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        # The last mount over a point wins (it hides those before), hence >=.
        if inside and (best is None or len(point) >= len(best["mount_point"])):
            best = {"mount_point": point, "type": tail[0], "device": _unescape(tail[1]),
                    "mount_options": fields[5], "super_options": tail[2]}
    return best
