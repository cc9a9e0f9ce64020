"""scripts/install-deps, which `demo` runs first on a fresh machine: quiet, apt's output in a log.

Installing for real would change this machine and needs the Debian mirror, so the
install path runs the real script with stand-ins for dpkg-query and apt-get that
come first on PATH: they report every package missing and print as much as apt
does. What is tested is the script's own handling of that output, not apt.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess

import pytest

from benchwatch import resources

SCRIPT = resources.path("scripts", "install-deps")
PACKAGES = ["postgresql", "prometheus", "prometheus-node-exporter", "prometheus-postgres-exporter",
            "prometheus-alertmanager", "postgresql-15-plproxy", "sysbench", "mariadb-server",
            "prometheus-mysqld-exporter"]


def test_prints_nothing_when_everything_is_installed():
    # This machine has the packages (scripts/test installs them first).
    for args in ([], ["--test"]):
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
    calls = tmp_path / "apt-calls"
    # dpkg-query as for a package that is not installed: a message on stderr, exit 1.
    write_tool(bin_dir, "dpkg-query", 'echo "dpkg-query: no packages found matching $4" >&2\nexit 1\n')
    # apt-get as loud as the real one: 300 lines on stdout, a warning on stderr.
    write_tool(bin_dir, "apt-get", f"""echo "$*" >> {calls}
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
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", TMPDIR=str(tmp))
    return env, calls


def test_one_line_per_step_and_apt_output_in_the_log(stand_ins):
    env, calls = stand_ins
    r = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr  # update, install: not apt's 600 lines
    log = re.fullmatch(r"benchwatch: installing (.+) \(apt log: (\S+)\)", lines[1])
    assert log and log.group(1) == ", ".join(PACKAGES), lines
    assert lines[0] == f"benchwatch: updating the package lists (apt log: {log.group(2)})"
    with open(log.group(2), encoding="utf-8") as f:
        text = f.read()
    assert text.count("Setting up pkg") == 300 and "W: debconf noise" in text
    assert calls.read_text().splitlines()[-1].endswith("--no-install-recommends " + " ".join(PACKAGES))


def test_a_failed_install_shows_the_log_end_and_keeps_apts_exit_code(stand_ins):
    env, _calls = stand_ins
    r = subprocess.run([SCRIPT, "--test"], env=dict(env, APT_EXIT="100"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 100
    assert "chromium" in r.stderr.splitlines()[1]
    assert re.search(r"benchwatch: 'apt-get install .*' failed with exit code 100; the end of \S+:", r.stderr)
    tail = [l for l in r.stderr.splitlines() if l.startswith("  | ")]
    assert 0 < len(tail) <= 20 and tail[-1] == "  | E: Sub-process /usr/bin/dpkg returned an error code (1)"
