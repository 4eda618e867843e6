"""Park et al. §4.1: the memory stream (slot ``memory.stream``) and its retrieval scorer (slot
``memory.retrieval``)."""
