"""The dashboards, composed: every run dashboard (one per load generator and the engine it drives), Host I/O,
the Experiment and History dashboards, and each engine's own; dashboards/generate.py writes them as JSON.
Built from benchwatch.grafana's toolkit (panels, dashboard-level builders, recorded rules' expressions)."""
