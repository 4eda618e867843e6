"""townsquare.plugins.embedders."""
