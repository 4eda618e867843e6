"""Matching environment names (Samuel et al., appendix A.1): the selector's answer and the
``--environment`` option name environments of the pool, case and punctuation aside."""

from __future__ import annotations

import re
from typing import Sequence


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def match_environments(items: Sequence[str], pool: Sequence[str]) -> list[str]:
    """The environments of ``pool`` that ``items`` name (case and punctuation aside), in the
    order named, each once; names outside the pool are dropped (the pool is the space E of §3.1)."""
    by_norm = {_norm(name): name for name in pool}
    chosen: list[str] = []
    for item in items:
        name = by_norm.get(_norm(item))
        if name is not None and name not in chosen:
            chosen.append(name)
    return chosen
