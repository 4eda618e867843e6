"""townsquare.plugins.social_agent.actions."""
