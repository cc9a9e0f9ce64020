"""Read a go-tpc v1.0.7 command line as go-tpc reads it: cobra 1.0.0 finds the subcommand, pflag 1.0.5
parses the flags. Pure: words in, facts out; nothing imported from the rest of benchwatch.

How go-tpc reads its argv (the argv after the program name):

* The subcommand path (``tpcc run``) is found first, cobra's way: flags are set aside (a flag that
  takes a value takes the next word with it unless written ``--name=value``; ``-h`` is not known yet
  at that point, so ``-h`` takes the next word), the first remaining word names a subcommand of the
  command found so far, by its full name or, as go-tpc sets ``cobra.EnablePrefixMatching``, by a
  prefix only one subcommand has (``tpcc r`` is ``tpcc run``, ``tpcc c`` is nothing: ``check`` and
  ``cleanup``). The first word equal to that name is then dropped from the argv, and so on down.
* The words left are parsed by pflag with the flags of the command found: its own and those of
  every command above it (go-tpc declares every flag persistent), plus ``-h/--help``. Flags may
  come anywhere, before or after the subcommand words: ``--name=value``, ``--name value``,
  ``-x value``, ``-xvalue``, ``-x=value``, ``-hxvalue`` (one-letter booleans grouped with the rest);
  a boolean is ``--name`` or ``--name=false`` (``--name false`` leaves ``false`` as an argument);
  ``--`` ends the flags; the last of a repeated flag wins. There is no prefix matching of flags.
* An unknown flag, a missing or bad value (``--interval 5``: Go durations need a unit), or an unknown
  first word at the top makes go-tpc print ``Error: ...`` and its usage on stderr and **exit 0**
  without running (``rootCmd.Execute()``'s error is ignored). A command without an action (``go-tpc``,
  ``go-tpc tpcc``) prints its help, exit 0.

``--interval`` (default 10s) is the report period of every tpcc/ch action (``run`` prints reports;
prepare, check and cleanup tick silently); ``--interval 0`` makes go-tpc panic (exit 2). ``--time``
(default: 2562047h47m16.854775807s, i.e. none) ends the run; ``--threads/-T`` (default 1) is the
number of connections; ``--warehouses`` (default 10, tpcc and ch) the data size. ``-D`` database
(default ``test``, created if missing), ``-H`` host (127.0.0.1), ``-P`` port (4000), ``-U`` user
(root), ``-p`` password (empty). go-tpc 1.0.7 has no ``--output`` flag (``--output-type`` and
``--output-dir`` belong to ``tpcc prepare``: CSV generation). The password stays in the process's
argv, visible to ``ps``; go-tpc never prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["COMMANDS", "FLAGS", "Flag", "GotpcArgs", "ensure_interval", "go_duration_seconds", "parse_gotpc_args",
           "redact_argv"]

REDACTED = "*****"
DEFAULT_INTERVAL_S = 10.0


@dataclass(frozen=True, slots=True)
class Flag:
    name: str
    shorthand: str | None
    kind: str      # "string", "int", "bool", "duration"
    default: str   # as go-tpc's help shows it

    @property
    def takes_value(self) -> bool:
        """False for a boolean: ``--name`` alone sets it (pflag's NoOptDefVal "true")."""
        return self.kind != "bool"


def _f(name: str, kind: str, default: str, shorthand: str | None = None) -> Flag:
    return Flag(name, shorthand, kind, default)


_ROOT = (
    _f("max-procs", "int", "0"), _f("pprof", "string", ""), _f("metrics-addr", "string", ""),
    _f("db", "string", "test", "D"), _f("host", "string", "127.0.0.1", "H"), _f("user", "string", "root", "U"),
    _f("password", "string", "", "p"), _f("port", "int", "4000", "P"), _f("threads", "int", "1", "T"),
    _f("acThreads", "int", "1", "t"), _f("driver", "string", "", "d"),
    _f("time", "duration", "2562047h47m16.854775807s"), _f("count", "int", "0"), _f("dropdata", "bool", "false"),
    _f("ignore-error", "bool", "false"), _f("silence", "bool", "false"), _f("interval", "duration", "10s"),
    _f("isolation", "int", "0"),
)
_TPCC = (_f("parts", "int", "1"), _f("warehouses", "int", "10"), _f("check-all", "bool", "false"))
_ANALYZE = (_f("tiflash", "bool", "false"), _f("analyze", "bool", "false"),
            _f("tidb_build_stats_concurrency", "int", "4"), _f("tidb_distsql_scan_concurrency", "int", "15"),
            _f("tidb_index_serial_scan_concurrency", "int", "1"))
_QUERIES = _f("queries", "string", "q1,q2,...,q22")

# The flags each command declares (all persistent: its subcommands have them too), from cmd/go-tpc/*.go.
FLAGS: dict[tuple[str, ...], tuple[Flag, ...]] = {
    (): _ROOT,
    ("tpcc",): _TPCC,
    ("tpcc", "prepare"): (_f("no-check", "bool", "false"), _f("output-type", "string", ""),
                          _f("output-dir", "string", ""), _f("tables", "string", ""),
                          _f("retry-count", "int", "50"), _f("retry-interval", "duration", "10s")),
    ("tpcc", "run"): (_f("wait", "bool", "false"), _f("max-measure-latency", "duration", "16s")),
    ("tpcc", "cleanup"): (), ("tpcc", "check"): (),
    ("tpch",): (_QUERIES, _f("sf", "int", "1"), _f("use-explain", "bool", "false"), _f("check", "bool", "false")),
    ("tpch", "prepare"): _ANALYZE, ("tpch", "run"): (), ("tpch", "cleanup"): (),
    ("ch",): _TPCC + (_QUERIES,),
    ("ch", "prepare"): _ANALYZE, ("ch", "run"): (),
    ("version",): (), ("help",): (),
}
_HELP = _f("help", "bool", "false", "h")  # cobra's, added to every command when it runs (not while finding it)
# Subcommands of each command, in cobra's order (sorted); "help" is cobra's, on the root only.
COMMANDS: dict[tuple[str, ...], tuple[str, ...]] = {
    path: tuple(sorted(p[-1] for p in FLAGS if len(p) == len(path) + 1 and p[:len(path)] == path)) for path in FLAGS
}
# Commands with an action; the others print their help.
_RUNNABLE = {p for p in FLAGS if len(p) >= 1 and p not in (("tpcc",), ("tpch",), ("ch",))}


def _flag_set(path: tuple[str, ...], with_help: bool) -> tuple[dict[str, Flag], dict[str, Flag]]:
    by_name: dict[str, Flag] = {}
    for i in range(len(path) + 1):
        for flag in FLAGS.get(path[:i], ()):
            by_name.setdefault(flag.name, flag)
    if with_help:
        by_name.setdefault("help", _HELP)
    by_short = {f.shorthand: f for f in by_name.values() if f.shorthand}
    return by_name, by_short


# -- Go's value syntax ---------------------------------------------------------------------------

_UNITS_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
             "m": 60_000_000_000, "h": 3_600_000_000_000}
