"""benchwatch installed with pip into a fresh venv outside the checkout, run from another directory.

Proves the package carries what the stack needs (prometheus/, alertmanager/,
exporters/, dashboards/, grafana/, scripts/ under <venv>/share/benchwatch) and
that nothing reaches back into the checkout or needs PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from tests.helpers.throwaway import REPO_ROOT, free_ports, make_state_dir

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def installed():
    home = tempfile.mkdtemp(prefix="benchwatch-installed-", dir="/tmp")
    venv = os.path.join(home, "venv")
    # Build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    source = os.path.join(home, "source")
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "build", "*.egg-info"))
    try:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
        # The package itself is built and installed from its copy; its dependencies are this interpreter's
        # (installing them again took most of the test's 47 s). A path line in a .pth file adds the directory
        # only: the .pth files in it (the checkout's editable install) are not read, so benchwatch itself can
        # only come from the new venv.
        pip = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
                              "--no-deps", source],
                             capture_output=True, text=True, timeout=900)
        assert pip.returncode == 0, pip.stderr[-2000:]
        site = subprocess.run([os.path.join(venv, "bin", "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              capture_output=True, text=True, check=True, timeout=60).stdout.strip()
        deps = sysconfig.get_path("purelib")
        with open(os.path.join(site, "zz_benchwatch_test_dependencies.pth"), "w", encoding="utf-8") as f:
            f.write(deps + "\n")
        shutil.rmtree(source)
        yield venv
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _env(venv: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BENCHWATCH_", "PG", "VIRTUAL_ENV"))}
    env["PATH"] = os.path.join(venv, "bin") + os.pathsep + env.get("PATH", "")
    return env


def test_the_installed_package_finds_its_files_outside_the_checkout(installed):
    code = "from benchwatch import resources; print(resources.root()); print(resources.checkout())"
    r = subprocess.run([os.path.join(installed, "bin", "python"), "-c", code], cwd="/tmp", env=_env(installed),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    root, checkout = r.stdout.split()
    assert root == os.path.join(installed, "share", "benchwatch") and checkout == "None"
    for rel in ("prometheus/prometheus.yml", "prometheus/rules/pgbench.yml", "prometheus/alerts/pgbench.yml",
                "alertmanager/alertmanager.yml", "exporters/postgres_exporter/queries.yaml",
                "dashboards/pgbench-run.json", "grafana/provisioning/datasources/benchwatch.yml", "scripts/install-deps"):
        assert os.path.isfile(os.path.join(root, rel)), rel
    assert os.access(os.path.join(root, "scripts", "install-deps"), os.X_OK)
    # Package data inside the package: the offline page's script (benchwatch/share/offline.js).
    code = "from benchwatch.share import html; print(html.__file__); print(len(html.chart_js().encode()))"
    r = subprocess.run([os.path.join(installed, "bin", "python"), "-c", code], cwd="/tmp", env=_env(installed),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    module, length = r.stdout.split()
    assert module.startswith(installed + os.sep) and int(length) == os.path.getsize(
        os.path.join(REPO_ROOT, "src", "benchwatch", "share", "offline.js"))


def test_demo_from_another_directory(installed):
    state = make_state_dir()
    ports = free_ports()
    flags = ["--state-dir", state] + [f"--{c.replace('_', '-')}-port={p}" for c, p in ports.items()]
    benchwatch = os.path.join(installed, "bin", "benchwatch")
    cwd = tempfile.mkdtemp(prefix="benchwatch-cwd-", dir="/tmp")
    try:
        r = subprocess.run([benchwatch, "demo", "--duration", "8", *flags], cwd=cwd, env=_env(installed),
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        m = re.search(r"progress lines printed by pgbench: (\d+); samples in Prometheus: (\d+)", r.stdout)
        assert m and int(m.group(1)) >= 5 and m.group(1) == m.group(2), r.stdout
        assert re.search(r"^  stability over \d+ intervals of 1 s after [0-9.]+ s of warm-up: TPS median [0-9,.]+, CoV ",
                         r.stdout, re.M), r.stdout  # how steady the run was, as its summary.json keeps it
        assert os.listdir(cwd) == []  # nothing written where it was run from
    finally:
        subprocess.run([benchwatch, "down", *flags], cwd=cwd, env=_env(installed), capture_output=True, timeout=180)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(cwd, ignore_errors=True)


def test_a_user_install_finds_its_files(tmp_path):
    """pip install --user puts the data files under the user base, not under sys.prefix."""
    base_python = getattr(sys, "_base_executable", None) or sys.executable  # a venv has no user site
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "build", "*.egg-info"))
    userbase = tmp_path / "userbase"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BENCHWATCH_", "VIRTUAL_ENV", "PIP_"))}
    env.update(PYTHONUSERBASE=str(userbase), PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run([base_python, "-m", "pip", "install", "--quiet", "--user", "--no-deps", str(source)],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-2000:]
    r = subprocess.run([base_python, "-c", "from benchwatch import resources; print(resources.root())"],
                       cwd="/tmp", env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(userbase / "share" / "benchwatch")
