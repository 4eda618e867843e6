"""The town platform: the environment tree, spatial memory, perception sentences,
object states, the action vocabulary, and the seed-file loader (a small fixture in the
original layout; the real bases when ../shared/data is there)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from helpers import ROOT, SHARED_DATA
from townsquare.api import Action, Persona, UsageError, platform_actions
from townsquare.platforms.town import TOWN_ACTIONS, TownPlatform, world
from townsquare.platforms.town.seed_files import persona_from_scratch, read_base
from townsquare.platforms.town.smallville import SmallvillePersonasConfig, load_personas

MINI = ROOT / "tests" / "data" / "smallville" / "base_mini"
CAFE = "the Ville:Hobbs Cafe:cafe"
ISA_HOME = "the Ville:Isabella Rodriguez's apartment:main room"
LIBRARY = "the Ville:Oak Hill College:library"
KLAUS_ROOM = "the Ville:Dorm for Oak Hill College:Klaus Mueller's room"


def run(coro):
    return asyncio.run(coro)


def agent(agent_id, name, **fields):
    return SimpleNamespace(id=agent_id, persona=Persona(name, [], fields))


def town():
    base = read_base(MINI)
    platform = TownPlatform(world.World(base.town()), base.spatial, base.homes())
    for i, name in enumerate(base.names):
        platform.join(agent(f"t-{i}", name))
        run(platform.register_account(f"t-{i}", name, ""))
    return platform  # t-0 Isabella, t-1 Maria, t-2 Klaus


def apply(platform, agent_id, kind, round=0, **fields):
    return run(platform.apply(Action(agent_id, kind, **fields), round, "2023-02-13T08:00:00"))


def test_the_town_is_the_union_of_the_seed_trees_and_agents_start_at_home():
    platform = town()
    assert set(world.arenas(platform.world.tree)) == {CAFE, ISA_HOME, LIBRARY, KLAUS_ROOM, "the Ville:Dorm for Oak Hill College:Maria Lopez's room",
                                                       "the Ville:Dorm for Oak Hill College:common room"}
    assert platform.where("t-0") == ISA_HOME and platform.where("t-2") == KLAUS_ROOM
    assert set(world.arenas(platform.spatial_memory("t-0"))) == {CAFE, ISA_HOME}  # Isabella has never been to the college


def test_perception_renders_people_and_object_states_as_short_sentences():
    platform = town()
    assert apply(platform, "t-0", "move", detail={"to": CAFE, "activity": "opening the cafe"}).ok
    assert apply(platform, "t-0", "use", detail={"object": "behind the cafe counter", "state": "being used to brew coffee"}).ok
    assert apply(platform, "t-1", "move", detail={"to": CAFE, "activity": "having a coffee"}).ok
    assert platform.perceive("t-1") == [
        "Isabella Rodriguez is at Hobbs Cafe, cafe, opening the cafe",
        "the cafe customer seating is idle (Hobbs Cafe, cafe)",
        "the behind the cafe counter is being used to brew coffee (Hobbs Cafe, cafe)",
        "the piano is idle (Hobbs Cafe, cafe)",
    ]
    assert platform.perceive("t-2") == ["the bed is idle (Dorm for Oak Hill College, Klaus Mueller's room)",
                                        "the desk is idle (Dorm for Oak Hill College, Klaus Mueller's room)"]
    platform.att_bandwidth = 2
    assert len(platform.perceive("t-1")) == 2 and platform.perceive("t-1")[0].startswith("Isabella Rodriguez is at")


def test_object_states_change_with_use_and_go_back_to_idle_when_left():
    platform = town()
    counter = f"{CAFE}:behind the cafe counter"
    apply(platform, "t-0", "move", detail={"to": CAFE})
    apply(platform, "t-0", "use", detail={"object": f"{CAFE}:behind the cafe counter", "state": "being used to brew coffee"})
    assert platform.world.state(counter) == "being used to brew coffee"
    apply(platform, "t-0", "use", detail={"object": "piano", "state": "being played"})
    assert platform.world.state(counter) == "idle" and platform.world.state(f"{CAFE}:piano") == "being played"
    apply(platform, "t-0", "move", detail={"to": ISA_HOME})
    assert platform.world.state(f"{CAFE}:piano") == "idle"
    refused = apply(platform, "t-0", "use", detail={"object": "piano"})  # not in her arena now
    assert not refused.ok and "no object 'piano'" in refused.error


def test_moves_are_limited_to_known_arenas_and_visiting_teaches_the_arena():
    platform = town()
    refused = apply(platform, "t-0", "move", detail={"to": LIBRARY})
    assert not refused.ok and "does not know" in refused.error
    assert not apply(platform, "t-0", "move", detail={"to": "the Ville:Nowhere:void"}).ok
    platform.known["t-0"]["the Ville"]["Oak Hill College"] = {"library": []}  # heard of it, never been
    assert apply(platform, "t-0", "move", detail={"to": LIBRARY}).ok
    assert world.objects_of(platform.spatial_memory("t-0"), LIBRARY) == ["library table"]  # learned on arrival


def test_what_an_agent_sees_it_learns_its_whole_sector():
    platform = town()
    # Klaus's seed knows his room and the common room; standing in his dorm he sees Maria's room too
    assert "the Ville:Dorm for Oak Hill College:Maria Lopez's room" not in world.arenas(read_base(MINI).spatial["Klaus Mueller"])
    assert set(world.arenas(platform.spatial_memory("t-2"))) == {
        KLAUS_ROOM, "the Ville:Dorm for Oak Hill College:common room", "the Ville:Dorm for Oak Hill College:Maria Lopez's room",
        LIBRARY, CAFE}
    assert world.objects_of(platform.spatial_memory("t-2"), "the Ville:Dorm for Oak Hill College:Maria Lopez's room") == \
        world.objects_of(platform.world.tree, "the Ville:Dorm for Oak Hill College:Maria Lopez's room")
    # and so he can go there, which the seed alone did not allow
    assert apply(platform, "t-2", "move", detail={"to": "the Ville:Dorm for Oak Hill College:Maria Lopez's room"}).ok


def test_a_place_an_agent_is_told_of_it_learns_and_may_go_to():
    platform = town()
    said = "Klaus: I study at the library of Oak Hill College; the Dorm for Oak Hill College is quiet. hobbs cafe too."
    # the longer name wins where one holds the other; any case; in the order first named
    assert platform.sectors_named(said) == ["Oak Hill College", "Dorm for Oak Hill College", "Hobbs Cafe"]
    assert platform.sectors_named("the Oak Hill Collegeville fair") == []  # whole words only
    assert "Oak Hill College" not in world.sectors_of(platform.spatial_memory("t-0"), "the Ville")
    # what the place choice sees before the learn action lands, and what the platform knows after it
    assert LIBRARY in world.arenas(platform.spatial_memory("t-0", ["Oak Hill College"]))
    assert not apply(platform, "t-0", "move", detail={"to": LIBRARY}).ok
    assert apply(platform, "t-0", "learn", detail={"sectors": ["Oak Hill College"]}).ok
    assert world.objects_of(platform.spatial_memory("t-0"), LIBRARY) == ["library table"]
    assert apply(platform, "t-0", "move", detail={"to": LIBRARY}).ok
    refused = apply(platform, "t-0", "learn", detail={"sectors": ["Atlantis"]})
    assert not refused.ok and "no sector 'Atlantis'" in refused.error
    assert not apply(platform, "t-0", "learn", detail={"sectors": "Hobbs Cafe"}).ok


def test_nobody_talks_to_a_sleeping_agent():
    platform = town()
    for a in ("t-0", "t-1"):
        apply(platform, a, "move", round=3, detail={"to": CAFE, "activity": "drinking coffee"})
    platform.on_round_start(5, None)  # Maria took no action in round 4: her plan had her asleep
    assert platform.asleep("t-1") and "Maria Lopez is at Hobbs Cafe, cafe, sleeping" in platform.perceive("t-0")
    refused = apply(platform, "t-0", "talk", round=5, target_agent="t-1")
    assert not refused.ok and refused.error == "Maria Lopez is asleep"
    apply(platform, "t-1", "wait", round=5, detail={"activity": "drinking coffee"})  # she acts this round: awake
    assert not platform.asleep("t-1") and apply(platform, "t-0", "talk", round=5, target_agent="t-1").ok
    apply(platform, "t-1", "wait", round=6, detail={"activity": "sleeping in her chair"})
    platform.on_round_start(6, None)
    assert platform.asleep("t-1")  # acting, but her activity says she sleeps


def test_talk_needs_the_same_arena_and_one_conversation_per_round():
    platform = town()
    refused = apply(platform, "t-0", "talk", target_agent="t-1")
    assert not refused.ok and "is not in" in refused.error
    for a in ("t-0", "t-1", "t-2"):
        apply(platform, a, "move", round=3, detail={"to": CAFE})
    assert apply(platform, "t-0", "talk", round=3, target_agent="t-1").ok
    busy = apply(platform, "t-2", "talk", round=3, target_agent="t-1")
    assert not busy.ok and "already in a conversation" in busy.error
    assert apply(platform, "t-2", "talk", round=4, target_agent="t-1").ok
    assert not apply(platform, "t-0", "talk", round=5, target_agent="t-0").ok


def test_the_platform_declares_its_actions_and_refuses_others():
    platform = town()
    assert platform_actions(platform) == TOWN_ACTIONS == {"move", "use", "talk", "wait", "learn"}
    refused = apply(platform, "t-0", "post", text="hello")
    assert not refused.ok and "platform 'town' does not accept 'post'" in refused.error


def test_state_round_trips():
    platform = town()
    apply(platform, "t-0", "move", detail={"to": CAFE, "activity": "baking"})
    apply(platform, "t-0", "use", detail={"object": "piano", "state": "being played"})
    state = json.loads(json.dumps(platform.get_state()))
    fresh = town()
    fresh.set_state(state)
    assert fresh.get_state() == platform.get_state()
    assert fresh.perceive("t-0") == platform.perceive("t-0")


def test_housemates_join_the_seed_and_fields_hold_the_identity():
    party = ROOT / "tests" / "data" / "smallville" / "base_party"
    personas = {p.name: p for p in load_personas(SmallvillePersonasConfig(path=str(party)))}
    assert personas["Klaus Mueller"].sentences[-1] == "Klaus Mueller lives in Dorm for Oak Hill College with Maria Lopez."
    assert personas["Sam Moore"].sentences[-1] == "Sam Moore lives in Moore family's house with Jennifer Moore."
    assert not any("lives in" in s for s in personas["Isabella Rodriguez"].sentences)
    alone = load_personas(SmallvillePersonasConfig(path=str(party), housemates=False))
    assert not any(" with " in s for p in alone for s in p.sentences if "lives in" in s)
    # the persona's text holds each seed text once (a field that is also a sentence is not repeated)
    assert personas["Klaus Mueller"].text.count("writing a research paper on gentrification") == 1
    klaus = personas["Klaus Mueller"].fields
    assert (klaus["innate"], klaus["recency_decay"], klaus["age"]) == ("kind, inquisitive, passionate", 0.995, 20)
    assert klaus["daily_plan_req"].startswith("Klaus Mueller goes to the library")


def test_personas_from_scratch_carry_the_seed_and_an_added_intention():
    base = read_base(MINI)
    persona = persona_from_scratch(base.scratches[0], "She will bring cake.")
    assert persona.name == "Isabella Rodriguez"
    assert persona.sentences[0] == "Isabella Rodriguez is 34 years old and friendly, outgoing, hospitable."
    assert any("Valentine's Day party" in s for s in persona.sentences)
    assert persona.fields["currently"].endswith("She will bring cake.")
    assert persona.fields["living_area"] == ISA_HOME
    names = [p.name for p in load_personas(SmallvillePersonasConfig(path=str(MINI), names=["Klaus Mueller", "Maria Lopez"]))]
    assert names == ["Klaus Mueller", "Maria Lopez"]


def test_bad_seed_files_name_the_file_and_field(tmp_path):
    with pytest.raises(UsageError, match="absent: no such folder .*townsquare data fetch smallville-3"):
        read_base(tmp_path / "absent")
    with pytest.raises(UsageError, match="no personas/ folder"):
        read_base(tmp_path)
    seed = tmp_path / "personas" / "Ann Lee" / "bootstrap_memory"
    seed.mkdir(parents=True)
    (seed / "scratch.json").write_text(json.dumps({"name": "Ann Lee", "innate": "kind", "learned": "x", "lifestyle": "y"}))
    with pytest.raises(UsageError, match=r"scratch.json: field 'currently' is missing"):
        read_base(tmp_path)
    (seed / "scratch.json").write_text(json.dumps({"name": "Ann Lee", "innate": "k", "learned": "x", "lifestyle": "y", "currently": "z"}))
    (seed / "spatial_memory.json").write_text('{"the Ville": {"Cafe": ["not", "arenas"]}}')
    with pytest.raises(UsageError, match="spatial_memory.json: sector the Ville:Cafe is not an object of arenas"):
        read_base(tmp_path)
    with pytest.raises(UsageError, match="no agent 'Bob'"):
        load_personas(SmallvillePersonasConfig(path=str(MINI), intentions={"Bob": "party"}))


@pytest.mark.skipif(not (SHARED_DATA / "generative_agents").is_dir(), reason="../shared/data/generative_agents not present")
@pytest.mark.parametrize("folder,count", [("base_the_ville_n25", 25), ("base_the_ville_isabella_maria_klaus", 3)])
def test_the_original_bases_load(folder, count):
    base = read_base(SHARED_DATA / "generative_agents" / folder)
    assert len(base.names) == count
    platform = TownPlatform(world.World(base.town()), base.spatial, base.homes())
    for i, name in enumerate(base.names):
        platform.join(agent(f"a{i}", name))
    assert all(world.has_arena(platform.world.tree, where) for where in platform.position.values())
    isabella = base.names.index("Isabella Rodriguez")
    assert world.has_arena(platform.spatial_memory(f"a{isabella}"), CAFE)


def scenario(platform: str, count: int = 2) -> str:
    return f'''name = "b"
rounds = 1
[llm]
name = "scripted"
[platform]
name = "town"
{platform}
[[populations]]
name = "v"
count = {count}
slots = {{ policy = "town_agent" }}
personas = {{ name = "smallville", path = "{MINI}" }}
'''


def test_bad_town_scenarios_stop_before_anything_is_written(make_plugins, write_scenario, run_scenario, tmp_path):
    from townsquare.api import ScenarioError

    plugins = make_plugins(enable=["townsquare.testing.scripted"])
    with pytest.raises(ScenarioError, match="give exactly one of path .* or world"):
        run_scenario(write_scenario(scenario("")), plugins=plugins, out=tmp_path / "r1")
    with pytest.raises(UsageError, match="count 5 is more than the 3 agents of the base"):
        run_scenario(write_scenario(scenario(f'path = "{MINI}"', count=5)), plugins=plugins, out=tmp_path / "r2")
    (tmp_path / "town.json").write_text('{"the Ville": {"Cafe": {"cafe": "piano"}}}')
    with pytest.raises(UsageError, match=r"town.json: arena the Ville:Cafe:cafe is not a list of object names"):
        run_scenario(write_scenario(scenario(f'world = "{tmp_path / "town.json"}"')), plugins=plugins, out=tmp_path / "r3")
    assert not any((tmp_path / name).exists() for name in ("r1", "r2", "r3"))


def test_a_world_file_town_lets_agents_know_the_whole_town(make_plugins, write_scenario, run_scenario, tmp_path):
    (tmp_path / "town.json").write_text(json.dumps({"the Ville": {"Hobbs Cafe": {"cafe": ["piano"]},
                                                                  "Park": {"lawn": ["bench"]}}}))
    run_dir, summary = run_scenario(write_scenario(scenario(f'world = "{tmp_path / "town.json"}"')),
                                    plugins=make_plugins(enable=["townsquare.testing.scripted"]))
    assert summary.rounds_completed == 1
    _, state = run_dir.latest_checkpoint()
    town = state["platform"]
    # the seed homes are not in this town: each agent starts in the first arena it knows
    assert set(town["position"].values()) <= {"the Ville:Hobbs Cafe:cafe", "the Ville:Park:lawn"}
    assert all(set(world.arenas(tree)) == {"the Ville:Hobbs Cafe:cafe", "the Ville:Park:lawn"} for tree in town["known"].values())
