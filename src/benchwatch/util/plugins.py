"""A plug-in folder's modules found by name, so an engine's or a tool's class need not forward to each."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any, Generic, TypeVar

P = TypeVar("P")


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


class DuplicatePlugin(ValueError):
    """A second plug-in under a name or alias one already has."""


class PluginRegistry(Mapping[str, P], Generic[P]):
    """The plug-ins of one kind (engines, load generators) by name, in the order they were added. A name or
    alias already taken is refused (:class:`DuplicatePlugin`), as prometheus_client's registry refuses a
    series name twice: two folders answering to one name would otherwise silently hide one of them."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_name: dict[str, P] = {}
        self._taken: dict[str, str] = {}  # every name and alias -> the module that took it
        self._canonical: dict[str, str] = {}  # every name and alias -> the plug-in's name

    def add(self, plugin: P, name: str, aliases: tuple[str, ...] = ()) -> None:
        where = type(plugin).__module__
        for n in (name, *aliases):
            if n in self._taken:
                raise DuplicatePlugin(f"{self.kind} name {n!r} is taken twice: by {self._taken[n]} and by {where}")
        for n in (name, *aliases):
            self._taken[n] = where
            self._canonical[n] = name
        self._by_name[name] = plugin

    def find(self, name: str) -> P | None:
        """The plug-in a name or an alias names; None if none does."""
        canonical = self._canonical.get(name)
        return self._by_name[canonical] if canonical is not None else None

    def __getitem__(self, name: str) -> P:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)
