"""RecAgent (Wang et al., "User Behavior Simulation with Large Language Model based Agents").

Packages follow the paper's sections: ``memory/`` holds the memory module (sensory, short-term
and long-term memory, and reflection over long-term memory); ``recagent_profiles`` the profile
module; ``recagent_policy`` the action module with its unified four-part prompt. The platform
the agents act on is ``townsquare.platforms.recsys``.
"""
