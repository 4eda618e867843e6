"""Writing posts (Zhou et al. §3.1.2 "post", §3.1.4 duplicate check; appendix tables 8-10).
Not a plugin: both social-agent policies post through :func:`write_posts`.

1. Topics: one call asks for ``count`` topics from the whole persona (§3.1.2: "the agent
   first generates post topics based on all persona information"), answered as the JSON list
   declared in ``prompts/actions.toml`` (``[answers.topics]``, at most ``count`` items). "#"
   signs are removed and a topic is cut to 15 words. An answer that does not fit gets one
   repair request (the LLM layer's); then topics from the persona itself (its hobbies, else its
   sentences), chosen with the agent's generator. With ``topics = "interests"`` (the
   policy's setting) each listed topic must be one of the persona's hobbies: the schema's items
   become that closed set, and the model picks among them.
2. Per topic: the persona text retrieved for the topic (``persona.context``) and the knowledge
   it adopts (``persona.knowledge``); the post prompt with knowledge (table 9) or without
   (table 10). The persona is the system message (``post_persona``: "You are NAME. This is who
   you are: ... write as yourself, in the first person"), the task the user's: measured on the
   offline SmolLM2, this keeps posts in the persona's own voice (the post's voice,
   ``benchmarks/groundedness.py``).
3. Length: a post over 500 characters gets one request to shorten it, then is cut at the last
   space before the limit.
4. Duplicates: when the agent's ``memory.short_term`` has a duplicate check, a post whose
   TF-IDF cosine with an earlier post (or one written earlier this round) is greater than T_p
   is regenerated (the request shows the draft and asks for a different post, so a response
   cache cannot hand back the same text), at most ``max_attempts`` generations in all; then
   the topic is skipped and recorded in the memory.
"""

from __future__ import annotations

from typing import Any

import structlog

from townsquare.api import Action, AnswerFormat, Message

from .action_prompts import fill
from ..persona.persona_access import format_knowledge, full_persona_text, knowledge_items, persona_text

log = structlog.get_logger("townsquare.plugins.social_agent.actions.post_writer")

MAX_TOPIC_WORDS = 15


def topics_from_answer(value: Any, count: int) -> list[str]:
    """Up to ``count`` distinct topics from the answer ``{"topics": [...]}``: "#" removed, each
    cut to 15 words; raises ValueError when none is left (the LLM layer repairs once)."""
    items = value.get("topics") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise ValueError("expected {\"topics\": [...]}")
    topics: list[str] = []
    for piece in items:
        if not isinstance(piece, str):
            continue
        words = piece.replace("#", "").replace("**", "").strip().strip("\"'").split()
        topic = " ".join(words[:MAX_TOPIC_WORDS]).rstrip(".,;:")
        if topic and topic.lower() not in (t.lower() for t in topics):
            topics.append(topic)
    if not topics:
        raise ValueError("no topic in the list")
    return topics[:count]


def interests(persona: Any) -> list[str]:
    """The persona's hobbies (comma separated), each cut to 15 words; empty when it has none."""
    hobbies = persona.fields.get("hobbies") if persona.fields else None
    pool = [h.strip() for h in (hobbies if isinstance(hobbies, list) else str(hobbies or "").split(",")) if str(h).strip()]
    return list(dict.fromkeys(" ".join(str(h).split()[:MAX_TOPIC_WORDS]) for h in pool))


def persona_topics(persona: Any, count: int, rng: Any) -> list[str]:
    """Fallback topics from the persona: its hobbies, else its sentences."""
    pool = interests(persona) or [s for s in persona.sentences if s.strip()] or [persona.name]
    picks = rng.permutation(len(pool))[:count] if len(pool) > 1 else [0] * min(count, 1)
    return [" ".join(pool[int(i)].split()[:MAX_TOPIC_WORDS]) for i in picks]


