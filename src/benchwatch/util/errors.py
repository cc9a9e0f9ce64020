"""Errors every layer may raise for the command line to print."""

from __future__ import annotations


class StackError(Exception):
    """One clear line naming the fix (the stack, the agent or an engine's server components)."""
