"""Read a pgbench command line the way pgbench's getopt does, to learn what the run is.

Never rewrites the user's arguments: the only change benchwatch makes is to
append ``-P 1`` when no progress option was given (see ``ensure_progress``).
"""

from __future__ import annotations

import getopt
import os
from dataclasses import dataclass, field

# pgbench 15's getopt string and long options (src/bin/pgbench/pgbench.c); a trailing "="
# marks an option that takes a value, as getopt wants it. getopt_long accepts any unique
# prefix of a long name ("--prog=5" is --progress), so the table must be complete: a
# missing name would make prefixes of its neighbours look unique when pgbench finds them
# ambiguous, or the reverse.
_SHORT_OPTS = "b:c:CdD:f:F:h:iI:j:lL:M:nNp:P:qrR:s:St:T:U:v"
_LONG_OPTS = [
    "builtin=", "client=", "connect", "debug", "define=", "file=", "fillfactor=", "host=",
    "initialize", "init-steps=", "jobs=", "log", "latency-limit=", "no-vacuum", "port=",
    "progress=", "protocol=", "quiet", "report-per-command", "rate=", "scale=", "select-only",
    "show-script=", "skip-some-updates", "time=", "transactions=", "username=", "vacuum-all",
    "unlogged-tables", "tablespace=", "index-tablespace=", "sampling-rate=",
    "aggregate-interval=", "progress-timestamp", "log-prefix=", "foreign-keys", "random-seed=",
    "partitions=", "partition-method=", "failures-detailed", "max-tries=", "verbose-errors",
    # pgbench 16; no pgbench 15 option starts with "e", so no prefix changes meaning.
    "exit-on-abort",
]
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
    # Why the command line could not be read (pgbench will reject it too); nothing is learnt then.
    error: str | None = None

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
        """Labels for benchmark_run_info that the command line determines."""
        if self.error:
            return {}  # defaults such as clients="1" would be guesses
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
    if parsed.error:
        return None
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
    """argv without the program name.

    Uses GNU getopt like pgbench: options may follow the database name, long names may be
    abbreviated to a unique prefix. Never raises: an argv pgbench would reject (ambiguous
    prefix, unknown option, missing value) gives a PgbenchArgs with only ``error`` set.
    """
    parsed = PgbenchArgs()
    try:
        opts, parsed.positional = getopt.gnu_getopt(list(argv), _SHORT_OPTS, _LONG_OPTS)
    except getopt.GetoptError as e:
        return PgbenchArgs(error=str(e))
    for opt, value in opts:
        if opt.startswith("--"):
            name = opt[2:]  # getopt gives the full name, whatever prefix was typed
            takes_value = name + "=" in _LONG_OPTS
        else:
            letter = opt[1:]
            takes_value = letter in _SHORT_TO_LONG
            name = _SHORT_TO_LONG[letter] if takes_value else _FLAG_TO_LONG[letter]
        if takes_value:
            parsed.options.setdefault(name, []).append(value)
        else:
            parsed.flags.add(name)
    return parsed


def ensure_progress(argv: list[str], interval: int = 1) -> tuple[list[str], bool]:
    """argv with "-P interval" added when it has no progress option; and whether it was added.

    An argv that cannot be read is left as it is: pgbench will reject it with its own message."""
    parsed = parse_pgbench_args(argv)
    if parsed.error or "progress" in parsed.options:
        return list(argv), False
    if "initialize" in parsed.flags:
        return list(argv), False  # pgbench -i has no progress option
    return insert_options(argv, ["-P", str(interval)]), True


def insert_options(argv: list[str], options: list[str]) -> list[str]:
    """argv with options added before the database name (pgbench's first positional), or at the end."""
    idx = _first_positional_index(argv)
    return argv[:idx] + options + argv[idx:]


def _first_positional_index(argv: list[str]) -> int:
    """Index of the first argument that is not an option or an option's value ("--" counts)."""
    # Non-GNU getopt stops at the first non-option, with the same reading of options as above.
    try:
        _, rest = getopt.getopt(list(argv), _SHORT_OPTS, _LONG_OPTS)
    except getopt.GetoptError:
        return len(argv)
    idx = len(argv) - len(rest)
    if idx and argv[idx - 1] == "--":
        # Either the end-of-options marker (insert before it) or the value of an option
        # ("--file --"): only in the first case do the arguments before it read cleanly alone.
        try:
            if not getopt.getopt(argv[:idx - 1], _SHORT_OPTS, _LONG_OPTS)[1]:
                return idx - 1
        except getopt.GetoptError:
            pass
    return idx


def clients_option(argv: list[str]) -> str | None:
    """"-c/--client" when argv sets the number of clients itself (sweep --clients sets it per cell)."""
    parsed = parse_pgbench_args(argv)
    return "-c/--client" if "client" in parsed.options else None


def init_argv(argv: list[str], scale: int | None) -> list[str]:
    """``pgbench -i`` for the database a run of ``argv`` uses (its connection options and database name),
    at ``scale`` (else argv's own -s, else pgbench's default); quiet, as a sweep prints it."""
    parsed = parse_pgbench_args(argv)
    out = ["-i", "-q"]
    size = str(scale) if scale is not None else parsed.last("scale")
    if size:
        out += ["-s", size]
    for name in ("host", "port", "username"):
        value = parsed.last(name)
        if value is not None:
            out.append(f"--{name}={value}")
    return out + parsed.positional[:1]
