"""PostgreSQL's collectors of the benchwatch exporter (``PostgreSQL.collector_modules``): the server log's
checkpoints and events, and the top statements. Written against ``benchwatch.collector`` only: the daemon
loads them, they do not import it."""
