"""``perf script`` output to folded stacks per time slice, each sample in its group and process kind.

``perf script -F comm,pid,tid,time,ip,sym,dso`` prints one sample as a header line
(``postgres 4242/4242 12125.552517:``) and its call chain, leaf first, one frame a line
(``\t 1ab6c7 XLogFlush (/usr/lib/postgresql/15/bin/postgres)``), then a blank line. A frame whose
function perf cannot name is ``[unknown]``: kept so (counted), never replaced by a guess; runs of
unknown frames are one frame (an unwinder lost in code without names says no more by repeating).
"""

from __future__ import annotations

import gzip
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

UNKNOWN = "[unknown]"
# Bounds of the kept form: a slice keeps its MAX_STACKS most frequent stacks of each group and process kind,
# the rest counted as one "[other stacks]" stack; a stack keeps its MAX_DEPTH frames nearest the leaf.
MAX_STACKS = 200
MAX_DEPTH = 64
OTHER_STACKS = "[other stacks]"
TRUNCATED = "[truncated]"
SLICE_S = 1.0
GROUPS = ("database", "load_generator", "other", "idle")
IDLE = "[idle]"

_HEADER = re.compile(r"^(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+\.\d+):\s*$")
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")


@dataclass
class Sample:
    comm: str
    pid: int
    tid: int
    time: float
    frames: list[str]   # leaf first
    unknown_frames: int = 0


def parse_script(lines: Iterable[str]) -> Iterator[Sample]:
    """Samples of ``perf script -F comm,pid,tid,time,ip,sym,dso`` output, read line by line."""
    current: Sample | None = None
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if current is not None:
                yield current
                current = None
            continue
        if not line[0].isspace():
            if current is not None:
                yield current
            m = _HEADER.match(line)
            current = Sample(m["comm"], int(m["pid"]), int(m["tid"]), float(m["time"]), []) if m else None
            continue
        if current is None:
            continue
        f = _FRAME.match(line)
        sym = f["sym"] if f else UNKNOWN
        # perf appends "+0x1c" to a symbol with -F sym,symoff only; a bare name is a name.
        if sym.startswith("[unknown]") or not sym:
            sym = UNKNOWN
            current.unknown_frames += 1
        if sym == UNKNOWN and current.frames and current.frames[-1] == UNKNOWN:
            continue
        current.frames.append(sym)
    if current is not None:
        yield current


@dataclass
class Kinds:
    """Who a process is: its group (database, load_generator, other) and, for the database's, its kind."""
    server_comms: frozenset[str]
    load_generator_comms: frozenset[str]
    kind_of_pid: Mapping[int, str] = field(default_factory=dict)
    other_servers: frozenset[int] = frozenset()   # server processes of another server than the run's

    def of(self, comm: str, pid: int) -> tuple[str, str]:
        if pid in self.other_servers:
            return "other", f"{comm} (another server)"
        if comm in self.server_comms or pid in self.kind_of_pid:
            return "database", self.kind_of_pid.get(pid, "unknown kind")
        if comm in self.load_generator_comms:
            return "load_generator", comm
        return "other", comm or "?"


def stack_of(frames: list[str]) -> str:
    """A folded stack, root first, ';' between frames (a ';' in a name would split it: replaced)."""
    kept = frames[:MAX_DEPTH]
    names = [f.replace(";", ":") for f in reversed(kept)]
    if len(frames) > MAX_DEPTH:
        names.insert(0, TRUNCATED)
    return ";".join(names) if names else UNKNOWN


@dataclass
class Folded:
    """The kept form: (slice, group, kind) -> folded stack -> samples; with what could not be resolved."""
    start: float                     # the epoch of slice 0
    slice_s: float = SLICE_S
    slices: dict[tuple[int, str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    samples: int = 0
    unknown_leaf: int = 0            # samples whose leaf function has no name
    unknown_frames: int = 0          # frames without a name, in all samples
    frames: int = 0
    before_start: int = 0            # samples before slice 0 (dropped)

    def add(self, epoch: float, group: str, kind: str, frames: list[str], unknown_frames: int) -> None:
        if epoch < self.start:
            self.before_start += 1
            return
        index = int((epoch - self.start) // self.slice_s)
        self.slices[(index, group, kind)][stack_of(frames)] += 1
        self.samples += 1
        self.frames += len(frames)
        self.unknown_frames += unknown_frames
        if not frames or frames[0] == UNKNOWN:
            self.unknown_leaf += 1

    def bounded(self) -> None:
        """Each slice's group and kind to its MAX_STACKS most frequent stacks, the rest one stack."""
        for key, stacks in self.slices.items():
            if len(stacks) > MAX_STACKS:
                kept = Counter(dict(stacks.most_common(MAX_STACKS)))
                kept[OTHER_STACKS] += sum(stacks.values()) - sum(kept.values())
                self.slices[key] = kept

    def write(self, path: str) -> None:
        """slices.tsv.gz: one line per slice, group, kind and stack: ``slice group kind count stack``."""
        with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
            f.write(f"# benchwatch profile slices: start {self.start:.3f} slice_s {self.slice_s}\n")
            for (index, group, kind), stacks in sorted(self.slices.items()):
                for stack, count in stacks.most_common():
                    f.write(f"{index}\t{group}\t{kind.replace(chr(9), ' ')}\t{count}\t{stack}\n")


def fold(lines: Iterable[str], kinds: Kinds, start: float, to_epoch: Callable[[float], float]) -> Folded:
    """perf script's samples folded per slice from ``start`` (an epoch); ``to_epoch``: perf's clock to epoch."""
    out = Folded(start)
    for s in parse_script(lines):
        if s.pid == 0:
            # The idle task: a CPU with nothing to run. One stack, so that shares of the machine can be told.
            out.add(to_epoch(s.time), "idle", "idle", [IDLE], 0)
            continue
        group, kind = kinds.of(s.comm, s.pid)
        out.add(to_epoch(s.time), group, kind, s.frames, s.unknown_frames)
    out.bounded()
    return out


def read_slices(path: str) -> tuple[float, float, list[tuple[int, str, str, int, str]]]:
    """(start epoch, slice seconds, rows (slice, group, kind, count, stack)) of a slices.tsv.gz."""
    rows: list[tuple[int, str, str, int, str]] = []
    start, slice_s = 0.0, SLICE_S
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                words = line.split()
                if "start" in words:
                    start = float(words[words.index("start") + 1])
                if "slice_s" in words:
                    slice_s = float(words[words.index("slice_s") + 1])
                continue
            index, group, kind, count, stack = line.rstrip("\n").split("\t", 4)
            rows.append((int(index), group, kind, int(count), stack))
    return start, slice_s, rows
