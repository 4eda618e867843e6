"""Zhou et al.'s action module: the policies (social_agent, social_agent_combined), one step
(social_step), the action prompts and the post writer."""
