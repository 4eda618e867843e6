"""Run-health monitors: cheap metrics, on by default, that warn while a run goes on.

Each monitor is a metric plugin (``-p no:NAME`` turns it off; ``[plugins.NAME] threshold``
moves its threshold). Each stores ``NAME.value`` and ``NAME.alert`` (0 or 1) every round, logs
one ``monitor.NAME`` warning line the first time its value crosses its threshold, and the run
report shows a "Run health" section from those rows. The thresholds are our choices (no paper
gives them): defaults that flag a clearly degenerate run, not a verdict.

- :mod:`.repetition`: agents repeating their own posts;
- :mod:`.homogenisation`: posts of different agents converging;
- :mod:`.silent_agents`: present agents that have not acted for a while;
- :mod:`.persona_drift`: agents' recent posts moving away from their persona;
- :mod:`.parse_failures`: the share of LLM answers that could not be parsed.
"""
