"""townsquare.plugins.social_agent.knowledge."""
