"""Zhou et al.'s personas: the schema and sources (synthetic, personachat_personas,
enrichment), and the persona.context components (dynamic_persona, full_persona)."""
