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
