"""Built-in feed and item recommenders (see DEFAULT_PLUGINS in townsquare.plugin_manager and
docs/architecture.md)."""
