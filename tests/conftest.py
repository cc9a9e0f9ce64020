"""benchwatch is imported as installed (scripts/ensure-venv: an editable install of this checkout)."""
