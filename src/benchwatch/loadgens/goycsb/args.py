"""Read a go-ycsb v1.0.3 command line as go-ycsb reads it (cobra 1.0.0, pflag). Pure: words in, facts out;
nothing imported from the rest of benchwatch, no file read.

* The command is ``load`` or ``run`` (``shell`` is interactive; cobra's ``help``), found by its full name
  or, as go-ycsb sets ``cobra.EnablePrefixMatching``, by a prefix only one command has (``r`` is run,
  ``l`` load, ``s`` shell). Its first argument is the database (``postgresql``, ``pg``, ``mysql``,
  ``mariadb``, ``tidb``, ...); further arguments are ignored.
* Flags of load and run, anywhere after the command: ``-P/--property_file FILE`` (repeatable, and
  comma-separated: pflag's StringSlice), ``-p/--prop NAME=VALUE`` (repeatable, taken whole),
  ``--threads N``, ``--target N`` (operations per second), ``--interval N`` (report period in whole
  seconds, default 10), ``--table NAME``, ``-h/--help``. ``--name=value``, ``--name value``,
  ``-Pfile``, ``-P=file`` and ``-p=name=value`` all work; ``--`` ends the flags.
* Precedence: the property files in order, then each ``-p`` in order (the last wins), then the flags
  ``--threads`` (threadcount), ``--target`` (target) and ``--interval`` (measurement.interval) when given.
* An unknown flag, a bad integer or a missing database makes go-ycsb print ``Error: ...`` and its usage
  and **exit 0** without running; a ``-p`` without ``=``: ``bad property``, exit 1.
* ``maxexecutiontime`` is read by nothing in v1.0.3: a run ends after ``operationcount`` operations
  (``recordcount``, or ``insertcount``, for load), or on a signal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["COMMANDS", "CONNECTION_FILE_PREFIX", "DEFAULT_INTERVAL_S", "GoycsbArgs", "ensure_interval",
           "parse_goycsb_args", "redact_argv", "secret_property"]

REDACTED = "*****"
DEFAULT_INTERVAL_S = 10.0
COMMANDS = ("help", "load", "run", "shell")
# The property file benchwatch writes for the stack's connection (benchwatch.loadgens.goycsb.connect): not a
# part of the workload, whatever its directory.
CONNECTION_FILE_PREFIX = "bw-goycsb-connection"
_VALUE_FLAGS = {"property_file": "P", "prop": "p", "table": None, "threads": None, "target": None, "interval": None}
_SHORT = {short: name for name, short in _VALUE_FLAGS.items() if short}
_INT_FLAGS = ("threads", "target", "interval")
# Engine family of each database go-ycsb names (benchwatch.engines).
ENGINES = {"pg": "postgresql", "postgresql": "postgresql", "cockroach": "postgresql", "cdb": "postgresql",
           "mysql": "mysql", "mariadb": "mysql", "tidb": "mysql"}
# Properties that say where to connect, how long to run or how to report: not the work (the workload key).
_NOT_WORK_PROPERTIES = re.compile(r"^(?:(?:pg|mysql)\.(?:host|port|user|password|db|sslmode)|measurement\.interval"
                                  r"|operationcount|debug\.pprof|silence|verbose|outputstyle|measurement\..*"
                                  r"|histogram\..*|threadcount|target|recordcount)$")


def secret_property(key: str) -> bool:
    """A property whose value is a password (``pg.password``, ``mysql.password``, ...)."""
    lowered = key.lower()
    return "pass" in lowered or "pwd" in lowered or "secret" in lowered


def _go_int(text: str) -> int:
    """strconv.ParseInt(text, 0, 64), as pflag's IntVar reads it (decimal, 0x, 0o, 0b, a leading 0: octal)."""
    body = text[1:] if text[:1] in "+-" else text
    if not re.fullmatch(r"[0-9A-Za-z_]+", body or "-"):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    try:
        value = int(body, 8) if len(body) > 1 and body[0] == "0" and body[1] not in "xXbBoO" else int(body, 0)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None
    return -value if text.startswith("-") else value


@dataclass(frozen=True, repr=False)
class GoycsbArgs:
    """A go-ycsb argv as go-ycsb reads it.

    ``command``: ``load``, ``run``, ``shell``, ``help`` or None. ``db``: the database named after it.
    ``property_files``: every -P file, in order. ``props``: the -p values, the last of each name.
    ``flags``: the other flags given, by long name, as written. ``error``: why go-ycsb will not run
    (it exits 0 after ``Error:`` and its usage, or 1 after ``bad property``)."""

    command: str | None = None
    db: str | None = None
    property_files: tuple[str, ...] = ()
    props: dict[str, str] = field(default_factory=dict)
    flags: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    help: bool = False

    def __repr__(self) -> str:  # never a password, should one be logged
        props = {k: (REDACTED if secret_property(k) else v) for k, v in self.props.items()}
        return (f"GoycsbArgs(command={self.command!r}, db={self.db!r}, property_files={self.property_files!r}, "
                f"props={props!r}, flags={self.flags!r}, error={self.error!r}, help={self.help!r})")

    @property
    def runs(self) -> bool:
        """Whether go-ycsb will load or run (not only print an error or a help text)."""
        return self.error is None and not self.help and self.command in ("load", "run") and self.db is not None

    def _int(self, flag: str, prop: str) -> int | None:
        text = self.flags.get(flag, self.props.get(prop))
        if text is None:
            return None
        try:
            return _go_int(text)
        except ValueError:
            return None

    @property
    def interval_s(self) -> float | None:
        """The report period: --interval, else -p measurement.interval, else the default 10 s (a property file
        may set another: benchwatch run adds --interval 1, which wins)."""
        value = self._int("interval", "measurement.interval")
        if value is None and "interval" not in self.flags and "measurement.interval" not in self.props:
            return DEFAULT_INTERVAL_S
        return float(value) if value is not None else None

    @property
    def threads(self) -> int | None:
        return self._int("threads", "threadcount")

    @property
    def target(self) -> int | None:
        return self._int("target", "target")

    @property
    def engine(self) -> str | None:
        return ENGINES.get(self.db or "")

    @property
    def workload_files(self) -> tuple[str, ...]:
        """The -P files but benchwatch's connection file."""
        return tuple(f for f in self.property_files if not f.rsplit("/", 1)[-1].startswith(CONNECTION_FILE_PREFIX))

    def work_properties(self) -> dict[str, str]:
        """The -p properties that change the work (not connection, length, reporting), for the workload key."""
        return {k: v for k, v in sorted(self.props.items()) if not _NOT_WORK_PROPERTIES.match(k) and not secret_property(k)}


