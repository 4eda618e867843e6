"""Zhou et al.'s follow reflection (reflector)."""
