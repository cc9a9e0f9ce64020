"""Where the stack's configuration files are: the one place that knows.

The files live at the top of the repository (prometheus/, alertmanager/,
exporters/, dashboards/, grafana/, scripts/), where docker-compose mounts them.
Run from a checkout (``./benchwatch`` or an editable install) they are read
there; an installed package carries a copy under ``<prefix>/share/benchwatch``
(pyproject.toml's data-files). ``BENCHWATCH_RESOURCES`` overrides both.
"""

from __future__ import annotations

import os
import sys
import sysconfig

_MARKER = os.path.join("prometheus", "prometheus.yml")


def _checkout_root() -> str | None:
    # src/benchwatch/resources.py -> the repository root
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return root if os.path.exists(os.path.join(root, _MARKER)) else None


def _recorded_root() -> str | None:
    """Where pip put the data files of this installation, whatever the scheme (venv, --user, --prefix)."""
    import importlib.metadata  # here: 20-80 ms that a run from the checkout never needs

    try:
        dist = importlib.metadata.distribution("benchwatch")
    except importlib.metadata.PackageNotFoundError:
        return None
    marker = "share/benchwatch/" + _MARKER.replace(os.sep, "/")
    for f in dist.files or ():
        if str(f).replace(os.sep, "/").endswith(marker):
            return os.path.dirname(os.path.dirname(os.path.abspath(str(dist.locate_file(f)))))
    return None


def _installed_roots() -> list[str]:
    prefixes = [sysconfig.get_path("data"), sysconfig.get_path("data", f"{os.name}_user"), sys.prefix,
                sys.base_prefix, "/usr/local", "/usr"]
    recorded = _recorded_root()
    return ([recorded] if recorded else []) + [os.path.join(p, "share", "benchwatch") for p in dict.fromkeys(prefixes)]


def root() -> str:
    """The directory holding prometheus/, alertmanager/, exporters/, dashboards/, grafana/ and scripts/."""
    explicit = os.environ.get("BENCHWATCH_RESOURCES")
    if explicit:
        return os.path.abspath(explicit)
    checkout = _checkout_root()
    if checkout:
        return checkout
    for candidate in _installed_roots():
        if os.path.exists(os.path.join(candidate, _MARKER)):
            return candidate
    raise FileNotFoundError("benchwatch's configuration files were not found: reinstall the package "
                            "or set BENCHWATCH_RESOURCES to a checkout of the repository")


def path(*parts: str) -> str:
    """A resource file or directory, e.g. ``path("prometheus", "prometheus.yml")``."""
    return os.path.join(root(), *parts)


def checkout() -> str | None:
    """The repository this package runs from, if any (the launcher and tests live there)."""
    return _checkout_root()
