"""Helpers that several plugins, commands and front ends share, outside the plugin API.

The plugin API (:mod:`townsquare.api`) declares: it re-exports the kernel's names and protocols
and holds no helper. What designs, commands and front ends share beyond it lives here, one
module per job, each used by more than one package (``tools/import_graph.py --check`` holds
both rules): reading files a user points a run at (:mod:`.files`, :mod:`.secret_files`,
:mod:`.data_paths`), prompts kept as TOML (:mod:`.prompt_files`), MovieLens and item
catalogues (:mod:`.movielens`, :mod:`.items`), statistics over seeds (:mod:`.stats`), an
OpenAI-compatible endpoint's settings (:mod:`.endpoint`), retries' waits (:mod:`.backoff`), a
run's cacheable prompt share (:mod:`.cache_share`), memory and follow-graph exports
(:mod:`.memory_export`, :mod:`.follow_graph`), persona lists reused for larger populations
(:mod:`.persona_pool`), the persona-post similarity rule (:mod:`.similarity_rule`), a run's
``llm_calls`` summed (:mod:`.llm_calls`), English function words (:mod:`.function_words`), the
designs' typical answers for the estimate (:mod:`.answer_priors`) and structlog's set-up
(:mod:`.logs`). :mod:`.validation` is a hook's contract rather than a helper:
the records a ``townsquare validate`` dimension plugin measures and returns.
"""
