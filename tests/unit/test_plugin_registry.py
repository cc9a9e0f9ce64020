"""The plug-in registries refuse a second plug-in under a name or alias already taken."""

from __future__ import annotations

import pytest

from benchwatch import engines, loadgens
from benchwatch.util.plugins import DuplicatePlugin, PluginRegistry


class _One:
    pass


class _Other:
    pass


def test_a_name_or_alias_taken_twice_is_refused():
    registry: PluginRegistry[object] = PluginRegistry("engine")
    registry.add(_One(), "postgresql", ("postgres",))
    with pytest.raises(DuplicatePlugin, match="'postgresql' is taken twice"):
        registry.add(_Other(), "postgresql")
    with pytest.raises(DuplicatePlugin, match="'postgres' is taken twice"):
        registry.add(_Other(), "other", ("postgres",))
    assert list(registry) == ["postgresql"]  # a refused plug-in leaves nothing behind
    assert registry.find("other") is None


def test_find_by_name_or_alias():
    registry: PluginRegistry[object] = PluginRegistry("engine")
    one, other = _One(), _Other()
    registry.add(one, "postgresql", ("postgres",))
    registry.add(other, "mysql", ("mariadb",))
    assert registry.find("postgres") is one and registry.find("mariadb") is other and registry.find("x") is None
    assert dict(registry) == {"postgresql": one, "mysql": other}


def test_the_real_registries_are_registry_objects():
    assert isinstance(engines.load_engines(), PluginRegistry)
    assert isinstance(loadgens.load_generators(), PluginRegistry)
    assert engines.get("mariadb").name == "mysql" and engines.get("postgres").name == "postgresql"
    with pytest.raises(engines.UnknownEngine):
        engines.get("oracle")
