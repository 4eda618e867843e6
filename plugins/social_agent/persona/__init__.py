"""townsquare.plugins.social_agent.persona."""
