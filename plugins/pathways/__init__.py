"""``townsquare eval pathways STUDY --llm MODEL``: where a real model stands on the dispositions a
study's finding depends on.

A finding proven with the oracle test model shows that a pathway exists; how large it comes out
depends on how the reader weighs what it sees, and those weights are the oracle's dispositions
(``llm.news_importance``, ``llm.relay_fidelity``, ``llm.conformity_weight``, ``llm.follow_page``;
docs/oracle.md). This command asks a model the prompts at each decision point of a study's
pathway (party, cocoon, conformity; recorded from an oracle run and shipped in ``prompts/``)
and measures its dispositions on the same scales (:mod:`.dispositions`), with intervals; with
``--sweep`` it reads what an oracle sweep over those dispositions gives there
(:mod:`.sweep_map`). Run on the oracle itself, it recovers the settings it was given.
"""
