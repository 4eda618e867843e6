"""Park et al. §4.3: the agent summary, the day plan and its decomposition, reacting."""
