"""scripts/install-deps, which `demo` runs first on a fresh machine: what it installs for which demo, engine
and tool (benchwatch.stack.packages, from the plug-ins' declarations), quiet, apt's output in a log.

Installing for real would change this machine and needs the Debian mirror, so the
install path runs the real script with stand-ins for dpkg-query, apt-get, go and id
that come first on PATH: they report every package and Go program missing, print as
much as apt does, and record how they were called. What is tested is the script's
own choice of what to install and its handling of that output, not apt.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest

from benchwatch import engines, loadgens, resources
from benchwatch.stack import packages

SCRIPT = resources.path("scripts", "install-deps")
SHARED = ["prometheus", "prometheus-alertmanager", "prometheus-node-exporter"]
PGBENCH_DEMO = [*SHARED, "postgresql", "prometheus-postgres-exporter"]
MARIADB_DEMO = [*SHARED, "mariadb-server", "prometheus-mysqld-exporter", "sysbench"]
GOTPC = "github.com/pingcap/go-tpc/cmd/go-tpc@v1.0.7"
# What the script installed before it took arguments, and still does without any.
EVERYTHING = {"postgresql", "prometheus", "prometheus-node-exporter", "prometheus-postgres-exporter", "prometheus-alertmanager",
              "postgresql-15-plproxy", "sysbench", "mariadb-server", "prometheus-mysqld-exporter"}


# -- which packages (benchwatch.stack.packages) ---------------------------------------------------

def test_the_pgbench_demo_needs_postgresql_and_the_stack_only():
    needs = packages.for_demo(engines.get("postgresql"))
    assert (list(needs.debian), needs.go_modules) == (PGBENCH_DEMO, ())
    assert needs.install_args() == PGBENCH_DEMO
    # The same from the names a person gives the script.
    assert packages.select("postgres", ["pgbench"]) == needs == packages.select("postgresql") == packages.select()


def test_the_sharded_demo_adds_plproxy_and_the_mariadb_demo_needs_no_postgresql():
    assert list(packages.for_demo(engines.get("postgresql"), ["shards"]).debian) == [*PGBENCH_DEMO, "postgresql-15-plproxy"]
    assert packages.select(features=["shards"]) == packages.for_demo(engines.get("postgresql"), ["shards"])
    assert list(packages.for_demo(engines.get("mariadb")).debian) == MARIADB_DEMO
    assert packages.select("mariadb") == packages.select(tool_names=["sysbench"], engine_name="mysql")


def test_a_tool_brings_its_own_and_its_engines():
    gotpc = packages.select(tool_names=["go-tpc"])  # a program name, not only the registry's name (gotpc)
    assert (list(gotpc.debian), gotpc.go_modules) == ([*SHARED, "mariadb-server", "prometheus-mysqld-exporter"], (GOTPC,))
    assert gotpc.install_args()[-1] == "go:" + GOTPC
    both = packages.select("mariadb", ["sysbench", "gotpc"])
    assert (list(both.debian), both.go_modules) == (MARIADB_DEMO, (GOTPC,))
    on_postgresql = packages.select("postgresql", ["sysbench"])  # sysbench's pgsql driver
    assert list(on_postgresql.debian) == [*PGBENCH_DEMO, "sysbench"]


def test_everything_is_what_the_script_always_installed_and_every_declaration():
    every = packages.everything()
    assert set(every.debian) == EVERYTHING and len(every.debian) == len(EVERYTHING)
    assert every.go_modules == (GOTPC,)
    for engine in engines.load_engines().values():
        assert set(engine.packages.values()) <= set(every.debian)
        assert {p for ps in engine.feature_packages.values() for p in ps} <= set(every.debian)
        demo_tool = loadgens.load_generators()[engine.demo_tool]  # each engine's demo runs a registered tool
        assert engine.name in demo_tool.engines
    for tool in loadgens.load_generators().values():
        assert set(tool.packages) <= set(every.debian) and set(tool.go_modules) <= set(every.go_modules)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: packages.select("postgresql", ["go-tpc"]), "go-tpc does not drive PostgreSQL (it drives: MySQL/MariaDB)"),
    (lambda: packages.select("mariadb", features=["shards"]), "MySQL/MariaDB has no feature 'shards' (its features: none)"),
    (lambda: packages.select("postgresql", features=["shard"]), "PostgreSQL has no feature 'shard' (its features: shards)"),
    (lambda: packages.select(tool_names=["ycsb"]), "unknown tool 'ycsb': use one of " + ", ".join(packages.tool_choices())),
    (lambda: packages.select("oracle"), "unknown engine 'oracle': use one of mariadb, mysql, postgres, postgresql"),
])
def test_a_selection_of_nothing_there_says_what_there_is(call, message):
    with pytest.raises(packages.SelectionError) as e:
        call()
    assert str(e.value) == message


# -- the script -----------------------------------------------------------------------------------

def test_prints_nothing_when_everything_is_installed():
    # This machine has the packages (scripts/test installs them first).
    for args in ([], ["--test"], PGBENCH_DEMO, ["--engine", "mariadb", "--tool", "go-tpc"]):
        r = subprocess.run([SCRIPT, *args], capture_output=True, timeout=60)
        assert (r.returncode, r.stdout, r.stderr) == (0, b"", b""), args


def write_tool(directory, name: str, body: str) -> None:
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


@pytest.fixture
def stand_ins(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    # dpkg-query as for a package that is not installed: a message on stderr, exit 1.
    write_tool(bin_dir, "dpkg-query", 'echo "dpkg-query: no packages found matching $4" >&2\nexit 1\n')
    # apt-get as loud as the real one: 300 lines on stdout, a warning on stderr.
    write_tool(bin_dir, "apt-get", f"""echo "apt-get $*" >> {calls}
