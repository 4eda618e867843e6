"""Zhou et al.'s action memory (memory.short_term)."""
