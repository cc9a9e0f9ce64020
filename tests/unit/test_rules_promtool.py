"""promtool on every rule and alert file, and on every promtool unit-test file.

Files are found when the tests are collected: a file added under
prometheus/rules, prometheus/alerts or tests/rules is checked without
touching this module. `promtool check rules` runs once per rule file; the
unit-test files run in one `promtool test rules` call, as CI and mixins run
them.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess

import pytest
import yaml

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


def test_promtool_unit_tests_in_one_call():
    # promtool resolves each file's rule_files relative to that file, so one
    # call from the repository root is what `promtool test rules tests/rules/*.yml` does,
    # and each file is tested as it would be alone (promtool names the failing file).
    # Not each file again in a call of its own: that doubled the suite's slowest half minute.
    assert TEST_FILES, "no tests/rules/*.test.yml"
    r = _promtool("test", "rules", *[_rel(p) for p in TEST_FILES], cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(TEST_FILES), r.stdout + r.stderr


def _loaded_groups(test_path: str) -> list[dict]:
    with open(test_path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    groups = []
    for pattern in spec.get("rule_files") or []:
        for rule_file in sorted(glob.glob(os.path.join(os.path.dirname(test_path), pattern))):
            with open(rule_file, encoding="utf-8") as f:
                groups.extend(yaml.safe_load(f)["groups"])
    return groups


def _mentions(rule: dict, name: str) -> bool:
    # expr, labels and annotations: an annotation's query reads recorded series too
    return re.search(rf"(?<![A-Za-z0-9_:]){re.escape(name)}(?![A-Za-z0-9_:])", yaml.safe_dump(rule)) is not None


@pytest.mark.parametrize("path", TEST_FILES, ids=_rel)
def test_group_eval_order_is_pinned(path):
    """promtool evaluates the loaded groups in Go map order unless group_eval_order
    names them all (an unnamed group ties with the first named one), so a group that
    reads another group's records would see them one evaluation late in some runs:
    e.g. PgbenchTPSDrop's baseline annotation, 1252.0 instead of 1226.0, one run in ten."""
    groups = _loaded_groups(path)
    names = [g["name"] for g in groups]
    with open(path, encoding="utf-8") as f:
        order = yaml.safe_load(f).get("group_eval_order") or []
    if len(names) < 2:
        return
    assert sorted(order) == sorted(names), f"group_eval_order must list exactly the groups loaded: {names}"
    position = {name: i for i, name in enumerate(order)}
    late = []
    for writer in groups:
        for record in [r["record"] for r in writer["rules"] if "record" in r]:
            for reader in groups:
                if reader is not writer and position[reader["name"]] < position[writer["name"]] and \
                        any(_mentions(rule, record) for rule in reader["rules"]):
                    late.append(f"{reader['name']} reads {record} from {writer['name']}")
    assert not late, f"group_eval_order evaluates a reader before the group it reads: {late}"


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
