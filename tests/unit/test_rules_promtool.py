"""promtool on every rule and alert file, and on every promtool unit-test file.

One pytest test per file, found when the tests are collected: a file added
under prometheus/rules, prometheus/alerts or tests/rules is checked without
touching this module.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest

from tests.helpers.tools import require_tool

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = os.environ.get("BENCHWATCH_PROMTOOL", "promtool")


def _files(*patterns: str) -> list[str]:
    found: set[str] = set()
    for pattern in patterns:
        found.update(glob.glob(os.path.join(REPO, pattern)))
    return sorted(found)


RULE_FILES = _files("prometheus/rules/*.yml", "prometheus/rules/*.yaml",
                    "prometheus/alerts/*.yml", "prometheus/alerts/*.yaml")
TEST_FILES = _files("tests/rules/*.test.yml", "tests/rules/*.test.yaml")


def _rel(path: str) -> str:
    return os.path.relpath(path, REPO)


def _promtool(*args: str, cwd: str) -> subprocess.CompletedProcess:
    require_tool(PROMTOOL, "prometheus")
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("path", RULE_FILES, ids=_rel)
def test_check_rules(path):
    r = _promtool("check", "rules", path, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


@pytest.mark.parametrize("path", TEST_FILES, ids=_rel)
def test_promtool_unit_tests(path):
    # rule_files in a test file are relative to the test file
    r = _promtool("test", "rules", os.path.basename(path), cwd=os.path.dirname(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


RECORD = re.compile(r"^\s*-?\s*record:\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*$", re.M)


def _tested_rule_files() -> list[str]:
    paired = []
    for path in RULE_FILES:
        stem = os.path.splitext(os.path.basename(path))[0]
        if os.path.dirname(_rel(path)) == os.path.join("prometheus", "rules") and \
                os.path.exists(os.path.join(REPO, "tests", "rules", f"{stem}.test.yml")):
            paired.append(path)
    return paired


@pytest.mark.parametrize("path", _tested_rule_files(), ids=_rel)
def test_every_recorded_series_is_unit_tested(path):
    """A rules file with a tests/rules/<name>.test.yml has every record tested there."""
    stem = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8") as f:
        records = RECORD.findall(f.read())
    with open(os.path.join(REPO, "tests", "rules", f"{stem}.test.yml"), encoding="utf-8") as f:
        tests = f.read()
    assert records, f"no record: in {_rel(path)}"
    untested = [name for name in records if f"expr: {name}" not in tests and f"'{name}{{" not in tests]
    assert not untested, f"recorded in {_rel(path)} but never evaluated in its test file: {untested}"
