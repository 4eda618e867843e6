"""An agent's page: persona, slots, reflections with the memories they rest on, plans, other
memories, follows, actions, posts, interviews, and the interview box."""

from __future__ import annotations

from typing import Any

from .html_parts import Raw, agent_link, cards, esc, join, number, section, table, tag
from .run_reader import Memory, RunReader
from .timeline_page import post_card

#: memory kinds shown as reflections (Park's reflections, RecAgent's insights) and as plans
REFLECTION_KINDS = ("reflection", "insight")
PLAN_KINDS = ("plan",)
MEMORIES_SHOWN = 60
ACTIONS_SHOWN = 40
POSTS_SHOWN = 10
LIST_ITEMS = 12


def persona_view(value: Any, depth: int = 0) -> Raw:
    """Any persona shape (sentences, fields, nested attribute lists) as nested lists."""
    if isinstance(value, dict):
        items = [(k, v) for k, v in value.items() if v not in (None, "", [], {})]
        return tag("dl", join(join([tag("dt", k), tag("dd", persona_view(v, depth + 1))]) for k, v in items), class_="persona")
    if isinstance(value, list):
        shown = value[:LIST_ITEMS]
        more = [tag("li", f"… {len(value) - LIST_ITEMS} more", class_="more")] if len(value) > LIST_ITEMS else []
        return tag("ul", join([*(tag("li", persona_view(v, depth + 1)) for v in shown), *more]))
    return Raw(esc(value))


def _memory_line(memory: Memory) -> Raw:
    importance = f" · importance {number(memory.importance, 1)}" if memory.importance not in (None, "") else ""
    return join([tag("span", f"{memory.created[:16]} · {memory.kind}{importance}", class_="when"), " ", memory.text])


def reflections_view(memories: list[Memory], kinds: tuple[str, ...], empty: str) -> Raw:
    """Each reflection (newest first) with the records it rests on, looked up by id in its slot."""
    by_id = {(m.slot, m.id): m for m in memories}
    chosen = sorted((m for m in memories if m.kind in kinds), key=lambda m: m.created, reverse=True)
    if not chosen:
        return tag("p", empty, class_="empty")
    items = []
    for memory in chosen:
        evidence = [by_id.get((memory.slot, e)) for e in memory.evidence]
        found = [tag("li", _memory_line(e)) for e in evidence if e is not None]
        missing = len(evidence) - len(found)
        note = [tag("li", f"{missing} record(s) no longer in memory", class_="more")] if missing else []
        rests = tag("details", join([tag("summary", f"rests on {len(evidence)} memories"), tag("ul", join([*found, *note]))])) \
            if evidence else Raw("")
        items.append(tag("li", join([_memory_line(memory), rests]), class_="reflection"))
    return tag("ul", join(items), class_="memories")


def reflection_rows(rows: list[dict[str, Any]]) -> Raw:
    """The agent's rows of the ``reflections`` table (every reflector records there), newest first."""
    if not rows:
        return tag("p", "no reflections recorded", class_="empty")
    return table(("round", "by", "kind", "text", "rests on"),
                 [(r["round"], r["source"], r["kind"], r["text"] or "(nothing came of it)", ", ".join(map(str, r["ids"][:8])))
                  for r in rows[:MEMORIES_SHOWN]])


def planner_view(state: Any, checkpoint: int | None) -> Raw:
    """What the agent's planner kept in the newest checkpoint (its plan, however the design
    writes it: Zhou's activity plan as the model answered it, Park's day plan...)."""
    if not state:
        return tag("p", "no plan in the checkpoint" if checkpoint is not None else "no checkpoint yet", class_="empty")
    shown = {k: v for k, v in state.items() if v not in (None, "", [], {})}
    return join([tag("p", f"The planner's state in the checkpoint after round {checkpoint}.", class_="note"), persona_view(shown)])


