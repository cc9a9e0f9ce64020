"""The test suite itself: a missing tool fails a test instead of skipping it."""

from __future__ import annotations

import ast
import os
import shutil

import pytest

from tests.helpers.tools import PACKAGES, require_tool

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Skips that are about the machine, not a missing program, with words their line must contain.
ALLOWED_SKIPS = {os.path.join("integration", "test_iostat_rules.py"): "is on no block device"}


def test_require_tool_fails_naming_the_debian_package(tmp_path, monkeypatch):
    assert require_tool("sh") == shutil.which("sh")
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: nothing is installed
    with pytest.raises(pytest.fail.Exception, match=r"amtool not found on PATH: apt-get install prometheus-alertmanager"):
        require_tool("amtool")
    with pytest.raises(pytest.fail.Exception, match=r"promtool not found on PATH: apt-get install prometheus\b"):
        require_tool("promtool")
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install some-package"):
        require_tool("some-tool", "some-package")


def skip_lines(path: str) -> list[tuple[int, str]]:
    """(line number, line) of every pytest.skip / mark.skipif / importorskip / xfail in a file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.splitlines()
    return sorted({(node.lineno, lines[node.lineno - 1].strip()) for node in ast.walk(ast.parse(text, path))
                   if isinstance(node, ast.Attribute) and node.attr in ("skip", "skipif", "importorskip", "xfail")})


def test_no_test_skips_for_a_missing_tool():
    offenders = []
    for folder, _, names in os.walk(TESTS):
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), TESTS)
            for lineno, line in skip_lines(os.path.join(folder, name)):
                if rel in ALLOWED_SKIPS and line.startswith("pytest.skip(") and ALLOWED_SKIPS[rel] in line:
                    continue
                offenders.append(f"tests/{rel}:{lineno}: {line}")
    assert not offenders, "call tests.helpers.tools.require_tool (a failure) instead of skipping:\n" + "\n".join(offenders)


def test_install_deps_installs_every_package_the_tests_use():
    from benchwatch.stack.packages import everything

    # --test: everything the plug-ins declare (what the script installs without a selection), and the
    # test suite's own packages, which the script names.
    with open(os.path.join(os.path.dirname(TESTS), "scripts", "install-deps"), encoding="utf-8") as f:
        words = set(f.read().replace("(", " ").replace(")", " ").split()) | set(everything().debian)
    assert set(PACKAGES.values()) <= words, set(PACKAGES.values()) - words
