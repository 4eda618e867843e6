"""townsquare.plugins.social_agent.memory."""
