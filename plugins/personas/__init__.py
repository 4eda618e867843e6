"""Persona sources that are no paper design: persona_files (inline and JSON Lines)."""