def agent_page(reader: RunReader, agent_id: str) -> tuple[str, Raw] | None:
    agents = {a["id"]: a for a in reader.agents()}
    agent = agents.get(agent_id)
    if agent is None:
        return None
    names = {a: row["name"] for a, row in agents.items()}
    manifest = reader.manifest()
    slots = [(r.get("slot"), r.get("component"), r.get("plugin")) for r in manifest.get("slot_table", [])
             if r.get("scope") == agent["population"]]
    edges = reader.follow_edges()
    following = sorted(b for a, b in edges if a == agent_id)
    followers = sorted(a for a, b in edges if b == agent_id)
    memories = reader.memories().get(agent_id, [])
    checkpoint = reader.checkpoint_round()
    from_checkpoint = tag("p", f"From the checkpoint after round {checkpoint}." if checkpoint is not None
                          else "No checkpoint yet: memories appear after the first one.", class_="note")
    others = sorted((m for m in memories if m.kind not in REFLECTION_KINDS + PLAN_KINDS), key=lambda m: m.created, reverse=True)
    posts = reader.timeline(POSTS_SHOWN, 0, author=agent_id)[0]
    actions = reader.agent_actions(agent_id, ACTIONS_SHOWN)
    interviews = reader.interviews(agent_id)
    texts = reader.post_texts(sorted({a["target_post"] for a in actions if a["target_post"]}))

    def target(action: dict[str, Any]) -> Any:
        if action["target_agent"]:
            return agent_link(action["target_agent"], names)
        if action["target_post"]:
            return tag("span", texts.get(action["target_post"], action["target_post"])[:80], title=action["target_post"])
        return action["detail"].get("at", "") if isinstance(action["detail"], dict) else ""

    body = join([
        cards([("population", agent["population"]), ("posts", number(agent["posts"])), ("actions", number(agent["actions"])),
               ("followers", number(agent["followers"])), ("follows", number(agent["following"])),
               ("memories", number(len(memories)))]),
        section("Persona", persona_view({"sentences": agent["persona"].get("sentences"), **(agent["persona"].get("fields") or {})}),
                "persona"),
        section("Slots", table(("slot", "component", "plugin"), slots, empty="no slot table in the manifest"), "slots"),
        section("Reflections", join([reflection_rows(reader.reflections(agent_id)), from_checkpoint,
                                     reflections_view(memories, REFLECTION_KINDS, "no reflection records in memory")]), "reflections"),
        section("Plans", join([planner_view(reader.planner_states().get(agent_id), checkpoint),
                               reflections_view(memories, PLAN_KINDS, "no plan records in memory")]), "plans"),
        section("Memories", join([tag("p", f"The {min(len(others), MEMORIES_SHOWN)} newest of {len(others)} other records.", class_="note"),
                                  tag("ul", join(tag("li", _memory_line(m)) for m in others[:MEMORIES_SHOWN]), class_="memories")]),
                "memories"),
        section("Follows", join([
            tag("p", join(["follows: ", join(join([agent_link(a, names), " "]) for a in following) or "nobody"])),
            tag("p", join(["followed by: ", join(join([agent_link(a, names), " "]) for a in followers) or "nobody"])),
            table(("round", "time", "event"), [(f["round"], f["created_at"], join([agent_link(f["follower"], names), f" {f['kind']}s ",
                                                                                  agent_link(f["followee"], names)]))
                                               for f in reader.follow_history(agent_id)], empty="no follow events"),
        ]), "follows"),
        section("Actions", table(("round", "time", "kind", "target", "text", "ok"),
                                 [(a["round"], a["created_at"], a["kind"], target(a), (a["text"] or "")[:160],
                                   "yes" if a["ok"] else f"no: {a['error'] or ''}") for a in actions], empty="no actions yet"),
                "actions"),
        section("Posts", join(post_card(p, names) for p in posts) or tag("p", "no posts", class_="empty"), "posts"),
        section("Interviews", table(("asked", "round", "question", "answer"),
                                    [(i.get("asked_at"), i.get("round"), i.get("question"), i.get("answer")) for i in reversed(interviews)],
                                    empty="not interviewed yet"), "interviews"),
    ])
    return agent["name"], body


def interview_box(agent_id: str) -> Raw:
    """Kept out of the live-updated content, so a question being typed survives an update."""
    return tag("section", join([
        tag("h2", "Interview this agent"),
        tag("p", "The agent answers from its persona and the memories it recalls for the question, at the newest "
                 "checkpoint, on the run's own LLM (as townsquare interview does).", class_="note"),
        Raw(f'<form id="interview" data-agent="{esc(agent_id)}"><input name="question" id="question" autocomplete="off" '
            'placeholder="Ask a question…" required><button type="submit">Ask</button></form>'),
        tag("div", "", id="answer", aria_live="polite"),
    ]), id="interview-box")
