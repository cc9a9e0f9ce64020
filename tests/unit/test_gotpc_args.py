"""go-tpc's argv read as go-tpc v1.0.7 (cobra 1.0.0, pflag 1.0.5) reads it.

The expected commands and error messages below were measured on the real go-tpc v1.0.7 binary
(2026-11-25): each argv was run with ``-P 1`` added (nothing listening), and what it did was read
from its output: ``Error: ...`` (refused, exit 0), a help text, or the connection panic of the
subcommand's action (it would have run).
"""

from __future__ import annotations

import os
import re

import pytest

from benchwatch.loadgens.gotpc import args as ga

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gotpc")

# argv -> ("runs", command) | ("help",) | ("error", message as go-tpc printed it)
MEASURED = [
    ("tpcc run", ("runs", "tpcc run")), ("tpcc r", ("runs", "tpcc run")), ("tpcc ru", ("runs", "tpcc run")),
    ("tpcc p", ("runs", "tpcc prepare")), ("tpcc c", ("help",)), ("tpcc ch", ("runs", "tpcc check")),
    ("tpcc cl", ("runs", "tpcc cleanup")), ("t run", ("error", 'unknown command "t" for "go-tpc"')),
    ("tpc run", ("error", 'unknown command "tpc" for "go-tpc"')), ("v", ("runs", "version")), ("ve", ("runs", "version")),
    ("-h tpcc run", ("error", 'unknown command "run" for "go-tpc"')),  # -h takes "tpcc" while cobra looks for commands
    ("tpcc run -h", ("help",)), ("--help", ("help",)), ("tpcc", ("help",)), ("tpcc runn", ("help",)),
    ("foo", ("error", 'unknown command "foo" for "go-tpc"')), ("-D tpcc tpcc run", ("runs", "tpcc run")),
    ("-D run tpcc run", ("runs", "tpcc run")), ("tpcc -D run run", ("runs", "tpcc run")),
    ("tpcc run -T4", ("runs", "tpcc run")), ("tpcc run -T=4", ("runs", "tpcc run")),
    ("tpcc run -T 4x", ("error", 'invalid argument "4x" for "-T, --threads" flag: strconv.ParseInt: parsing "4x": invalid syntax')),
    ("tpcc run -Tx", ("error", 'invalid argument "x" for "-T, --threads" flag: strconv.ParseInt: parsing "x": invalid syntax')),
    ("tpcc run --threads=0x10", ("runs", "tpcc run")), ("tpcc run --threads 010", ("runs", "tpcc run")),
    ("tpcc run --threads 08", ("error", 'invalid argument "08" for "-T, --threads" flag: strconv.ParseInt: parsing "08": invalid syntax')),
    ("tpcc run --threads 1_000", ("runs", "tpcc run")),
    ("tpcc run --interval 5", ("error", 'invalid argument "5" for "--interval" flag: time: missing unit in duration "5"')),
    ("tpcc run --interval 1.5s", ("runs", "tpcc run")),
    ("tpcc run --interval .s", ("error", 'invalid argument ".s" for "--interval" flag: time: invalid duration ".s"')),
    ("tpcc run --interval 1.s", ("runs", "tpcc run")),
    ("tpcc run --interval 1x", ("error", 'invalid argument "1x" for "--interval" flag: time: unknown unit "x" in duration "1x"')),
    ("tpcc run --interval=", ("error", 'invalid argument "" for "--interval" flag: time: invalid duration ""')),
    ("tpcc run --time 1h2m3.5s", ("runs", "tpcc run")), ("tpcc run --time", ("error", "flag needs an argument: --time")),
    ("tpcc run -p", ("error", "flag needs an argument: 'p' in -p")), ("tpcc run -pX -hT3", ("help",)),
    ("tpcc run --output table", ("error", "unknown flag: --output")),
    ("tpcc run --output-type csv", ("error", "unknown flag: --output-type")),  # a prepare flag
    ("tpcc run --wait false", ("runs", "tpcc run")),
    ("tpcc run --wait=maybe", ("error", 'invalid argument "maybe" for "--wait" flag: strconv.ParseBool: parsing "maybe": invalid syntax')),
    ("tpcc run ---x", ("error", "bad flag syntax: ---x")), ("tpcc run --=x", ("error", "bad flag syntax: --=x")),
    ("tpcc run -x", ("error", "unknown shorthand flag: 'x' in -x")), ("--warehouses 2 tpcc run", ("runs", "tpcc run")),
    ("tpcc run -- -p x", ("runs", "tpcc run")), ("tpcc -- run", ("help",)), ("tpcc run --dropdata --silence", ("runs", "tpcc run")),
    ("version --warehouses 1", ("error", "unknown flag: --warehouses")),
    ("tpch run --warehouses 1", ("error", "unknown flag: --warehouses")), ("ch run --warehouses 1", ("runs", "ch run")),
    ("tpcc check --check-all", ("runs", "tpcc check")), ("tpcc prepare --no-check=1", ("runs", "tpcc prepare")),
    ("help tpcc", ("help",)), ("tpcc run -T", ("error", "flag needs an argument: 'T' in -T")),
    ("tpcc run -Tp", ("error", 'invalid argument "p" for "-T, --threads" flag: strconv.ParseInt: parsing "p": invalid syntax')),
    ("tpcc run --time -1s", ("runs", "tpcc run")), ("--port=1 tpcc run", ("runs", "tpcc run")),
    ("tpcc run --max-measure-latency 100",
     ("error", 'invalid argument "100" for "--max-measure-latency" flag: time: missing unit in duration "100"')),
    ("tpcc run -hh", ("help",)), ("tpcc run --interval=1µs", ("runs", "tpcc run")),
    ("tpcc run --interval=9999999999h", ("error", 'invalid argument "9999999999h" for "--interval" flag: time: invalid duration "9999999999h"')),
    ("-P", ("error", "flag needs an argument: 'P' in -P")), ("-P 1", ("help",)), ("tpcc run -t 2", ("runs", "tpcc run")),
]