def _find_command(word: str) -> str | None:
    if word in COMMANDS:
        return word
    matches = [c for c in COMMANDS if c.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def parse_goycsb_args(argv: list[str]) -> GoycsbArgs:
    """Read go-ycsb's argv (after the program name)."""
    files: list[str] = []
    props: dict[str, str] = {}
    flags: dict[str, str] = {}
    positionals: list[str] = []
    help_asked = False
    error: str | None = None
    rest = list(argv)

    def take(name: str, value: str) -> str | None:
        if name == "property_file":
            files.extend(v for v in value.split(",") if v)  # pflag's StringSlice reads CSV
        elif name == "prop":
            key, eq, v = value.partition("=")
            if not eq:
                return f"bad property: `{value}`, expected format `name=value`"
            props[key] = v
        else:
            if name in _INT_FLAGS:
                try:
                    _go_int(value)
                except ValueError as exc:
                    return f'invalid argument "{value}" for "--{name}" flag: {exc}'
            flags[name] = value
        return None

    while rest:
        s = rest.pop(0)
        if s == "--":
            positionals.extend(rest)
            break
        if s.startswith("--") and len(s) > 2:
            name, eq, value = s[2:].partition("=")
            if name == "help":
                help_asked = True
                continue
            if name not in _VALUE_FLAGS:
                error = error or f"unknown flag: --{name}"
                continue
            if not eq:
                if not rest:
                    error = error or f"flag needs an argument: {s}"
                    continue
                value = rest.pop(0)
            error = error or take(name, value)
        elif s.startswith("-") and len(s) > 1:
            c = s[1]
            if c == "h":
                help_asked = True
                continue
            if c not in _SHORT:
                error = error or f"unknown shorthand flag: '{c}' in {s}"
                continue
            value = s[2:]
            if value.startswith("="):
                value = value[1:]
            elif not value:
                if not rest:
                    error = error or f"flag needs an argument: '{c}' in {s}"
                    continue
                value = rest.pop(0)
            error = error or take(_SHORT[c], value)
        else:
            positionals.append(s)
    command = _find_command(positionals[0]) if positionals else None
    if positionals and command is None:
        error = error or f'unknown command "{positionals[0]}" for "go-ycsb"'
    db = positionals[1] if len(positionals) > 1 else None
    if command in ("load", "run") and db is None and not help_asked:
        error = error or "requires at least 1 arg(s), only received 0"
    return GoycsbArgs(command=command, db=db, property_files=tuple(files), props=props, flags=flags, error=error,
                      help=help_asked or command in (None, "help"))


def redact_argv(argv: list[str]) -> list[str]:
    """argv with the value of every secret property (``-p pg.password=X``, ``--prop=mysql.password=X``,
    ``-pmysql.password=X``) replaced by ``*****``. benchwatch itself never puts one there: its connection's
    password goes through a 0600 property file (-P)."""
    out = list(argv)
    i = 0
    while i < len(out):
        s = argv[i]
        for prefix in ("--prop=", "-p=", "-p"):
            if s.startswith(prefix) and len(s) > len(prefix) and (prefix != "-p" or not s.startswith("-p=")):
                key, eq, _ = s[len(prefix):].partition("=")
                if eq and secret_property(key):
                    out[i] = f"{prefix}{key}={REDACTED}"
                break
        else:
            if s in ("-p", "--prop") and i + 1 < len(argv):
                key, eq, _ = argv[i + 1].partition("=")
                if eq and secret_property(key):
                    out[i + 1] = f"{key}={REDACTED}"
                i += 1
        i += 1
    return out


def ensure_interval(argv: list[str], interval: str = "1") -> tuple[list[str], list[str]]:
    """argv with ``--interval 1`` added after it when load or run has neither --interval nor
    ``-p measurement.interval``; and what was added (a flag: it wins over a property file's value)."""
    parsed = parse_goycsb_args(argv)
    if not parsed.runs or "interval" in parsed.flags or "measurement.interval" in parsed.props:
        return list(argv), []
    added = ["--interval", interval]
    end = argv.index("--") if "--" in argv else len(argv)  # before a "--": after it, a flag is an argument
    return [*argv[:end], *added, *argv[end:]], added
