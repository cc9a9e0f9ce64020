"""External programs the tests run, and the Debian packages that provide them.

scripts/test installs those packages (scripts/install-deps --test) before it runs
pytest, so under the test command a missing program is a broken environment:
the test fails saying which package to install, it is never skipped.
"""

from __future__ import annotations

import shutil

import pytest

# program -> Debian package that ships it (bookworm)
PACKAGES = {
    "amtool": "prometheus-alertmanager",
    "chromium": "chromium",
    "docker-compose": "docker-compose",
    "iostat": "sysstat",
    "mariadbd": "mariadb-server",
    "prometheus": "prometheus",
    "prometheus-mysqld-exporter": "prometheus-mysqld-exporter",
    "promtool": "prometheus",
    "sysbench": "sysbench",
}


def require_tool(name: str, package: str | None = None) -> str:
    """The path of program ``name``; fails the calling test if it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        package = package or PACKAGES.get(name, name)
        pytest.fail(f"{name} not found on PATH: apt-get install {package} "
                    "(scripts/install-deps --test installs it)", pytrace=False)
    return path
