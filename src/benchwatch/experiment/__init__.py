"""Experiments: ``benchwatch sweep`` runs variants x cells x repeats as ordinary runs; ``report`` reads them.

``spec``: what the user typed (variants, cells) read and checked before anything runs; ``plan``: the
experiment's directory (plan.json, the append-only state.jsonl) and the order of its runs; ``runner``:
the loop, with the server's settings applied and restored around each variant; ``figures``: one run's
TPS and latency from its saved record; ``stats``: medians, intervals, Welch's t, Holm; ``report``: the
report's JSON model.
"""
