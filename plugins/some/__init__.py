"""SoMe (Xue et al., "SoMe: A Realistic Benchmark for LLM-based Social Media Agents", AAAI 2026):
eight social-media agent tasks, eight tools, over a townsquare run's events or SoMe's own data
(``townsquare eval some``; docs/some.md)."""
