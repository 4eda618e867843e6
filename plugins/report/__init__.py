"""The run report behind ``townsquare report RUN`` (the command is registered by
:mod:`townsquare.plugins.report.run_report`).

* :mod:`.tables`: queries over ``events.sqlite`` and the manifest;
* :mod:`.text_metrics`: distinct-1/2 (Li et al., 2016, per token);
* :mod:`.zhou_metrics`, :mod:`.zhou_judges`, :mod:`.pair_similarity`: Zhou et al.'s evaluation
  (ΔBS, C.score / ΔC, Info / Cons / Hum, knowledge adoption, fig. 6; per stage), behind
  ``townsquare eval zhou`` (:mod:`.zhou_command`) and the report's :mod:`.zhou_section`;
* :mod:`.similarity`: persona similarity of engaged vs browsed-only posts (Zhou et al. Table 1);
* :mod:`.figures`: the plots (matplotlib, Agg);
* :mod:`.html`: the self-contained page;
* :mod:`.build`: the sections, put together.
"""
