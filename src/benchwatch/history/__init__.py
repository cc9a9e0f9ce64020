"""Runs as a history: workloads, the series of one metric over their runs, change points and what changed.

- :mod:`.workload`: which runs did the same work (the key of a run), and the workloads' names;
- :mod:`.index`: every run's facts and figures read once and cached (listing 10,000 runs stays fast);
- :mod:`.changepoints`: where a series steps, how much, how sure (binary segmentation + a permutation test);
- :mod:`.changed`: what differs between two runs' metadata (versions, settings, argv, host, filesystem);
- :mod:`.report`: ``history``'s answer, its JSON contract, ``--fail-on-regression``;
- :mod:`.events`: annotations (``benchwatch annotate``) and accepted changes, kept in the state directory.
"""
