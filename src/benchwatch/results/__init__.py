"""The results database: every run's record (meta, summary, settings, workload, figures, the raw output and the
archived series, compressed) in PostgreSQL, written when a run ends and read by any host that points at it
(docs/results.md). ``schema.sql`` is the schema; ``record`` turns a run directory into rows and back;
``store`` writes and reads them; ``pending`` remembers what is not written yet while the database is down."""
