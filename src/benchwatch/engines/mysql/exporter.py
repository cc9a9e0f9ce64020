"""prometheus-mysqld-exporter 0.14 for one MySQL/MariaDB target: its argv, trimmed to what rules and panels use.

Credentials come from its --config.my-cnf file (0600, see server.MySQLTarget), never argv or the
environment. Collectors: global status and variables (every InnoDB figure the rules read) and
information_schema.innodb_metrics; the default collectors no rule reads (slave status, InnoDB
compression tables, query response time) are off; the processlist's threads by state are on
(explain's lock waits). What is left is further cut to the series the
rules use by the scrape job's metric_relabel_configs in prometheus/prometheus.yml: about 1,100
series per target scraped, 40 or so stored (bench figures in docs/innodb.md).
"""

from __future__ import annotations

import shutil

COLLECTOR_FLAGS = (
    "--collect.global_status",
    "--collect.global_variables",
    "--collect.info_schema.innodb_metrics",
    # Threads by state (explain's lock: "Waiting for table metadata lock" is a LOCK TABLES), not by
    # user or host: one query of information_schema.processlist per scrape.
    "--collect.info_schema.processlist",
    "--no-collect.info_schema.processlist.processes_by_user",
    "--no-collect.info_schema.processlist.processes_by_host",
    "--no-collect.slave_status",
    "--no-collect.info_schema.innodb_cmp",
    "--no-collect.info_schema.innodb_cmpmem",
    "--no-collect.info_schema.query_response_time",
)


def binary() -> str | None:
    return shutil.which("prometheus-mysqld-exporter") or shutil.which("mysqld_exporter")


def argv(exe: str, config_file: str, listen: str) -> list[str]:
    return [exe, f"--config.my-cnf={config_file}", f"--web.listen-address={listen}", *COLLECTOR_FLAGS]
