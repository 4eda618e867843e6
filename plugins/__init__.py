"""Built-in plugins: agent behaviour and services, in folders by kind (see DEFAULT_PLUGINS in
townsquare.plugin_manager and docs/architecture.md)."""
