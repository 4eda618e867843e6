"""The town agent's parts: the recursive location choice stays among known places,
Park §7.1's measures on a hand-built log, and the engine refusing a social action in the town."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from types import SimpleNamespace

import pytest

from ga_support import RuleLLM
from helpers import ROOT
from townsquare.api import Action, ComponentError, MemoryRecord, Persona, PolicySpec, RoundView, hookimpl
from townsquare.plugins.generative_agents.planning.location import choose_location
from townsquare.plugins.generative_agents.policy.town_agent import REQUIRED, seed_sentences
from townsquare.plugins.generative_agents.prompt_files import load_prompts
from townsquare.plugins.generative_agents.town_metrics import (
    TopicConfig, TownMetrics, TownMetricsConfig, acquaintances, at_place, density, diffusion_share,
)

PROMPTS = load_prompts("town", REQUIRED)
KNOWN = {"the Ville": {
    "Hobbs Cafe": {"cafe": ["behind the cafe counter", "piano"]},
    "Isabella Rodriguez's apartment": {"main room": ["bed", "desk"], "bathroom": ["shower"]},
}}
HOME = "the Ville:Isabella Rodriguez's apartment:main room"


def choose(llm, activity="brew coffee for customers", current=HOME, known=KNOWN):
    return asyncio.run(choose_location(llm, PROMPTS, known, name="Isabella Rodriguez", activity=activity, current=current,
                                       home=HOME))


def test_location_is_chosen_sector_then_arena_then_object_among_known_places():
    llm = RuleLLM([(r"Where should", "Hobbs Cafe"), (r"Which object", "behind the cafe counter")])
    place = choose(llm)
    assert (place.world, place.sector, place.arena, place.object) == ("the Ville", "Hobbs Cafe", "cafe", "behind the cafe counter")
    assert place.arena_address == "the Ville:Hobbs Cafe:cafe"
    # the cafe has one arena: no call for it; the sector prompt lists only known sectors
    assert llm.purposes() == ["town.sector", "town.object"]
    sector_prompt = llm.calls[0][1]
    assert "Places Isabella Rodriguez knows in the Ville: Hobbs Cafe, Isabella Rodriguez's apartment." in sector_prompt
    assert "Oak Hill College" not in sector_prompt


def test_an_unknown_place_is_never_chosen():
    # the model names a place the agent has never seen: the labelled choice falls back to staying
    llm = RuleLLM([(r"Where should", "Oak Hill College"), (r"Which area", "library"), (r"Which object", "library table")])
    place = choose(llm, activity="take a shower")
    assert place.sector == "Isabella Rodriguez's apartment" and place.arena == "main room"  # where she is
    assert place.object in KNOWN["the Ville"]["Isabella Rodriguez's apartment"]["main room"]
    llm = RuleLLM([(r"Where should", "Isabella Rodriguez's apartment"), (r"Which area", "bathroom")])
    assert choose(llm, activity="take a shower").arena_address == "the Ville:Isabella Rodriguez's apartment:bathroom"
    assert choose(RuleLLM(), known={}) is None


def test_seed_sentences_split_the_persona_description():
    persona = Persona("Ann", ["Ann is kind. She runs the bakery.", "Ann goes to bed at 10pm."])
    assert seed_sentences(persona) == ["Ann is kind.", "She runs the bakery.", "Ann goes to bed at 10pm."]


# --------------------------------------------------------------------------- measures

#: a hand-built log of three agents' memories: Ann hosts, Ben hears in a chat, Cy does not
LOG = {
    "a": [MemoryRecord("Ann is planning a Valentine's Day party at Hobbs Cafe.", meta={"seed": True}),
          MemoryRecord("Ann is friends with Ben Ode.", meta={"seed": True}),
          MemoryRecord("Conversation between Ann Lee and Ben Ode about coffee: Come to my party!", kind="chat")],
    "b": [MemoryRecord("Conversation between Ben Ode and Ann Lee about coffee: Come to my party!", kind="chat"),
          MemoryRecord("Cy Tan is at Hobbs Cafe, cafe", kind="observation")],
    "c": [MemoryRecord("Ben Ode is at Hobbs Cafe, cafe", kind="observation"), MemoryRecord("the piano is idle")],
}
NAMES = {"a": "Ann Lee", "b": "Ben Ode", "c": "Cy Tan"}


def texts(log):
    return {a: [r.text for r in records] for a, records in log.items()}


def test_diffusion_and_density_on_a_hand_built_log():
    topic = re.compile("valentine|party", re.I)
    assert diffusion_share(texts(LOG), topic) == pytest.approx(2 / 3)
    known = acquaintances(texts(LOG), NAMES)
    assert known == {"a": {"b"}, "b": {"a", "c"}, "c": {"b"}}
    # edges need both directions: a-b and b-c -> 2|E| / (|V|(|V|-1)) = 4 / 6
    assert density(known) == pytest.approx(4 / 6)
    assert density({"a": {"b"}, "b": set(), "c": set()}) == 0.0
    assert density({"a": set()}) == 0.0
    assert at_place({"a": "the Ville:Hobbs Cafe:cafe", "b": "the Ville:home:room", "c": None}, "hobbs cafe") == {"a"}


class Agent(SimpleNamespace):
    pass


def make_agent(agent_id):
    memory = SimpleNamespace(since=lambda when, records=LOG[agent_id]: list(records), recall=None, remember=None)
    return Agent(id=agent_id, persona=Persona(NAMES[agent_id]), components={"memory.stream": memory})


def test_the_metric_reads_memories_and_counts_invited_guests_in_the_window():
    positions = {"a": "the Ville:Hobbs Cafe:cafe", "b": "the Ville:Hobbs Cafe:cafe", "c": "the Ville:Oak Hill College:library"}
    doing = {"a": "hosting the party", "b": "eating dinner", "c": "reading"}
    platform = SimpleNamespace(where=positions.get, doing=doing.get)
    party = TopicConfig(pattern="valentine|party", place="Hobbs Cafe", start=datetime(2023, 2, 14, 17), end=datetime(2023, 2, 14, 19))
    metric = TownMetrics(TownMetricsConfig(topics={"party": party}))
    agents = [make_agent(a) for a in "abc"]

    def measure(now):
        return asyncio.run(metric.measure(RoundView(round=0, now=now, platform=platform, agents=agents, actions=[])))

    before = measure("2023-02-14T16:00:00")
    # Ann's seed and Ben's conversation mention the party; Cy only saw people at the cafe: not heard
    assert before["party.heard"] == 2.0 and before["party.share"] == pytest.approx(2 / 3)
    assert (before["party.heard.a"], before["party.heard.b"], before["party.heard.c"]) == (1.0, 1.0, 0.0)
    assert before["party.guests"] == 1.0  # Ben: Ann hosts (her seed mentions it)
    # observations ("Cy Tan is at Hobbs Cafe") are not acquaintance: only a-b (seed and chat)
    assert before["density"] == pytest.approx(2 / 6)
    assert (before["party.at_place"], before["party.present_guests"], before["party.attended_guests"]) == (0.0, 0.0, 0.0)
    during = measure("2023-02-14T17:30:00")
    # Ann and Ben are there; Ben is a guest present, but dining, not there for the party
    assert (during["party.at_place"], during["party.present_guests"], during["party.attended_guests"]) == (2.0, 1.0, 0.0)
    positions.update(c="the Ville:Hobbs Cafe:cafe", a="the Ville:home:room")
    doing["b"] = "dancing at the Valentine's party"
    later = measure("2023-02-14T18:50:00")
    # Cy comes but never heard of it: not a guest; Ben now came for the party
    assert (later["party.at_place"], later["party.present_guests"], later["party.attended_guests"]) == (2.0, 1.0, 1.0)
    assert measure("2023-02-14T19:00:00")["party.at_place"] == 0.0  # the window is [start, end)
    restored = TownMetrics(metric.config)
    restored.set_state(json.loads(json.dumps(metric.get_state())))
    assert restored.get_state() == {"topics": {"party": {"present": ["b"], "attended": ["b"]}}}


def test_hosts_and_staff_are_never_guests_and_topics_are_checked():
    positions = {a: "the Ville:Hobbs Cafe:cafe" for a in "abc"}
    platform = SimpleNamespace(where=positions.get, doing=lambda a: "at the party")
    party = TopicConfig(pattern="party", hosts=["Cy Tan"], staff=["Ben Ode"], place="Hobbs Cafe",
                        start=datetime(2023, 2, 14, 17), end=datetime(2023, 2, 14, 19))
    metric = TownMetrics(TownMetricsConfig(topics={"party": party, "sam": TopicConfig(pattern="mayor")}))
    view = RoundView(round=0, now="2023-02-14T17:00:00", platform=platform, agents=[make_agent(a) for a in "abc"], actions=[])
    values = asyncio.run(metric.measure(view))
    # Ann and Ben heard; Cy is named host, Ben is staff: Ann is the only guest
    assert (values["party.guests"], values["party.attended_guests"], values["sam.heard"]) == (1.0, 1.0, 0.0)
    assert "sam.guests" not in values  # a topic without a place has no attendance
    with pytest.raises(ValueError, match="not a regular expression"):
        TopicConfig(pattern="(party")
    with pytest.raises(ValueError, match="end .* is not after start"):
        TopicConfig(pattern="x", start=datetime(2023, 2, 14, 19), end=datetime(2023, 2, 14, 17))
    with pytest.raises(ValueError, match="topic name"):
        TownMetricsConfig(topics={"the party": party})


# --------------------------------------------------------------------------- the engine refuses

class Poster:
    async def step(self, ctx):
        return [Action(ctx.agent.id, "post", text="hello")]

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


class PosterPlugin:
    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("poster", lambda config, ctx: Poster())]


def test_a_social_action_in_the_town_is_refused_naming_kind_and_platform(make_plugins, write_scenario, run_scenario):
    mini = ROOT / "tests" / "data" / "smallville" / "base_mini"
    path = write_scenario(f'''name = "t"
seed = 1
rounds = 1
[activity]
model = "always"
[platform]
name = "town"
path = "{mini}"
[[populations]]
name = "ville"
count = 1
slots = {{ policy = "poster" }}
personas = {{ name = "smallville", path = "{mini}" }}
''')
    with pytest.raises(ComponentError, match=r"action kind 'post' is not accepted by platform 'town' \(accepts: learn, move, talk, use, wait\)"):
        run_scenario(path, plugins=make_plugins(PosterPlugin(), enable=["townsquare.testing.scripted"]))
