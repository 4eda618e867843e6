"""townsquare.plugins.llm."""
