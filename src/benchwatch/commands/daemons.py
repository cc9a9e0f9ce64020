"""``benchwatch exporter`` and ``benchwatch supervise``: the daemons ``up`` starts, each parsing its own arguments."""

from __future__ import annotations

from benchwatch.commands import REGISTRY


def _exporter(argv: list[str]) -> int:
    from benchwatch.exporter import server

    return server.main(argv)


def _supervise(argv: list[str]) -> int:
    from benchwatch.stack import supervisor

    return supervisor.main(argv)


# Listed in the help; the daemon parses its own arguments (collector flags included).
REGISTRY.daemon("exporter", "the exporter daemon (started by up; benchwatch exporter --help)", _exporter)
REGISTRY.daemon("supervise", "the supervisor that restarts dead components (started by up)", _supervise)
