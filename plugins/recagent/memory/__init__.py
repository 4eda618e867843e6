"""RecAgent's memory module (Wang et al., "Memory Module"): three tiers that implement the
kernel's :class:`townsquare.api.Memory` protocol, one plugin each, so ``-p no:NAME`` gives the
paper's variants: ``sensory_memory`` (slot ``memory.sensory``), ``short_term_memory``
(``memory.short_term``, "w/o short" when disabled), ``long_term_memory`` (``memory.long_term``,
"w/o long") and ``recagent_reflection`` (slot ``reflector``, "w/o reflection").
"""
