"""Zhou et al.'s knowledge boundary (persona.knowledge: knowledge_boundary, unbounded_knowledge,
no_knowledge) and the HotpotQA knowledge source (hotpotqa)."""
