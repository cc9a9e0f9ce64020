"""Read a sysbench 1.0 command line: ``sysbench [--opt[=value]]... [testname] [command] [--opt...]``.

sysbench takes only long options, each ``--name=value`` or ``--name`` (a
boolean switched on); they may come before or after the test name. The
deprecated aliases of 1.0 (``--num-threads``, ``--max-time``, ...) are read as
the names they stand for. Never rewrites the user's arguments: the only
options benchwatch adds go first (``--report-interval=1`` when none was
given, and the stack's ``--config-file``, see benchwatch.loadgens.sysbench.connect).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

COMMANDS = ("prepare", "run", "cleanup", "help", "warmup", "prewarm")
_ALIASES = {"num-threads": "threads", "max-time": "time", "max-requests": "events", "tx-rate": "rate"}


@dataclass
class SysbenchArgs:
    options: dict[str, str] = field(default_factory=dict)  # last value wins, as in sysbench
    test: str | None = None
    command: str | None = None
    error: str | None = None

    def info_labels(self) -> dict[str, str]:
        """sysbench's run_info labels, named as pgbench's where they mean the same."""
        labels: dict[str, str] = {}
        if self.test:
            labels["script"] = os.path.basename(self.test).removesuffix(".lua")
        if self.command:
            labels["command"] = self.command
        for option, label in (("threads", "threads"), ("time", "duration_seconds"), ("events", "transactions"),
                              ("rate", "rate_limit_tps"), ("tables", "tables"), ("table-size", "table_size"),
                              ("table_size", "table_size"), ("percentile", "percentile"),
                              ("db-driver", "db_driver"), ("mysql-db", "database")):
            if option in self.options:
                labels[label] = self.options[option]
        return labels


def parse_sysbench_args(argv: list[str]) -> SysbenchArgs:
    out = SysbenchArgs()
    positional: list[str] = []
    for arg in argv:
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            if not name:
                out.error = "a bare --"
                continue
            name = _ALIASES.get(name, name)
            out.options[name] = value if eq else "on"
        else:
            positional.append(arg)
    if positional:
        if positional[-1] in COMMANDS:
            out.command = positional.pop()
        if positional:
            out.test = positional[0]
        if len(positional) > 1:
            out.error = f"unexpected argument {positional[1]!r}"
    return out


def progress_interval(parsed: SysbenchArgs) -> float | None:
    value = parsed.options.get("report-interval")
    try:
        interval = float(value) if value is not None else None
    except ValueError:
        return None
    return interval if interval else None  # 0 disables the reports


def ensure_progress(argv: list[str], interval: int = 1) -> tuple[list[str], list[str]]:
    """argv with ``--report-interval=N`` first when none was given (for a run); and what was added."""
    parsed = parse_sysbench_args(argv)
    if "report-interval" in parsed.options or parsed.command in ("prepare", "cleanup", "help", "prewarm", "warmup"):
        return list(argv), []
    if "help" in parsed.options or "version" in parsed.options:
        return list(argv), []
    added = [f"--report-interval={interval}"]
    return added + list(argv), added


def threads_option(argv: list[str]) -> str | None:
    """"--threads" when argv sets the number of threads itself (sweep --clients sets it per cell)."""
    return "--threads" if "threads" in parse_sysbench_args(argv).options else None


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    """argv with ``--option=value`` first and any other value of that option removed."""
    name = option.lstrip("-")
    kept = [a for a in argv if not (a.startswith("--") and _ALIASES.get(a[2:].partition("=")[0], a[2:].partition("=")[0])
                                    == _ALIASES.get(name, name))]
    return [f"--{name}={value}", *kept]


def reinit_argvs(argv: list[str]) -> list[list[str]]:
    """The test's ``cleanup`` then ``prepare`` with argv's options: its tables made again."""
    parsed = parse_sysbench_args(argv)
    if parsed.error or parsed.test is None or parsed.command is None:
        return []
    out = []
    for command in ("cleanup", "prepare"):
        replaced, done = [], False
        for a in argv:
            if not done and not a.startswith("--") and a == parsed.command:
                replaced.append(command)
                done = True
            else:
                replaced.append(a)
        out.append(replaced)
    return out