_INT64_MAX = (1 << 63) - 1
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")


def _unit_prefix(s: str) -> str:
    """The unit at the start of s: everything up to the next digit or dot."""
    i = 0
    while i < len(s) and s[i] != "." and not "0" <= s[i] <= "9":
        i += 1
    return s[:i]


def _go_duration_ns(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds; ValueError with Go's message."""
    orig, s, neg = text, text, False
    if s and s[0] in "+-":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f'time: invalid duration "{orig}"')
    total = 0
    while s:
        m = _NUMBER.match(s)
        whole, frac = (m.group(1), m.group(2)) if m else ("", None)
        if m is None or (not whole and not frac):
            raise ValueError(f'time: invalid duration "{orig}"')
        s = s[m.end():]
        u = _unit_prefix(s)
        if not u:
            raise ValueError(f'time: missing unit in duration "{orig}"')
        s = s[len(u):]
        if u not in _UNITS_NS:
            raise ValueError(f'time: unknown unit "{u}" in duration "{orig}"')
        unit = _UNITS_NS[u]
        total += int(whole or "0") * unit + (int(frac) * unit // 10 ** len(frac) if frac else 0)
        if total > _INT64_MAX + (1 if neg else 0):
            raise ValueError(f'time: invalid duration "{orig}"')
    return -total if neg else total


def go_duration_seconds(text: str) -> float:
    """A Go duration (``10s``, ``1m30s``, ``500ms``, ``1.5h``, ``0``) in seconds; ValueError if Go refuses it."""
    return _go_duration_ns(text) / 1e9


def _go_int(text: str) -> int:
    """strconv.ParseInt(text, 0, 64): decimal, 0x/0o/0b prefixes, a leading 0 for octal, underscores."""
    sign, body = 1, text
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    if not re.fullmatch(r"[0-9A-Za-z_]+", body):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    try:
        if len(body) > 1 and body[0] == "0" and body[1] not in "xXbBoO":
            value = int(body, 8)
        else:
            value = int(body, 0)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None
    value *= sign
    if not -(1 << 63) <= value <= _INT64_MAX:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def _go_bool(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def _check_value(flag: Flag, value: str) -> None:
    if flag.kind == "int":
        _go_int(value)
    elif flag.kind == "bool":
        _go_bool(value)
    elif flag.kind == "duration":
        _go_duration_ns(value)


# -- cobra's command search ----------------------------------------------------------------------

def _strip_flags(args: list[str], path: tuple[str, ...]) -> list[str]:
    """cobra's stripFlags: the words that are not flags or flag values (the help flag not yet known)."""
    by_name, by_short = _flag_set(path, with_help=False)
    words: list[str] = []
    rest = list(args)
    while rest:
        s = rest.pop(0)
        if s == "--":
            break
        long_with_value = s.startswith("--") and "=" not in s and not (s[2:] in by_name and not by_name[s[2:]].takes_value)
        short_with_value = (s.startswith("-") and "=" not in s and len(s) == 2
                            and not (s[1:] in by_short and not by_short[s[1:]].takes_value))
        if long_with_value or short_with_value:
            if len(rest) <= 1:
                break
            rest.pop(0)
            continue
        if s and not s.startswith("-"):
            words.append(s)
    return words


def _find_next(path: tuple[str, ...], word: str) -> str | None:
    children = COMMANDS.get(path, ())
    if word in children:
        return word
    matches = [c for c in children if c.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def _minus_first(args: list[str], word: str) -> list[str]:
    if word in args:
        i = args.index(word)
        return args[:i] + args[i + 1:]
    return args


# -- the result ----------------------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class GotpcArgs:
    """A go-tpc argv as go-tpc reads it.

    ``command``: the subcommand path with full names (``("tpcc", "run")``; ``()`` for none).
    ``options``: every flag given, by long name, the value as written (``"true"`` for a boolean given
    alone); the last of a repeated flag, and the value go-tpc refused if it did. ``error``: what go-tpc prints after ``Error:`` before
    exiting 0 without running, or the reason it would panic (a non-positive ``--interval``).
    ``help``: go-tpc only prints a help text (``-h``, ``help ...``, or a command without an action).
    """

    command: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    positionals: tuple[str, ...] = ()
    error: str | None = None
    help: bool = False

    def __repr__(self) -> str:  # never the password, should one be logged
        options = {k: (REDACTED if _secret_name(k) else v) for k, v in self.options.items()}
        return (f"GotpcArgs(command={self.command!r}, options={options!r}, positionals={self.positionals!r}, "
                f"error={self.error!r}, help={self.help!r})")

    def value(self, name: str) -> str | None:
        """The flag's value as given, or its default when it applies to the command; None otherwise."""
        if name in self.options:
            return self.options[name]
        by_name, _ = _flag_set(self.command, with_help=True)
        flag = by_name.get(name)
        return flag.default if flag else None

    def _typed(self, name: str, convert):
        value = self.value(name)
        if value is None:
            return None
        try:
            return convert(value)
        except ValueError:
            return None

    @property
    def interval_s(self) -> float | None:
        """``--interval`` in seconds (default 10); None if go-tpc refuses the value. 0 or less: go-tpc panics."""
        if "interval" not in self.options:
            return DEFAULT_INTERVAL_S
        return self._typed("interval", go_duration_seconds)

    @property
    def time_s(self) -> float | None:
        """``--time`` in seconds; None when not given (go-tpc's default is ~292 years: no limit) or refused."""
        if "time" not in self.options:
            return None
        return self._typed("time", go_duration_seconds)

    @property
    def threads(self) -> int | None:
        return self._typed("threads", _go_int)

    @property
    def warehouses(self) -> int | None:
        """``--warehouses`` (default 10) under tpcc and ch; None for other commands."""
        return self._typed("warehouses", _go_int)

    @property
    def runs(self) -> bool:
        """Whether go-tpc will do the command's work (not only print an error or a help text)."""
        return self.error is None and not self.help and self.command in _RUNNABLE


def parse_gotpc_args(argv: list[str]) -> GotpcArgs:
    """Read go-tpc's argv (after the program name) as cobra 1.0.0 and pflag 1.0.5 do."""
    args = list(argv)
    path: tuple[str, ...] = ()
    while True:
        words = _strip_flags(args, path)
        if not words:
            break
        nxt = _find_next(path, words[0])
        if nxt is None:
            break
        args = _minus_first(args, words[0])
        path += (nxt,)
    if not path and _strip_flags(args, path):  # cobra's legacyArgs: the root takes no arguments
        word = _strip_flags(args, path)[0]
        return GotpcArgs(command=path, error=f'unknown command "{word}" for "go-tpc"')
    options, positionals, error, help_asked = _parse_flags(args, path)
    if error is None and path in _RUNNABLE and not help_asked and path[-1:] in (("run",), ("prepare",), ("cleanup",), ("check",)):
        try:
            if "interval" in options and _go_duration_ns(options["interval"]) <= 0:
                error = "non-positive interval for NewTicker (go-tpc panics, exit code 2)"
        except ValueError:
            pass
    return GotpcArgs(command=path, options=options, positionals=tuple(positionals), error=error,
                     help=help_asked or path not in _RUNNABLE or path[:1] == ("help",))


def _parse_flags(args: list[str], path: tuple[str, ...]) -> tuple[dict[str, str], list[str], str | None, bool]:
    """pflag's parseArgs with interspersed arguments: (options, positionals, error, help asked)."""
    by_name, by_short = _flag_set(path, with_help=True)
    options: dict[str, str] = {}
    positionals: list[str] = []

    def setv(flag: Flag, value: str) -> str | None:
        options[flag.name] = value  # kept even when refused: the typed properties then say None
        try:
            _check_value(flag, value)
        except ValueError as exc:
            shown = f"-{flag.shorthand}, --{flag.name}" if flag.shorthand else f"--{flag.name}"
            return f'invalid argument "{value}" for "{shown}" flag: {exc}'
        return None

    rest = list(args)
    while rest:
        s = rest.pop(0)
        if len(s) < 2 or s[0] != "-":
            positionals.append(s)
            continue
        if s[1] == "-":
            if len(s) == 2:
                positionals.extend(rest)
                break
            name = s[2:]
            if name[0] in "-=":
                return options, positionals, f"bad flag syntax: {s}", False
            name, eq, value = name.partition("=")
            flag = by_name.get(name)
            if flag is None:
                return options, positionals, f"unknown flag: --{name}", False
            if not eq:
                if not flag.takes_value:
                    value = "true"
                elif rest:
                    value = rest.pop(0)
                else:
                    return options, positionals, f"flag needs an argument: {s}", False
            err = setv(flag, value)
            if err:
                return options, positionals, err, False
            continue
        shorts = s[1:]
        while shorts:
            c = shorts[0]
            flag = by_short.get(c)
            if flag is None:
                return options, positionals, f"unknown shorthand flag: '{c}' in -{s[1:]}", False
            if len(shorts) > 2 and shorts[1] == "=":
                value, shorts = shorts[2:], ""
            elif not flag.takes_value:
                value, shorts = "true", shorts[1:]
            elif len(shorts) > 1:
                value, shorts = shorts[1:], ""
            elif rest:
                value, shorts = rest.pop(0), ""
            else:
                return options, positionals, f"flag needs an argument: '{c}' in -{s[1:]}", False
            err = setv(flag, value)
            if err:
                return options, positionals, err, False
    help_asked = "help" in options and _go_bool(options["help"])
    return options, positionals, None, help_asked


# -- rewriting the argv --------------------------------------------------------------------------

def _secret_name(name: str) -> bool:
    """A long flag whose value is a password: go-tpc's own, and misspellings go-tpc would refuse anyway."""
    return name == "password" or "pass" in name.lower() or "pwd" in name.lower()


def _names_password(argv: list[str], i: int) -> bool:
    """Whether argv[i] is itself a password flag (``-T -p secret``: pflag takes ``-p`` as -T's value, but
    the next word is surely a password)."""
    if i >= len(argv):
        return False
    s = argv[i]
    if s.startswith("--"):
        return _secret_name(s[2:].partition("=")[0])
    return s.startswith("-p") or (s.startswith("-h") and "p" in s[:3])


def redact_argv(argv: list[str]) -> list[str]:
    """argv with every password value replaced by ``*****``, in the form it was written: ``-p X``,
    ``-pX``, ``-p=X``, ``-hpX``, ``--password X``, ``--password=X`` (and ``--passwd``, ``--pass``...,
    which go-tpc refuses). Words after ``--`` are treated the same (go-tpc ignores them)."""
    _, by_short = _flag_set(("tpcc", "prepare"), with_help=True)
    value_longs = {f.name for flags in FLAGS.values() for f in flags if f.takes_value}
    out = list(argv)
    i = 0
    while i < len(out):
        s = argv[i]
        if s.startswith("--") and len(s) > 2:
            name, eq, _value = s[2:].partition("=")
            if _secret_name(name):
                if eq:
                    out[i] = f"--{name}={REDACTED}"
                elif i + 1 < len(out):
                    out[i + 1] = REDACTED
                    i += 1
            elif not eq and name in value_longs and not _names_password(argv, i + 1):
                i += 1  # its value, whatever it looks like (unless it is itself a password flag: over-redact)
        elif s.startswith("-") and len(s) > 1 and s[1] != "-":
            j = 1
            while j < len(s):
                flag = by_short.get(s[j])
                if flag is None:
                    break
                if not flag.takes_value and not s[j + 1:j + 2] == "=":
                    j += 1
                    continue
                if flag.name == "password":
                    if j + 1 < len(s):
                        out[i] = s[:j + 1] + ("=" if s[j + 1] == "=" else "") + REDACTED
                    elif i + 1 < len(out):
                        out[i + 1] = REDACTED
                        i += 1
                elif j + 1 == len(s) and flag.takes_value and not _names_password(argv, i + 1):
                    i += 1  # "-D value": skip the value
                break
        i += 1
    return out


def ensure_interval(argv: list[str], interval: str = "1s") -> tuple[list[str], list[str]]:
    """argv with ``--interval 1s`` first when a ``run`` subcommand has none; and what was added.

    Added before everything else: ``--interval`` is known at every level, so cobra and pflag read it
    there whatever follows (a ``--``, a flag missing its value). Left alone when go-tpc would refuse
    the argv or only print help."""
    parsed = parse_gotpc_args(argv)
    if not parsed.runs or parsed.command[-1:] != ("run",) or "interval" in parsed.options:
        return list(argv), []
    added = ["--interval", interval]
    return added + list(argv), added
