"""townsquare.plugins.social_agent.planning."""
