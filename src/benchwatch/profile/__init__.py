"""CPU profiles of a run (``run --profile``, ``attach --profile``, ``sweep --profile``; docs/profiles.md).

``perf record`` samples every CPU of the bench host while the run runs (``recorder.py``); once it
ended, ``perf script`` is folded into stacks per one-second slice, each sample put in its group
(database, load generator, other) and, for the database, its process kind (``fold.py``), kept in
the run directory as ``profile/slices.tsv.gz`` and ``profile/profile.json``; any window of the run
is folded again from those (``window.py``): the whole run, a dip against the rest, two runs.
"""