@pytest.mark.parametrize("argv,expected", MEASURED, ids=[m[0] for m in MEASURED])
def test_as_go_tpc_read_it(argv, expected):
    parsed = ga.parse_gotpc_args(["-P", "1"] + argv.split() if not re.search(r"(^| )-P|--port", argv) else argv.split())
    if parsed.error:
        got: tuple = ("error", parsed.error)
    elif parsed.help:
        got = ("help",)
    else:
        got = ("runs", " ".join(parsed.command))
    assert got == expected
    assert parsed.runs == (expected[0] == "runs")


def test_the_fixture_commands():
    p = ga.parse_gotpc_args("tpcc --warehouses 1 -H 127.0.0.1 -P 39395 -U tpcc -p x -D tpcc run --interval 1s --time 10s "
                            "--threads 2".split())
    assert p.command == ("tpcc", "run") and p.runs and p.error is None
    assert (p.interval_s, p.time_s, p.threads, p.warehouses) == (1.0, 10.0, 2, 1)
    assert p.options == {"warehouses": "1", "host": "127.0.0.1", "port": "39395", "user": "tpcc", "password": "x",
                         "db": "tpcc", "interval": "1s", "time": "10s", "threads": "2"}
    wait = ga.parse_gotpc_args("tpcc --warehouses 1 run --interval 10s --time 30s --threads 8 --wait".split())
    assert wait.options["wait"] == "true" and (wait.interval_s, wait.time_s, wait.threads) == (10.0, 30.0, 8)
    prep = ga.parse_gotpc_args("tpcc --warehouses 1 -P 39395 prepare".split())
    assert prep.command == ("tpcc", "prepare") and prep.value("retry-count") == "50"


def test_defaults_from_the_source():
    p = ga.parse_gotpc_args(["tpcc", "run"])
    assert (p.interval_s, p.time_s, p.threads, p.warehouses) == (10.0, None, 1, 10)
    assert (p.value("db"), p.value("host"), p.value("port"), p.value("user"), p.value("password")) == (
        "test", "127.0.0.1", "4000", "root", "")
    assert p.value("max-measure-latency") == "16s" and p.value("no-check") is None  # a prepare flag
    assert ga.parse_gotpc_args(["version"]).warehouses is None
    assert ga.parse_gotpc_args(["ch", "run"]).warehouses == 10


@pytest.mark.parametrize("argv,options", [
    (["tpcc", "run", "--threads=4"], {"threads": "4"}), (["tpcc", "run", "--threads", "4"], {"threads": "4"}),
    (["tpcc", "run", "-T", "4"], {"threads": "4"}), (["-T4", "tpcc", "run"], {"threads": "4"}),
    (["tpcc", "run", "-T=4"], {"threads": "4"}), (["tpcc", "run", "-T", "2", "-T", "3"], {"threads": "3"}),
    (["tpcc", "run", "-hT4"], {"help": "true", "threads": "4"}), (["tpcc", "run", "--wait"], {"wait": "true"}),
    (["tpcc", "run", "--wait=false"], {"wait": "false"}), (["tpcc", "run", "-p", "-x-"], {"password": "-x-"}),
    (["tpcc", "run", "--", "-T", "4"], {}),
])
def test_option_forms(argv, options):
    p = ga.parse_gotpc_args(argv)
    assert p.options == options and p.command == ("tpcc", "run")


def test_words_after_the_flags():
    p = ga.parse_gotpc_args(["tpcc", "run", "--wait", "false", "--", "-T", "4"])
    assert p.positionals == ("false", "-T", "4") and p.runs and p.threads == 1