def clean_text(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at the last space when there is one."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else text[:limit]).rstrip()


async def generate_topics(ctx: Any, llm: Any, prompts: dict[str, str], count: int, answer: AnswerFormat,
                          among_interests: bool = False) -> list[str]:
    """``count`` topics for the agent's posts (:func:`topics_from_answer`), or its persona's
    own (:func:`persona_topics`) when the answer does not fit even after a repair.
    ``among_interests``: each topic is one of the persona's hobbies (the list's items become
    that closed set, so a backend that constrains holds the model to it)."""
    prompt = fill(prompts["topics"], topic_count=count, persona=full_persona_text(ctx.agent.persona))
    items = dict(answer.schema["properties"]["topics"])
    choices = interests(ctx.agent.persona) if among_interests else []
    if choices:
        items["items"] = {"type": "string", "enum": choices}
    result = await llm.ask(prompt, answer.with_schema(properties={"topics": {**items, "maxItems": count}}), default=None,
                           max_tokens=40 * count + 20, validate=lambda value: topics_from_answer(value, count))
    if result.fallback:  # the LLM layer recorded the parse_failure and warned
        topics = persona_topics(ctx.agent.persona, count, ctx.rng)
        log.info("topics.fallback", agent=ctx.agent.id, topics=topics)
        return topics
    return result.value


async def _draft(llm: Any, messages: list[Message], prompts: dict[str, str], purpose: str, limit: int, max_tokens: int) -> str:
    text = clean_text(await llm.text(messages, purpose=purpose, max_tokens=max_tokens))
    if len(text) > limit:
        shorten = [*messages, Message("assistant", text), Message("user", fill(prompts["post_shorten"], length=len(text), limit=limit))]
        text = cut(clean_text(await llm.text(shorten, purpose="post.shorten", max_tokens=max_tokens)), limit)
    return text


async def write_post(ctx: Any, llm: Any, prompts: dict[str, str], topic: str, memory: Any, written: list[str],
                     limit: int = 500, max_tokens: int = 400) -> Action | None:
    """One post on ``topic``, or None when every attempt was a duplicate (or empty)."""
    persona = await persona_text(ctx, topic)
    items = await knowledge_items(ctx, topic)
    if items:
        task = fill(prompts["post_with_knowledge"], topic=topic, knowledge=format_knowledge(items))
    else:
        task = fill(prompts["post_without_knowledge"], topic=topic)
    messages = [Message("system", fill(prompts["post_persona"], name=ctx.agent.persona.name, persona=persona)), Message("user", task)]
    check = memory is not None and hasattr(memory, "post_similarity")
    attempts = memory.max_attempts if check else 1
    similarity = 0.0
    for attempt in range(1, attempts + 1):
        text = await _draft(llm, messages, prompts, "post" if attempt == 1 else "post.regenerate", limit, max_tokens)
        if not text:
            continue
        similarity = memory.post_similarity(text, written) if check else 0.0
        if not check or not memory.is_duplicate(similarity):
            detail = {"topic": topic, "knowledge": [getattr(i, "id", "") for i in items], "attempts": attempt,
                      "similarity": float(f"{similarity:.4f}")}
            return Action(ctx.agent.id, "post", text=text, detail=detail)
        log.debug("post.duplicate", agent=ctx.agent.id, topic=topic, similarity=similarity, attempt=attempt)
        messages += [Message("assistant", text), Message("user", prompts["post_regenerate"])]
    if check:
        memory.record_skipped(ctx.round, topic, similarity, attempts)
    log.info("post.skipped", agent=ctx.agent.id, topic=topic, similarity=round(similarity, 4), attempts=attempts)
    return None


async def write_posts(ctx: Any, llm: Any, prompts: dict[str, str], count: int, *, topics_answer: AnswerFormat,
                      limit: int = 500, max_tokens: int = 400, topics_among_interests: bool = False) -> list[Action]:
    """``count`` posts on freshly generated topics (fewer if topics run short or are skipped)."""
    if count <= 0:
        return []
    memory = ctx.agent.components.get("memory.short_term")
    topics = await generate_topics(ctx, llm, prompts, count, topics_answer, topics_among_interests)
    actions: list[Action] = []
    for topic in topics:
        action = await write_post(ctx, llm, prompts, topic, memory, [a.text for a in actions], limit, max_tokens)
        if action is not None:
            actions.append(action)
    return actions
