"""Every third-party module that benchwatch imports comes with what pyproject.toml declares for run time.

The installed-package integration test installs benchwatch alone (its dependencies are the test
interpreter's, which has the dev extra too): this is what says that a fresh install has what the code
imports, function-level imports included."""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import sys
import tomllib

from tests.helpers.throwaway import REPO_ROOT

SRC = os.path.join(REPO_ROOT, "src", "benchwatch")


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)).lower()  # type: ignore[union-attr]


def _imported_top_modules() -> dict[str, str]:
    found: dict[str, str] = {}
    for folder, _dirs, files in os.walk(SRC):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    tops = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = [node.module.split(".")[0]]
                else:
                    continue
                for top in tops:
                    found.setdefault(top, os.path.relpath(path, REPO_ROOT))
    return found


def test_every_third_party_import_is_a_declared_dependency_or_comes_with_one():
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        declared = {_name(r) for r in tomllib.load(f)["project"]["dependencies"]}
    with_them = set(declared)
    for dist in declared:
        for req in md.requires(dist) or []:
            if "extra ==" not in req:
                with_them.add(_name(req))
    distributions = md.packages_distributions()
    missing = {}
    for top, where in _imported_top_modules().items():
        if top in sys.stdlib_module_names or top in ("benchwatch", "__future__"):
            continue
        dists = {_name(d) for d in distributions.get(top, [top])}
        if not dists & with_them:
            missing[top] = (sorted(dists), where)
    assert not missing, f"imported but not declared in pyproject.toml's dependencies: {missing}"
