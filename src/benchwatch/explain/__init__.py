"""Why did TPS dip: dip detection on a run's TPS curve and attribution of each dip to a cause.

``dips`` finds the dips (pure, on (ms, tps) samples); ``causes`` turns the run's
raw series (query.series.Series) into signals and scores the candidates of
each dip; ``report`` puts both together for ``benchwatch explain``, the
snapshot and the exporter. Method and limits: docs/explain.md.
"""
