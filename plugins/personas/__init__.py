"""townsquare.plugins.personas."""