i=0
while [ $i -lt 150 ]; do
  echo "Selecting previously unselected package pkg$i."; echo "Setting up pkg$i (1.0) ..."; i=$((i+1))
done
echo "W: debconf noise" >&2
case "$*:${{APT_EXIT:-0}}" in
  *install*:0) ;;
  *install*) echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2; exit "$APT_EXIT";;
esac
""")
    write_tool(bin_dir, "go", f'echo "$GOBIN go $*" >> {calls}\n')
    # id as root unless TEST_UID says otherwise.
    write_tool(bin_dir, "id", 'case "$1" in -u) echo "${TEST_UID:-0}";; -un) echo tester;; *) exec /usr/bin/id "$@";; esac\n')
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # No go-tpc anywhere benchwatch looks (not /usr/local/bin, not ~/go/bin), and the venv's Python for the lists.
    env = {k: v for k, v in os.environ.items() if k not in ("GOBIN", "GOPATH")}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", TMPDIR=str(tmp), HOME=str(tmp_path), BENCHWATCH_PYTHON=sys.executable)
    return env, calls


def run(args: list[str], env: dict, **more: str) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *args], env=dict(env, **more), capture_output=True, text=True, timeout=60)


def installed_by(calls) -> tuple[list[str], list[str]]:
    """(the Debian packages apt-get was asked to install, the go install calls) of one run."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    apt = [l.split("--no-install-recommends ")[1].split() for l in lines if l.startswith("apt-get install")]
    return [p for ps in apt for p in ps], [l for l in lines if " go install " in l]


