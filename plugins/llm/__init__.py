"""The LLM layer: providers (openai, langchain, local with base_model_prompts), middleware
(llm_cache, llm_budget, llm_retry, llm_concurrency) and the replay/estimate commands (llm_commands)."""
