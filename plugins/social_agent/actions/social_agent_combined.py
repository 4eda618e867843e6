"""An alternative to ``social_agent``: like, reblog and comment decided in ONE call per browsed
post (slot ``policy``, component ``social_agent_combined``).

How it differs from the paper's design (``social_agent``, Zhou et al. §3.1.2, tables 5-7):

* one call per browsed post instead of three: about a third of the decision calls;
* the decisions are no longer independent: the model sees all three at once, so a like can
  pull a reblog along (or a comment can stand in for a like);
* the comment is decided jointly with the other two, in a JSON field, rather than by the
  paper's "no comment" / "Comment content: ..." answer.

The answer must be ``{"like": bool, "reblog": bool, "comment": null | "text"}`` (declared in
``prompts/actions.toml``, ``[answers.decide]``), asked through ``LLMClient.ask`` and validated
(booleans must be JSON booleans; an empty comment or "no comment" means none); where the
backend does not constrain it, a malformed answer gets one repair request, then the default:
no action. When a quota is used up its key is left out of the question and the schema. Everything else
(browsing, plan, quotas, posting) is as in :mod:`.social_step`.

``[plugins.social_agent_combined]``: see :class:`.social_step.SocialAgentConfig`.
"""

from __future__ import annotations

from typing import Any

from townsquare.api import AnswerFormat, PolicySpec, hookimpl, not_text

from .action_prompts import fill
from .social_step import ZHOU_REQUIRES, ZHOU_SLOTS, Decision, SocialAgentBase, SocialAgentConfig, load_prompts_for

_FIELD_TEXT = {
    "like": '"like": true or false (whether you like the post)',
    "reblog": '"reblog": true or false (whether you forward it to your own profile)',
    "comment": '"comment": null if you would not comment, otherwise the text of your comment',
}


def decision_answer(declared: AnswerFormat, kinds: tuple[str, ...]) -> AnswerFormat:
    """The declared decision (``[answers.decide]``) cut to the keys of ``kinds``."""
    properties = declared.schema["properties"]
    return declared.with_schema(properties={k: properties[k] for k in kinds}, required=list(kinds))


def validate_decision(value: Any, kinds: tuple[str, ...]) -> Decision:
    """A :class:`Decision` from a parsed answer; raises ValueError when it does not fit."""
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    for kind in kinds:
        if kind not in value:
            raise ValueError(f"missing key {kind!r}")
    for kind in ("like", "reblog"):
        if kind in kinds and not isinstance(value[kind], bool):
            raise ValueError(f"{kind!r} must be true or false")
    comment = value.get("comment") if "comment" in kinds else None
    if comment is not None and not isinstance(comment, str):
        raise ValueError("'comment' must be null or a string")
    if comment and not_text(comment) == "binary":  # garbage never becomes content
        raise ValueError("'comment' is not readable text")
    comment = (comment or "").strip()
    if comment.lower().rstrip(".!") in ("", "no comment", "none", "null"):
        comment = None
    return Decision(bool(value.get("like")) if "like" in kinds else False,
                    bool(value.get("reblog")) if "reblog" in kinds else False, comment)


class CombinedSocialAgentPolicy(SocialAgentBase):
    """One JSON decision per browsed post."""

    name = "social_agent_combined"
    decision_purposes = {"like": "decide", "reblog": "decide", "comment": "decide"}

    async def decide(self, ctx: Any, llm: Any, post: Any, persona: str, open_kinds: tuple[str, ...]) -> Decision:
        fields = "\n".join(f"- {_FIELD_TEXT[k]}" for k in open_kinds)
        prompt = fill(self.prompts["combined"], post=post.text, persona=persona, fields=fields)
        answer = await llm.ask(
            prompt, decision_answer(self.declared["decide"], open_kinds), default=Decision(),
            validate=lambda value: validate_decision(value, open_kinds),
            max_tokens=self.config.comment_max_tokens + 30, temperature=self.config.decision_temperature,
        )
        evidence = {kind: {"mode": answer.mode} for kind in open_kinds}
        return Decision(answer.value.like, answer.value.reblog, answer.value.comment, evidence)


def build_combined(config: SocialAgentConfig | None, ctx: Any) -> CombinedSocialAgentPolicy:
    config = config or SocialAgentConfig()
    return CombinedSocialAgentPolicy(config, *load_prompts_for(config, ctx))


@hookimpl
def townsquare_register_policies():
    return [
        PolicySpec(
            "social_agent_combined", build_combined, config_model=SocialAgentConfig, needs_llm=True, priority=50,
            uses=ZHOU_SLOTS, requires=ZHOU_REQUIRES,
            description="like, reblog and comment decided in one JSON call per post (fewer calls than social_agent)",
        )
    ]
