"""townsquare.plugins.social_agent.reflection."""
