"""Park et al.'s controlled evaluation (§6): interviews, architectures, judges, ranking."""
