"""Zhou et al.'s action module (§3.1.2, appendix tables 5-10): slot ``policy``, component
``social_agent``.

The agent browses, then decides on each browsed post with one LLM call per action, as the
paper does:

* like (table 5): labels ``like`` / ``no operation`` -> like or nothing;
* reblog (table 6): labels ``forward`` / ``no operation`` -> reblog or nothing;
* comment (table 7): the answer is ``no comment`` or ``Comment content: <text>``. It is read
  strictly: only an answer that starts with ``Comment content:`` and has text after it is a
  comment; anything else, ``no comment`` included, is no comment (no repair request: the
  paper's prompt allows free text, and declining is the safe default).

Like and reblog go through ``LLMClient.choose`` (one repair request, then ``no operation``).
Each prompt shows the persona text retrieved with the post as the query. Posting, the plan's
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

from townsquare.api import PolicySpec, hookimpl

from .action_prompts import fill
from .social_step import ZHOU_REQUIRES, ZHOU_SLOTS, Decision, SocialAgentBase, SocialAgentConfig, load_prompts_for

#: label sets of the two label decisions: (act, pass)
LIKE_LABELS = ("like", "no operation")
FORWARD_LABELS = ("forward", "no operation")
NO_COMMENT = "no comment"
#: The two ways a comment answer may start (Zhou table 7).
COMMENT_PREFIXES = (NO_COMMENT, "Comment content:")
_COMMENT = re.compile(r"^comment content\s*[:\uff1a]\s*(.+)$", re.I | re.S)


def parse_comment(answer: str) -> str | None:
    """The comment in an answer to the comment prompt, or None for "no comment" and for
    anything that does not start with "Comment content:"."""
    text = answer.strip().strip("`").strip()
    match = _COMMENT.match(text)
    if match is None:
        return None
    body = match.group(1).strip()
    if len(body) >= 2 and body[0] == body[-1] and body[0] in "\"'":
        body = body[1:-1].strip()
    return body or None


class SocialAgentPolicy(SocialAgentBase):
    """Three independent calls per browsed post: like, reblog, comment."""

    name = "social_agent"

    async def decide(self, ctx: Any, llm: Any, post: Any, persona: str, open_kinds: tuple[str, ...]) -> Decision:
        like = reblog = False
        comment = None
        if "like" in open_kinds:
            answer = await llm.choose(fill(self.prompts["like"], post=post.text, persona=persona), LIKE_LABELS,
                                      purpose="like", default=LIKE_LABELS[1])
            like = answer == LIKE_LABELS[0]
        if "reblog" in open_kinds:
            answer = await llm.choose(fill(self.prompts["forward"], post=post.text, persona=persona), FORWARD_LABELS,
                                      purpose="reblog", default=FORWARD_LABELS[1])
            reblog = answer == FORWARD_LABELS[0]
        if "comment" in open_kinds:
            answer = await llm.text(fill(self.prompts["comment"], post=post.text, persona=persona), purpose="comment",
                                    max_tokens=self.config.comment_max_tokens, answer_prefixes=COMMENT_PREFIXES)
            comment = parse_comment(answer)
        return Decision(like, reblog, comment)


class RoutedSocialAgentPolicy(SocialAgentPolicy):
    """:class:`SocialAgentPolicy` with like and reblog routed to the similarity rule."""

    name = "social_agent_routed"
    default_routed = ("like", "reblog")


def build_social_agent(config: SocialAgentConfig | None, ctx: Any) -> SocialAgentPolicy:
    config = config or SocialAgentConfig()
    return SocialAgentPolicy(config, load_prompts_for(config, ctx))


def build_routed_social_agent(config: SocialAgentConfig | None, ctx: Any) -> RoutedSocialAgentPolicy:
    config = config or SocialAgentConfig()
    return RoutedSocialAgentPolicy(config, load_prompts_for(config, ctx))


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
