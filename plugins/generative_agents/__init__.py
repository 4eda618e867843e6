"""Park et al., "Generative Agents: Interactive Simulacra of Human Behavior" (UIST 2023).

Subpackages follow the paper's sections: ``memory`` (§4.1 memory stream and retrieval),
``reflection`` (§4.2), ``policy`` (the agent acting on a social platform), ``prompts`` (every
prompt as data, in our own words).
"""
