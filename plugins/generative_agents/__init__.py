"""Park et al.'s generative agents (UIST 2023): memory stream, retrieval, reflection, planning, dialogue."""
