"""The RecAgent policy's decisions are data: a stand-in for a person answers each Choice,
and every prompt carries the four parts (filtered profile, memories, context, instruction)."""

from __future__ import annotations

import numpy as np

from helpers import ROOT
from recagent_support import make_ctx, run
from townsquare.api import Agent, BuildContext, MemoryRecord, Persona
from townsquare.platforms.recsys.catalogue import load_movielens
from townsquare.platforms.recsys.platform import RecsysPlatform
from townsquare.plugins.recagent.choices import Choice
from townsquare.plugins.recagent.memory.long_term_memory import LongTermMemory
from townsquare.plugins.recagent.recagent_policy import RecAgentPolicy
from townsquare.recommenders.item_popularity import ItemPopularity

MINI = ROOT / "tests" / "data" / "recsys" / "ml-mini"


class Person:
    """Answers from a list, keeping every choice it was shown."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.seen: list[Choice] = []

    async def decide(self, ctx, choice):
        self.seen.append(choice)
        return self.answers.pop(0)


def setup(answers, fields=None, rules=None):
    platform = RecsysPlatform(load_movielens(MINI), ItemPopularity())
    persona = Persona("Ada", fields=fields or {"age": 30, "career": "pilot", "interests": ["sci-fi movies"], "features": ["Critic"],
                                               "friends": ["Bo"]})
    long_term = LongTermMemory()
    ctx = make_ctx(topics=("heat", "blade"), rules=rules, name="Ada", platform=platform, components={"memory.long_term": long_term})
    ctx.agent.persona = persona
    bo = Agent("u-2", 1, "u", Persona("Bo", fields={"friends": ["Ada"]}), 1.0, np.random.default_rng(1))
    policy = RecAgentPolicy(None, BuildContext(services=ctx.services, seed=0, agent=ctx.agent))
    platform.join(bo)
    for agent in (ctx.agent, bo):
        run(platform.register_account(agent.id, agent.persona.name, ""))
    policy.decider = Person(answers)
    run(long_term.remember(ctx, [MemoryRecord("Ada thought <Heat> was overlong.", importance=7)]))
    return ctx, policy


def test_a_person_drives_a_visit_through_choices():
    ctx, policy = setup(["recommender", "search", "blade runner", "watch 1", "Gorgeous and sad.", "9"])
    actions = run(policy.step(ctx))
    assert [a.kind for a in actions] == ["enter", "recommend", "search", "watch", "leave"]
    assert actions[2].text == "blade runner" and actions[2].post_ids == ("4",)
    assert actions[3].target_post == "4" and actions[3].detail["rating"] == 9 and actions[3].text == "Gorgeous and sad."
    seen = policy.decider.seen
    # the search found one item; once it is watched the page is empty and the visit ends
    assert [c.key for c in seen] == ["activity", "page", "search_query", "page", "feeling", "rating"]
    assert seen[0].options == ("recommender", "social", "nothing") and seen[0].to_dict()["options"] == ["recommender", "social", "nothing"]
    assert seen[1].options[-3:] == ("next page", "search", "leave") and seen[2].options == ()  # free text
    assert seen[4].options == () and seen[5].options == tuple(str(n) for n in range(1, 11))


def test_prompts_have_four_parts_with_the_profile_filtered_per_behaviour():
    ctx, policy = setup(["recommender", "leave"])
    run(policy.step(ctx))
    page = policy.decider.seen[1].prompt
    assert "You are 30 years old." in page and "You enjoy sci-fi movies." in page and "pilot" not in page  # career: social only
    assert "You hold high standards and criticise both movies and the recommender." in page  # the Critic feature, in words
    assert "Ada thought <Heat> was overlong." in page  # a long-term memory read for the page
    assert "(round 0)" in page and "browsing the recommender system" in page  # context
    assert "1. <Heat (1995)> (Action/Crime/Thriller)" in page  # the instruction with the page


def test_chat_with_a_person_on_one_side_and_heard_of_items():
    ctx, policy = setup(["social", "chat", "Have you seen <Blade Runner (1982)>? [END]"])
    [action] = run(policy.step(ctx))
    assert action.kind == "chat" and action.target_agent == "u-2" and action.detail == {"turns": 1, "ended": True, "items": ["4"], "unknown_items": ["4"]}
    assert action.text == "[Ada]: Have you seen <Blade Runner (1982)>?"  # Ada never watched nor heard of it
    # Bo hears of the item when he reads his inbox
    run(ctx.platform.apply(action, 0, "t"))
    assert ctx.platform.inbox("u-2")[0]["items"] == ["4"]


def test_llm_profile_filter_runs_once_per_behaviour_and_is_kept():
    from townsquare.plugins.recagent.recagent_policy import RecAgentPolicyConfig

    ctx, policy = setup(["recommender", "next page", "leave", "recommender", "leave"],
                        rules={"Rewrite the profile": "You fly planes and love sci-fi."})
    policy.config = RecAgentPolicyConfig(profile_filter="llm")
    run(policy.step(ctx))
    run(policy.step(ctx))
    filters = [c for c in ctx.calls if c.purpose == "recagent.profile_filter"]
    assert len(filters) == 2 and set(policy.filtered) == {"Ada|activity", "Ada|recommender"}
    assert "You are Ada. You fly planes and love sci-fi." in policy.decider.seen[1].prompt
    assert policy.get_state()["filtered"]["Ada|recommender"] == "You fly planes and love sci-fi."


def test_items_heard_of_may_be_mentioned():
    ctx, policy = setup(["social", "chat", "Bo told me about <Blade Runner (1982)>. [END]"])
    policy.heard_of["4"] = "u-2"
    [action] = run(policy.step(ctx))
    assert action.detail["items"] == ["4"] and action.detail["unknown_items"] == []
    assert "<Blade Runner (1982)>" in policy.decider.seen[-1].prompt  # offered as a known item


def test_a_movielens_users_history_reaches_profile_memory_and_offers():
    history = [{"id": "2", "title": "Heat (1995)", "rating": 4.0}, {"id": "4", "title": "Blade Runner (1982)", "rating": 5.0}]
    ctx, policy = setup(["recommender", "leave", "social", "chat", "Have you seen <Heat (1995)>? [END]"],
                        fields={"interests": ["action movies"], "history": history, "friends": ["Bo"]},
                        rules={"rate how important": '{"sentence": "Ada loved Blade Runner.", "importance": 8}'})
    from townsquare.plugins.recagent.memory.sensory_memory import SensoryMemory, SensoryMemoryConfig

    sensory = ctx.agent.components["memory.sensory"] = SensoryMemory(SensoryMemoryConfig(buffer=50))
    actions = run(policy.step(ctx))
    page = policy.decider.seen[1].prompt
    # profile: the earlier ratings; memory: one observation per rating went through sensory memory first
    assert "Movies you rated before, most recent last: <Heat (1995)> 4/5, <Blade Runner (1982)> 5/5." in page
    observations = [r.meta["observation"] for r in sensory.store.records]
    assert observations[:2] == ["Ada watched <Heat (1995)> and rated it 4 out of 5.", "Ada watched <Blade Runner (1982)> and rated it 5 out of 5."]
    # the platform offers neither rated movie
    shown = [a for a in actions if a.kind == "recommend"][0].post_ids
    assert "2" not in shown and "4" not in shown
    # a chat may name the movies of the history: they are known, not unknown
    [chat] = run(policy.step(ctx))
    assert chat.detail["items"] == ["2"] and chat.detail["unknown_items"] == []


def test_profile_text_is_grammatical_to_the_agent_and_about_others():
    from townsquare.plugins.recagent.unified_prompt import FEATURE_MEANINGS, render_profile

    persona = Persona("Ada", fields={"age": 31, "gender": "female", "career": "engineer", "traits": ["curious"],
                                     "features": list(FEATURE_MEANINGS)})
    fields = ["age", "gender", "career", "traits", "features"]
    mine = render_profile(persona, fields)
    assert mine.startswith("You are 31 years old and female. You work as an engineer. People describe you as curious. You rate and give")
    # every verb after "you" is in the second person: no "you rates", "you searches", "you holds"...
    import re

    verbs = re.findall(r"\byou (\w+)\b", mine, re.IGNORECASE)
    assert verbs == ["are", "work", "as", "rate", "watch", "search", "have", "hold", "love", "like"], verbs
    theirs = render_profile(persona, fields, "third")
    assert theirs.startswith("31 years old and female; works as an engineer; described as curious; rates and gives feedback")
    assert "you" not in theirs.lower().split()
