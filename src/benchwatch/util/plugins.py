"""A plug-in folder's modules found by name, so an engine's or a tool's class need not forward to each."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def folder_module(plugin: object, name: str) -> ModuleType | None:
    """Module ``name`` of the folder (package) that defines ``plugin``'s class, imported on first use; None
    when the folder has no such module (an ImportError inside the module itself still surfaces)."""
    package = type(plugin).__module__
    qualified = f"{package}.{name}"
    try:
        return importlib.import_module(qualified)
    except ModuleNotFoundError as e:
        if e.name == qualified:
            return None
        raise


def folder_part(plugin: object, module: str, attribute: str, default: Any = None) -> Any:
    """``attribute`` of the folder's ``module`` (a function or a table), or ``default`` when either is missing."""
    found = folder_module(plugin, module)
    return getattr(found, attribute, default) if found is not None else default
