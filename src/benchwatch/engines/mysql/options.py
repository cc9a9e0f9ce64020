"""Its options of every command acting on a stack: flags, BENCHWATCH_* variables and stack.json keys are contracts."""

from __future__ import annotations

from benchwatch.engines import StackOption

DEFAULTS_FILE = "mysql_defaults_file"   # an existing server's [client] file instead of the embedded ones
INSTANCES = "mariadb_instances"         # embedded instances side by side (1: target "local")

STACK_OPTIONS = (
    StackOption("--mysql-defaults-file", DEFAULTS_FILE, path=True, selects_engine=True,
                help="watch this existing MySQL/MariaDB, whose [client] section (a my.cnf-style file) says how to "
                     "connect; implies --engine mariadb"),
    StackOption("--instances", INSTANCES, type=int, default=1, own_engine_only=True,
                help="with --engine mariadb: embedded MariaDB instances to run side by side, targets mariadb-1..N, "
                     "each with its own port, data directory and mysqld_exporter (default 1: target local)"),
)