def test_one_line_per_step_and_apt_output_in_the_log(stand_ins):
    env, calls = stand_ins
    r = run([], env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    # update, install, build go-tpc, build the tool built from its module source: not apt's 600 lines
    assert len(lines) == 4, r.stderr
    log = re.fullmatch(r"benchwatch: installing (.+) \(apt log: (\S+)\)", lines[1])
    assert log and set(log.group(1).split(", ")) == EVERYTHING, lines
    assert lines[0] == f"benchwatch: updating the package lists (apt log: {log.group(2)})"
    with open(log.group(2), encoding="utf-8") as f:
        text = f.read()
    assert text.count("Setting up pkg") == 300 and "W: debconf noise" in text
    debian, go = installed_by(calls)
    assert debian == list(packages.everything().debian)
    assert go == [f"/usr/local/bin go install {GOTPC}"]  # as root: on everyone's PATH


def test_a_failed_install_shows_the_log_end_and_keeps_apts_exit_code(stand_ins):
    env, _calls = stand_ins
    r = run(["--test"], env, APT_EXIT="100")
    assert r.returncode == 100
    assert "chromium" in r.stderr.splitlines()[1]
    assert re.search(r"benchwatch: 'apt-get install .*' failed with exit code 100; the end of \S+:", r.stderr)
    tail = [l for l in r.stderr.splitlines() if l.startswith("  | ")]
    assert 0 < len(tail) <= 20 and tail[-1] == "  | E: Sub-process /usr/bin/dpkg returned an error code (1)"


def test_the_pgbench_demo_installs_only_what_it_uses(stand_ins):
    env, calls = stand_ins
    r = run(packages.for_demo(engines.get("postgresql")).install_args(), env)
    assert r.returncode == 0, r.stderr
    assert installed_by(calls) == (PGBENCH_DEMO, [])  # no MariaDB, sysbench, PL/Proxy, go-tpc build
    assert r.stderr.splitlines()[1].startswith("benchwatch: installing " + ", ".join(PGBENCH_DEMO) + " (apt log: ")


@pytest.mark.parametrize(("args", "debian", "go"), [
    (["--engine", "postgresql", "--tool", "pgbench"], PGBENCH_DEMO, []),
    (["--engine=mariadb"], MARIADB_DEMO, []),
    (["--feature", "shards"], [*PGBENCH_DEMO, "postgresql-15-plproxy"], []),
    (["--tool", "go-tpc"], [*SHARED, "mariadb-server", "prometheus-mysqld-exporter"], [f"/usr/local/bin go install {GOTPC}"]),
    (["--test", "--engine", "postgresql"], [*PGBENCH_DEMO, "sysstat", "docker-compose", "chromium", "nodejs", "victoria-metrics"], []),
    (["sysstat", "go:example.org/x/cmd/prog@v1.2.3"], ["sysstat"], ["/usr/local/bin go install example.org/x/cmd/prog@v1.2.3"]),
])
def test_the_script_installs_the_selection_and_nothing_else(stand_ins, args, debian, go):
    env, calls = stand_ins
    r = run(args, env)
    assert r.returncode == 0, r.stderr
    assert installed_by(calls) == (debian, go)


def test_not_root_installs_nothing_and_says_all_that_is_missing(stand_ins):
    env, calls = stand_ins
    r = run(["--engine", "mariadb", "--tool", "sysbench", "--tool", "go-tpc"], env, TEST_UID="1000")
    assert r.returncode == 1
    assert not calls.exists()  # neither apt-get nor go was run
    lines = r.stderr.splitlines()
    assert lines[0] == "benchwatch: installing needs root, and this is tester; missing:"
    assert lines[1] == "  Debian packages: " + " ".join(MARIADB_DEMO)
    assert lines[2] == "    as root: apt-get install --no-install-recommends " + " ".join(MARIADB_DEMO)
    assert lines[3].startswith("  go-tpc (a Go module") and f"go install {GOTPC}" in lines[3]
    assert lines[-1] == f"benchwatch: or all of it at once: sudo {SCRIPT} --engine mariadb --tool sysbench --tool go-tpc"


def test_not_root_with_go_builds_a_go_program_as_the_user(stand_ins):
    env, calls = stand_ins
    # Every Debian package there: dpkg-query as for an installed one.
    write_tool(env["PATH"].split(":")[0], "dpkg-query", "printf 'install ok installed'\n")
    r = run(["--tool", "go-tpc"], env, TEST_UID="1000")
    assert r.returncode == 0, r.stderr
    assert installed_by(calls) == ([], [f" go install {GOTPC}"])  # no GOBIN: Go's own ~/go/bin
    assert r.stderr.startswith("benchwatch: building go-tpc v1.0.7 into $(go env GOPATH)/bin")


@pytest.mark.parametrize(("args", "message"), [
    (["--bogus"], "benchwatch: install-deps: unknown option --bogus"),
    (["--engine"], "benchwatch: install-deps: --engine needs a value"),
    (["postgresql;rm"], "benchwatch: install-deps: 'postgresql;rm' is not a Debian package name nor go:MODULE@VERSION"),
    (["Postgresql"], "benchwatch: install-deps: 'Postgresql' is not a Debian package name nor go:MODULE@VERSION"),
    (["--engine", "oracle"], "benchwatch: unknown engine 'oracle': use one of mariadb, mysql, postgres, postgresql"),
    (["--engine", "postgresql", "--tool", "go-tpc"], "benchwatch: go-tpc does not drive PostgreSQL (it drives: MySQL/MariaDB)"),
])
def test_bad_arguments_are_refused_with_a_reason_and_install_nothing(stand_ins, args, message):
    env, calls = stand_ins
    r = run(args, env)
    assert (r.returncode, r.stderr.splitlines()[0]) == (2, message)
    assert not calls.exists()
