"""Seeded mutations of real pgbench output and server logs, for the fuzz tests and bench/bench_fuzz.py."""

from __future__ import annotations

import glob
import os
import random

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")

# Values a number in a line may become: what a parser must take or refuse without crashing.
ODD_NUMBERS = [b"0", b"-1", b"NaN", b"nan", b"inf", b"-inf", b"1e309", b"99999999999999999999999", b"0.", b".5",
               b"1.2.3", b"", b"\xff\xfe", b"1e-400", b"-0",
               b"-nan", b"+Inf", b"9" * 400,  # sysbench's -nan, go-tpc's +Inf, an int that int() reads and float() cannot
               # Issue 32: the extremes that become times, ids and counts. Just under the bounds (benchwatch.util.bounds):
               # an epoch of the year 2286, three years elapsed (a run placed after such a run goes far); beyond
               # int64 (ms or counts), 2**64, a time_t's end.
               b"999999999999999999999", b"9999999999.999", b"99999999", b"9223372036854775808",
               b"18446744073709551616", b"-9223372036854775809", b"1e19", b"67767976233316800", b"1e300", b"-1e309"]


def seed_lines(pattern: str = "pgbench/*") -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted(p for p in glob.glob(os.path.join(FIXTURES, pattern)) if os.path.isfile(p)):
        with open(path, "rb") as f:
            lines.extend(f.read().split(b"\n"))
    return [line for line in lines if line]


def mutate(line: bytes, rng: random.Random) -> bytes:
    """One of: a byte flipped, cut short, a number made odd, junk inserted, a field doubled, or the line intact."""
    choice = rng.randrange(8)
    if not line or choice == 0:
        return line
    if choice == 1:
        i = rng.randrange(len(line))
        return line[:i] + bytes([rng.randrange(256)]) + line[i + 1:]
    if choice == 2:
        return line[:rng.randrange(len(line))]
    if choice == 3:
        words = line.split(b" ")
        digits = [i for i, w in enumerate(words) if any(c in b"0123456789" for c in w)]
        if digits:
            words[rng.choice(digits)] = rng.choice(ODD_NUMBERS)
        return b" ".join(words)
    if choice == 4:
        i = rng.randrange(len(line) + 1)
        return line[:i] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16))) + line[i:]
    if choice == 5:
        if rng.random() < 0.5:
            return line + b", " + line
        i, j = sorted(rng.randrange(len(line) + 1) for _ in range(2))
        return line[:i] + line[j:]  # a piece lost: what is left of two parts joined
    if choice == 6:
        return line.replace(b" ", b"\t" if rng.random() < 0.5 else b"\r")
    return bytes(rng.randrange(32, 127) for _ in range(rng.randrange(1, 200)))


def fuzzed_lines(n: int, seed: int, pattern: str = "pgbench/*") -> list[bytes]:
    rng = random.Random(seed)
    seeds = seed_lines(pattern)
    return [mutate(rng.choice(seeds), rng) for _ in range(n)]


def fuzzed_output(n: int, seed: int, pattern: str = "pgbench/*") -> bytes:
    """n mutated lines, newline-separated; every so often no newline at the end, or a NUL."""
    data = b"\n".join(fuzzed_lines(n, seed, pattern)) + b"\n"
    return data if seed % 3 else data[:-1] + b"\0"
