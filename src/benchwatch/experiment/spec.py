"""What ``benchwatch sweep`` was asked: variants and cells, read and checked before any run starts.

A variant is ``NAME`` (the server as it is), ``NAME:setting=value[,setting=value...]`` (server
settings), or one of the other kinds, ``NAME:bindir=DIR``, ``NAME:dsn=DSN``, ``NAME:target=NAME``,
``NAME:before=COMMAND`` (a before= command may hold commas: it takes the rest of the spec).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from benchwatch import engines

# The kinds of variant that are not server settings: key -> what it is.
KINDS = {"bindir": "another PostgreSQL build's bin directory", "dsn": "a server that already runs",
         "target": "another target of the stack", "before": "a command run before each of the variant's runs"}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$")


class SpecError(ValueError):
    """A sweep asked for something that cannot be run; the message says what and how to fix it."""


@dataclass
class Variant:
    name: str
    settings: dict[str, str] = field(default_factory=dict)
    bindir: str | None = None
    dsn: str | None = None
    target: str | None = None
    before: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Variant:
        return cls(**data)

    @property
    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in self.settings.items()]
        parts += [f"{k}={getattr(self, k)}" for k in KINDS if getattr(self, k) and k != "dsn"]
        if self.dsn:
            parts.append("dsn=(given)")  # a DSN may hold a password: never shown
        return ", ".join(parts) or "the server as it is"


def parse_variant(text: str) -> Variant:
    name, sep, rest = text.partition(":")
    name = name.strip()
    if not _NAME.match(name):
        raise SpecError(f"variant {text!r}: its name {name!r} must be letters, digits, _ . + - (up to 63)")
    variant = Variant(name)
    if not sep:
        return variant
    if not rest.strip():
        raise SpecError(f"variant {text!r}: nothing after the colon (NAME:setting=value[,setting=value...])")
    key, eq, value = rest.partition("=")
    key = key.strip()
    if key in KINDS:
        if not eq or not value.strip():
            raise SpecError(f"variant {name}: {key}= needs a value ({KINDS[key]})")
        if key == "before":
            variant.before = value.strip()  # a shell command: commas are its own
            return variant
        setattr(variant, key, value.strip())
        return variant
    for item in rest.split(","):
        k, eq, v = item.partition("=")
        k = k.strip()
        if not eq or not k:
            raise SpecError(f"variant {name}: {item!r} is not setting=value")
        if k in KINDS:
            raise SpecError(f"variant {name}: {k}= cannot be combined with settings: give it a variant of its own")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", k):
            raise SpecError(f"variant {name}: {k!r} is not a setting name")
        if k in variant.settings:
            raise SpecError(f"variant {name}: setting {k} given twice")
        variant.settings[k] = v.strip()
    return variant


def parse_variants(texts: list[str]) -> list[Variant]:
    if not texts:
        raise SpecError("no --variant: give at least one (the first is the baseline), e.g. --variant base")
    variants = [parse_variant(t) for t in texts]
    seen: set[str] = set()
    for v in variants:
        if v.name in seen:
            raise SpecError(f"variant name {v.name!r} is used twice: each variant needs its own name")
        seen.add(v.name)
    return variants


def check_bindir(variant: Variant, engine: engines.Engine | None = None) -> None:
    """A bindir= variant names a directory holding a build of the stack's engine (the default one if not
    said): its server and what makes its data dir (Engine.build_programs)."""
    if variant.bindir is None:
        return
    engine = engine or engines.default()
    for program in engine.build_programs:
        if not os.access(os.path.join(variant.bindir, program), os.X_OK):
            raise SpecError(f"variant {variant.name}: bindir {variant.bindir} has no {program} "
                            f"(give the bin directory of a {engine.title} build)")


def parse_list(option: str, text: str | None, positive_int: bool = True) -> list[str]:
    """``--clients 1,8,16`` -> ["1", "8", "16"]; [] when not given."""
    if text is None:
        return []
    values = [v.strip() for v in text.split(",")]
    if not all(values):
        raise SpecError(f"{option} {text!r}: an empty value (give a comma-separated list, e.g. 1,8,16)")
    if positive_int:
        for v in values:
            if not v.isdigit() or int(v) < 1:
                raise SpecError(f"{option} {text!r}: {v!r} is not a whole number of 1 or more")
    if len(set(values)) != len(values):
        raise SpecError(f"{option} {text!r}: a value given twice")
    return values


def parse_arg(text: str) -> tuple[str, list[str]]:
    """``--arg table-size=1000,10000`` (or ``--arg --table-size=...``) -> ("--table-size", [...])."""
    option, eq, values = text.partition("=")
    option = option.strip()
    if not eq or not option.strip("-"):
        raise SpecError(f"--arg {text!r}: write OPTION=V1,V2 (e.g. --arg table-size=10000,100000)")
    if not option.startswith("-"):
        option = ("-" if len(option) == 1 else "--") + option
    return option, parse_list(f"--arg {option}", values, positive_int=False)


@dataclass(frozen=True)
class Cell:
    """One point of the sweep's grid: clients, scale and the --arg values (None / absent where not swept)."""

    clients: int | None = None
    scale: int | None = None
    args: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        parts = []
        if self.clients is not None:
            parts.append(f"clients={self.clients}")
        if self.scale is not None:
            parts.append(f"scale={self.scale}")
        parts += [f"{o.lstrip('-')}={v}" for o, v in self.args]
        return ",".join(parts) or "all"

    @property
    def words(self) -> str:
        """As the progress line says it: "32 clients, scale 10"."""
        parts = []
        if self.clients is not None:
            parts.append(f"{self.clients} client{'s' if self.clients != 1 else ''}")
        if self.scale is not None:
            parts.append(f"scale {self.scale}")
        parts += [f"{o.lstrip('-')} {v}" for o, v in self.args]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"clients": self.clients, "scale": self.scale, "args": [list(a) for a in self.args]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cell:
        return cls(data.get("clients"), data.get("scale"), tuple((str(o), str(v)) for o, v in data.get("args") or []))


def cells(clients: list[str], scales: list[str], args: list[tuple[str, list[str]]]) -> list[Cell]:
    """Every combination, scale outermost (a scale is a re-initialisation), then clients, then --arg values."""
    combos: list[tuple[tuple[str, str], ...]] = [()]
    for option, values in args:
        combos = [c + ((option, v),) for c in combos for v in values]
    out = []
    scale_values: list[int | None] = [int(s) for s in scales] or [None]
    client_values: list[int | None] = [int(c) for c in clients] or [None]
    for s in scale_values:
        for c in client_values:
            for combo in combos:
                out.append(Cell(c, s, combo))
    return out
