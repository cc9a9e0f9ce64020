"""Figures presented: the toolkit the summaries, tables and comparisons of every tool and engine are built with."""
