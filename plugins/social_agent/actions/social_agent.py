"""Zhou et al.'s action module (§3.1.2, appendix tables 5-10): slot ``policy``, component
``social_agent``.

The agent browses, then decides on each browsed post with one LLM call per action, as the
paper does:

* like (table 5): labels ``like`` / ``no operation`` -> like or nothing;
* reblog (table 6): labels ``forward`` / ``no operation`` -> reblog or nothing;
* comment (table 7): the answer opens with ``no comment`` or ``Comment content:`` and, after
  the latter, the comment. Only an answer that opens with ``Comment content:`` and has text
  after it is a comment.

Each is declared in ``prompts/actions.toml`` (``[answers.like]``, ``[answers.reblog]``,
``[answers.comment]``) and asked through ``LLMClient.ask``: on a backend that constrains
(the local model scores the labels and openings, a server decodes only them) the answer is
always in the set; elsewhere one repair request, then the declared default (``no operation``,
``no comment``). The decision rule where the backend scores the labels (the offline model):
the label is drawn from the model's probabilities over the label set, renormalised, at
``decision_temperature`` (1: the probabilities as the model gives them; 0: always the most
likely), with the request's seeded generator; each action taken records the probability the
model gave it (``detail["p"]``). Each prompt shows the persona text retrieved with the post as
the query. Posting, the plan's
quotas and the browse window: see :mod:`.social_step`. Calls per browsed post: up to 3 (fewer
once a quota is used up); per post written: topics (one call per posting round), then one per
post plus any shorten/regenerate requests.

``social_agent_routed`` is the same policy with per-decision routing on by default: like and
reblog are taken by the embedding baseline's similarity rule, comments and posts by the LLM
(``similarity_decides`` in :class:`.social_step.SocialAgentConfig`), so the slot table names
the mix.

``[plugins.social_agent]``: see :class:`.social_step.SocialAgentConfig`.
"""

from __future__ import annotations

import re
from typing import Any

from townsquare.api import Message, PolicySpec, hookimpl

from .action_prompts import fill
from .social_step import ZHOU_REQUIRES, ZHOU_SLOTS, Decision, SocialAgentBase, SocialAgentConfig, load_prompts_for

#: the prompt that asks each decision
PROMPT_OF = {"like": "like", "reblog": "forward"}
_OPENING = re.compile(r"^[`*\s]*comment content\s*[:\uff1a]\s*(.+)$", re.I | re.S)


def parse_comment(answer: str) -> str | None:
    """The comment in an answer that opens with "Comment content:" (None when nothing follows)."""
    match = _OPENING.match(answer.strip())
    if match is None:
        return None
    body = match.group(1).strip().strip("`").strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
        body = body[1:-1].strip()
    return body or None


class SocialAgentPolicy(SocialAgentBase):
    """Three independent calls per browsed post: like, reblog, comment."""

    name = "social_agent"

    async def decide(self, ctx: Any, llm: Any, post: Any, persona: str, open_kinds: tuple[str, ...]) -> Decision:
        taken: dict[str, bool] = {}
        evidence: dict[str, dict[str, Any]] = {}
        comment = None
        for kind in ("like", "reblog"):
            if kind in open_kinds:
                declared = self.declared[kind]
                answer = await llm.ask(fill(self.prompts[PROMPT_OF[kind]], post=post.text, persona=persona), declared,
                                       temperature=self.config.decision_temperature)
                taken[kind] = answer.value == declared.labels[0]
                evidence[kind] = _evidence(answer, declared.labels[0])
        if "comment" in open_kinds:
            declared = self.declared["comment"]
            opening = declared.prefixes[-1]  # "Comment content:"
            messages = (Message("system", fill(self.prompts["comment_persona"], name=ctx.agent.persona.name, persona=persona)),
                        Message("user", fill(self.prompts["comment"], post=post.text)))
            # a comment answers the post, it does not repeat it (avoid: a backend that decodes itself keeps off its words)
            answer = await llm.ask(messages, declared, max_tokens=self.config.comment_max_tokens,
                                   temperature=self.config.decision_temperature, avoid=post.text)
            comment = parse_comment(answer.text) if answer.value == opening else None
            evidence["comment"] = _evidence(answer, opening)
        return Decision(taken.get("like", False), taken.get("reblog", False), comment, evidence)


def _evidence(answer: Any, acting: str) -> dict[str, Any]:
    """What an action's detail records of its decision: the mode and, where the backend scored
    the labels, the probability of acting."""
    evidence: dict[str, Any] = {"mode": answer.mode}
    if answer.probabilities and acting in answer.probabilities:
        evidence["p"] = answer.probabilities[acting]
    return evidence


class RoutedSocialAgentPolicy(SocialAgentPolicy):
    """:class:`SocialAgentPolicy` with like and reblog routed to the similarity rule."""

    name = "social_agent_routed"
    default_routed = ("like", "reblog")


def build_social_agent(config: SocialAgentConfig | None, ctx: Any) -> SocialAgentPolicy:
    config = config or SocialAgentConfig()
    return SocialAgentPolicy(config, *load_prompts_for(config, ctx))


def build_routed_social_agent(config: SocialAgentConfig | None, ctx: Any) -> RoutedSocialAgentPolicy:
    config = config or SocialAgentConfig()
    return RoutedSocialAgentPolicy(config, *load_prompts_for(config, ctx))


@hookimpl
def townsquare_register_policies():
    return [
        PolicySpec(
            "social_agent", build_social_agent, config_model=SocialAgentConfig, priority=100, needs_llm=True,
            uses=ZHOU_SLOTS, requires=ZHOU_REQUIRES,
            description="Zhou et al.: browse, then one LLM decision per action (like, reblog, comment); planned posts",
        ),
        PolicySpec(
            "social_agent_routed", build_routed_social_agent, config_model=SocialAgentConfig, priority=90, needs_llm=True,
            uses=ZHOU_SLOTS, requires=ZHOU_REQUIRES,
            description="Zhou et al.'s agent, like and reblog by persona-post similarity (embedding baseline rule), comments and posts by the LLM",
        ),
    ]
