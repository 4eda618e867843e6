"""Plugin names that changed, kept working as deprecated aliases.

Every single-component plugin has its component's name (module = component = settings
section). Scenario files and command lines that use a plugin's earlier name still work:
``-p no:OLD``, ``-p OLD``, ``$TOWNSQUARE_DISABLE_PLUGINS``, ``[plugins.OLD]`` and a
population's ``config.OLD`` mean the new name, with one warning line per old name.
"""

from __future__ import annotations

import structlog

log = structlog.get_logger("townsquare.plugins")

#: old plugin name -> current plugin name
DEPRECATED_PLUGIN_NAMES: dict[str, str] = {
    "random_feed": "random",
    "hash_embedder": "hash",
    "embedder_minilm": "minilm",
    "embedder_openai": "openai_embedder",
    "llm_openai": "openai",
    "llm_langchain": "langchain",
    "llm_local": "local",
    "activity_metrics": "activity",
    "persona_dynamic": "dynamic_persona",
    "social_policy": "social_agent",
    "combined_policy": "social_agent_combined",
    "hotpotqa_knowledge": "hotpotqa",
    "synthetic_personas": "synthetic",
    "smallville_personas": "smallville",
    "embedding_item_baseline": "embedding_items",
}

_warned: set[str] = set()


def current_plugin_name(name: str) -> str:
    """``name``, or the plugin's current name if ``name`` is an old one (warned once)."""
    new = DEPRECATED_PLUGIN_NAMES.get(name)
    if new is None:
        return name
    if name not in _warned:
        _warned.add(name)
        log.warning("plugin.renamed", old=name, new=new, hint=f"the plugin {name!r} is now called {new!r}; the old name is deprecated")
    return new


def renamed_sections(sections: dict) -> dict:
    """``{plugin: settings}`` with old plugin names replaced by the current ones."""
    return {current_plugin_name(name): value for name, value in sections.items()}
