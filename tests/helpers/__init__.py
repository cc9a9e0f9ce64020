"""Helpers shared by benchwatch tests (real Prometheus processes, queries)."""
