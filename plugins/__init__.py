"""Built-in plugins of townsquare (see DEFAULT_PLUGINS in townsquare.plugins)."""
