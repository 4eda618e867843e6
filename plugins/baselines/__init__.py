"""townsquare.plugins.baselines."""
