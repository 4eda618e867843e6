"""Policies that need no LLM: embedding_baseline."""
