"""Park et al. §4.3.2 / §5: dialogue between two agents (initiation, turns, end, memory)."""
