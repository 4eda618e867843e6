"""Built-in platforms, where agents act: in_memory, mastodon/, recsys/ (see DEFAULT_PLUGINS in
townsquare.plugin_manager and docs/architecture.md)."""