@pytest.mark.parametrize("text,seconds", [("1s", 1.0), ("500ms", 0.5), ("1m30s", 90.0), ("1.5h", 5400.0), ("0", 0.0),
                                          ("1µs", 1e-6), ("1μs", 1e-6), ("2us", 2e-6), ("-1s", -1.0), ("+3s", 3.0),
                                          ("1.s", 1.0), (".5s", 0.5), ("1h0m0.25s", 3600.25), ("100ns", 1e-7)])
def test_go_durations(text, seconds):
    assert ga.go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", ".s", "s", "1s5", "--1s", "9999999999h", "1 s", "0s-"])
def test_go_refuses_these_durations(text):
    with pytest.raises(ValueError, match=r"^time: "):
        ga.go_duration_seconds(text)


def test_interval_values():
    assert ga.parse_gotpc_args(["tpcc", "run", "--interval", "250ms"]).interval_s == 0.25
    bad = ga.parse_gotpc_args(["tpcc", "run", "--interval", "5"])
    assert bad.interval_s is None and bad.error and not bad.runs
    zero = ga.parse_gotpc_args(["tpcc", "run", "--interval", "0s"])  # go-tpc panics: exit 2 (fixture run_interval_zero)
    assert zero.interval_s == 0.0 and zero.error and "non-positive interval" in zero.error and not zero.runs


def test_flags_table():
    shorthands = {f.shorthand: f.name for flags in ga.FLAGS.values() for f in flags if f.shorthand}
    assert shorthands == {"D": "db", "H": "host", "U": "user", "p": "password", "P": "port", "T": "threads",
                          "t": "acThreads", "d": "driver"}
    root = {f.name: f for f in ga.FLAGS[()]}
    assert (root["interval"].kind, root["interval"].default, root["interval"].takes_value) == ("duration", "10s", True)
    assert not root["dropdata"].takes_value and root["port"].kind == "int"
    assert "output" not in {f.name for flags in ga.FLAGS.values() for f in flags}
    assert ga.COMMANDS[()] == ("ch", "help", "tpcc", "tpch", "version")
    assert ga.COMMANDS[("tpcc",)] == ("check", "cleanup", "prepare", "run")


# -- redaction ----------------------------------------------------------------------------------

S = "s3cr3t"


@pytest.mark.parametrize("argv,redacted", [
    (["tpcc", "run", "-p", S], ["tpcc", "run", "-p", "*****"]),
    (["tpcc", "run", f"-p{S}"], ["tpcc", "run", "-p*****"]),
    (["tpcc", "run", f"-p={S}"], ["tpcc", "run", "-p=*****"]),
    ([f"-hp{S}", "tpcc", "run"], ["-hp*****", "tpcc", "run"]),
    (["--password", S, "tpcc"], ["--password", "*****", "tpcc"]),
    ([f"--password={S}", "tpcc"], ["--password=*****", "tpcc"]),
    (["tpcc", "--passwd", S], ["tpcc", "--passwd", "*****"]),        # go-tpc refuses it, it is still a password
    (["-T", "-p", S], ["-T", "-p", "*****"]),                         # pflag gives -T the value "-p": redact anyway
    (["tpcc", "run", "--", "-p", S], ["tpcc", "run", "--", "-p", "*****"]),
    (["-D", "-p", "tpcc", "run"], ["-D", "-p", "*****", "run"]),
    (["-Up", S], ["-Up", S]),                                        # user "p"; S is an argument
    (["-U", "p", "-D", "pdb"], ["-U", "p", "-D", "pdb"]),
    (["-p"], ["-p"]), (["--password"], ["--password"]),
])
def test_redact_argv(argv, redacted):
    assert ga.redact_argv(argv) == redacted


def test_the_parsed_args_never_show_the_password():
    p = ga.parse_gotpc_args(["tpcc", "run", "-p", S])
    assert p.options["password"] == S and S not in repr(p) and S not in str(p)


# -- --interval ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,added", [
    (["tpcc", "run"], ["--interval", "1s"]), (["tpcc", "r", "-T", "4"], ["--interval", "1s"]),
    (["tpcc", "run", "--", "x"], ["--interval", "1s"]), (["ch", "run"], ["--interval", "1s"]),
    (["tpcc", "run", "--interval", "2s"], []), (["tpcc", "run", "--interval=10s"], []),
    (["tpcc", "prepare"], []), (["tpcc", "run", "--bad"], []), (["tpcc", "run", "-h"], []), (["version"], []),
    (["tpcc", "run", "-D"], []),
])
def test_ensure_interval(argv, added):
    out, got = ga.ensure_interval(argv)
    assert got == added
    assert out == added + argv
    if added:
        again = ga.parse_gotpc_args(out)
        assert again.interval_s == 1.0 and again.command == ga.parse_gotpc_args(argv).command and again.runs
        assert ga.ensure_interval(out) == (out, [])
