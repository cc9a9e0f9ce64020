"""Read a pgbench command line the way pgbench's getopt does, to learn what the run is.

Never rewrites the user's arguments: the only change benchwatch makes is to
append ``-P 1`` when no progress option was given (see ``ensure_progress``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# Short options of pgbench 9.4-17 that take a value (from its getopt string).
_SHORT_WITH_VALUE = set("bcDfFhIjLMpPRsStTU") - {"S"}
# Long options that take a value; "--opt=value" and "--opt value" both work.
_LONG_WITH_VALUE = {
    "builtin", "client", "define", "file", "fillfactor", "host", "jobs", "latency-limit",
    "log-prefix", "partitions", "partition-method", "port", "progress", "protocol", "rate",
    "sampling-rate", "scale", "time", "transactions", "username", "aggregate-interval",
    "random-seed", "max-tries", "init-steps", "tablespace", "index-tablespace",
    "exit-on-abort-with-value", "verbose-errors-level",
}
_SHORT_TO_LONG = {
    "b": "builtin", "c": "client", "D": "define", "f": "file", "F": "fillfactor", "h": "host",
    "I": "init-steps", "j": "jobs", "L": "latency-limit", "M": "protocol", "p": "port",
    "P": "progress", "R": "rate", "s": "scale", "t": "transactions", "T": "time", "U": "username",
}
_FLAG_TO_LONG = {"S": "select-only", "N": "skip-some-updates", "l": "log", "r": "report-per-command",
                 "C": "connect", "n": "no-vacuum", "i": "initialize", "v": "vacuum-all", "d": "debug",
                 "q": "quiet"}


@dataclass
class PgbenchArgs:
    options: dict[str, list[str]] = field(default_factory=dict)  # long name -> values in order
    flags: set[str] = field(default_factory=set)                 # long names of flags given
    positional: list[str] = field(default_factory=list)

    def last(self, name: str, default: str | None = None) -> str | None:
        values = self.options.get(name)
        return values[-1] if values else default

    @property
    def progress_interval(self) -> float | None:
        value = self.last("progress")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    @property
    def script(self) -> str:
        """What the run executes, as people name it: builtin names and script file names."""
        parts: list[str] = []
        for value in self.options.get("builtin", []):
            parts.append(value)
        for value in self.options.get("file", []):
            name, _, weight = value.partition("@")
            parts.append(os.path.basename(name) + (f"@{weight}" if weight else ""))
        if "select-only" in self.flags:
            parts.append("select-only")
        if "skip-some-updates" in self.flags:
            parts.append("simple-update")
        return "+".join(parts) if parts else "tpcb-like"

    def info_labels(self) -> dict[str, str]:
        """Labels for pgbench_run_info that the command line determines."""
        labels = {
            "script": self.script,
            "clients": self.last("client", "1") or "1",
            "threads": self.last("jobs", "1") or "1",
            "protocol": self.last("protocol", "simple") or "simple",
            "duration_seconds": self.last("time", "") or "",
            "transactions_per_client": self.last("transactions", "") or "",
            "rate_limit_tps": self.last("rate", "") or "",
        }
        return {k: v for k, v in labels.items() if v}  # Prometheus treats an empty label as absent


# SQL statements per transaction of the builtin scripts (BEGIN..END counted).
_BUILTIN_SQL_STATEMENTS = {"tpcb-like": 7, "simple-update": 5, "select-only": 1}


def _builtin(name: str) -> str | None:
    """pgbench accepts any unambiguous prefix of a builtin name."""
    matches = [b for b in _BUILTIN_SQL_STATEMENTS if b.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def count_sql_statements(script_text: str) -> int:
    """SQL commands in a pgbench script: what is not a backslash meta-command, split at semicolons."""
    count, pending = 0, False
    for line in script_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--") or (stripped.startswith("\\") and not pending):
            continue
        pending = True
        if stripped.endswith(";") or stripped.endswith("\\gset") or stripped.endswith("\\aset"):
            count += 1
            pending = False
    return count + (1 if pending else 0)


def sql_statements_per_transaction(parsed: PgbenchArgs, read_file=None) -> float | None:
    """Weighted mean of SQL statements per transaction over the run's scripts (QPS = TPS x this)."""
    entries: list[tuple[int, float]] = []
    for value in parsed.options.get("builtin", []):
        name, _, weight = value.partition("@")
        builtin = _builtin(name)
        if builtin is None:
            return None
        entries.append((int(weight or 1), _BUILTIN_SQL_STATEMENTS[builtin]))
    for value in parsed.options.get("file", []):
        name, _, weight = value.partition("@")
        try:
            text = (read_file or (lambda p: open(p, encoding="utf-8", errors="replace").read()))(name)
        except OSError:
            return None
        entries.append((int(weight or 1), count_sql_statements(text)))
    if "select-only" in parsed.flags:
        entries.append((1, 1))
    if "skip-some-updates" in parsed.flags:
        entries.append((1, 5))
    if not entries:
        entries.append((1, 7))
    total = sum(w for w, _ in entries)
    return sum(w * n for w, n in entries) / total if total else None


def parse_pgbench_args(argv: list[str]) -> PgbenchArgs:
    """argv without the program name."""
    parsed = PgbenchArgs()
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            parsed.positional.extend(argv[i:])
            break
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            if name in _LONG_WITH_VALUE:
                if not eq and i < len(argv):
                    value = argv[i]
                    i += 1
                parsed.options.setdefault(name, []).append(value)
            else:
                parsed.flags.add(name)
            continue
        if arg.startswith("-") and len(arg) > 1:
            # Clustered short options: "-nr", "-P1", "-c 4".
            j = 1
            while j < len(arg):
                letter = arg[j]
                if letter in _SHORT_WITH_VALUE:
                    value = arg[j + 1:]
                    if not value and i < len(argv):
                        value = argv[i]
                        i += 1
                    parsed.options.setdefault(_SHORT_TO_LONG[letter], []).append(value)
                    break
                parsed.flags.add(_FLAG_TO_LONG.get(letter, letter))
                j += 1
            continue
        parsed.positional.append(arg)
    return parsed


def ensure_progress(argv: list[str], interval: int = 1) -> tuple[list[str], bool]:
    """argv with "-P interval" appended when it has no progress option; and whether it was added."""
    if parse_pgbench_args(argv).progress_interval is not None:
        return list(argv), False
    parsed = parse_pgbench_args(argv)
    if "initialize" in parsed.flags:
        return list(argv), False  # pgbench -i has no progress option
    return insert_options(argv, ["-P", str(interval)]), True


def insert_options(argv: list[str], options: list[str]) -> list[str]:
    """argv with options added before the database name (pgbench's first positional), or at the end."""
    idx = _first_positional_index(argv)
    return argv[:idx] + options + argv[idx:]


def _first_positional_index(argv: list[str]) -> int:
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i
        if arg.startswith("--") and len(arg) > 2:
            name, eq, _ = arg[2:].partition("=")
            i += 2 if (name in _LONG_WITH_VALUE and not eq) else 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            takes_next = False
            for j in range(1, len(arg)):
                if arg[j] in _SHORT_WITH_VALUE:
                    takes_next = j == len(arg) - 1
                    break
            i += 2 if takes_next else 1
            continue
        return i
    return len(argv)
