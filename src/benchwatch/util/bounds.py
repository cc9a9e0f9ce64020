"""Bounds on a number read from input (a tool's output, a meta.json, a server log) before it becomes a time,
an id, a duration or a count: beyond them the number is a damaged line's, not a measurement.

One place per kind, so that ``import``, ``attach``, ``run`` and the exporter refuse the same numbers:
a caller that gets a problem back reports the line (or run) the number came from and skips it.
Python's ints have no size and its floats reach 1.8e308; ``time.gmtime``, a run id's stamp, the
int64 milliseconds of remote write and Prometheus' float seconds do not.
"""

from __future__ import annotations

import math
import time

# A Unix time (seconds) past 2286-11-20 is no clock's: no run starts or ends there. Its milliseconds
# fit in int64 and in a double exactly, and a run id's stamp keeps its eight-digit date.
MAX_EPOCH_S = 1e10
MAX_EPOCH_MS = int(MAX_EPOCH_S * 1000)
# Elapsed seconds as a tool prints them: the same limit (a line above 1e8 s carries a Unix time).
MAX_TIME_S = MAX_EPOCH_S
# A trillion transactions (queries, errors) a second, or counted in one line: beyond is a damaged figure.
MAX_RATE = 1e12
# A progress interval or a pause longer than a day is a damaged figure (nothing reports that seldom).
MAX_INTERVAL_S = 86_400.0
# How far a run's clock may move at one line: from one progress line to the next, from its start to its
# first line, from its last line to the end its summary's duration says. A week: a damaged number
# (99999999 s, three years) would otherwise place the rest of the run, and every run a file places after
# it, years on; a few of them reach past MAX_EPOCH_S.
MAX_STEP_S = 7 * 86_400.0
# When the day is: "2286-11-20", for messages.
EPOCH_LIMIT_TEXT = "2286-11-20"


def figure_problem(name: str, value: object, limit: float = MAX_RATE) -> str | None:
    """Why a figure cannot be used (nan, inf, negative, absurd, no number), or None when it can (or is absent).
    An int of any size may be given (a parser's int() of a long run of digits)."""
    if value is None or (type(value) is float and 0.0 <= value <= limit):  # the usual case, first (nan fails it)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{name} is no number ({value!r:.40})"
    try:
        number = float(value)
    except OverflowError:
        return f"{name} is absurd (over 1e308)"
    if not math.isfinite(number):
        return f"{name} is {number}"
    if number < 0:
        return f"{name} is negative ({number:g})"
    if number > limit:
        return f"{name} is absurd ({number:g})"
    return None


def epoch_problem(name: str, epoch_s: object) -> str | None:
    """Why a Unix time (seconds) cannot place anything: before 1970, past MAX_EPOCH_S, or no number."""
    problem = figure_problem(name, epoch_s, MAX_EPOCH_S)
    if problem is not None and "absurd" in problem:
        return f"{name} is past {EPOCH_LIMIT_TEXT} ({problem.rsplit('(', 1)[-1]}"
    return problem


def epoch_or_none(epoch_s: object) -> float | None:
    """A Unix time (seconds) that can place something, as a float; None for any other value."""
    return None if epoch_s is None or epoch_problem("time", epoch_s) is not None else float(epoch_s)  # type: ignore[arg-type]


def interval_or_none(seconds: object) -> float | None:
    """A progress interval, a pause or a sleep in seconds: above 0 and at most MAX_INTERVAL_S, else None."""
    if seconds is None or figure_problem("interval", seconds, MAX_INTERVAL_S) is not None:
        return None
    value = float(seconds)  # type: ignore[arg-type]
    return value if value > 0 else None


def ms_in_range(ms: object) -> bool:
    """Whether a sample's timestamp (ms) can be written: Prometheus' int64 and float seconds, within MAX_EPOCH_MS."""
    return type(ms) is int and 0 <= ms <= MAX_EPOCH_MS + 86_400_000  # a day of 1-ms steps past the last start


# Linux's highest pid (pid_max at most 2**22): a recorded pid beyond it, or no int, names no process.
MAX_PID = 1 << 22


def pid_or_none(pid: object) -> int | None:
    """A process id as recorded (a pid file, meta.json): an int from 1 to MAX_PID, else None."""
    return pid if type(pid) is int and 0 < pid <= MAX_PID else None


def future_problem(name: str, epoch_s: float) -> str | None:
    """Why a Unix time a tool printed (pgbench --progress-timestamp) is damaged: it is more than MAX_STEP_S
    after now. A tool prints its own clock's time, so a saved output's times are all in the past; one in
    the year 2286 would place every run a file places after it beyond MAX_EPOCH_S."""
    if epoch_s > time.time() + MAX_STEP_S:
        return f"{name} is in the future ({epoch_s:.0f})"
    return None
