"""benchwatch: live observability for pgbench runs."""

__version__ = "0.1.0"
