"""MySQL and MariaDB (flavours of one family): the embedded MariaDB instances (or a server the user has),
mysqld_exporter, InnoDB's flushing pressure."""

from __future__ import annotations

from benchwatch.engines import Engine


class MySQL(Engine):
    name = "mysql"
    title = "MySQL/MariaDB"
    aliases = ("mariadb",)
    scrape_job = "mysql"
    rule_files = ("mysql.yml",)


ENGINE = MySQL()
