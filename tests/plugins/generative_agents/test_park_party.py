"""Park et al.'s party (§7.1) travels through the agents' own pathways, proven with the oracle
test model (rules that read only their prompt): an invitation heard in conversation reaches the
next day's plan, and one heard after the day is planned changes the rest of that day; in a
six-agent town the party spreads and invited guests come, no conversation leaves a memory that
says nothing, and with dated news rated only 5 the invitation still reaches the next day's plan
of everyone who heard it; without the conversation memory only the host knows, without the
memory-written summary nobody comes. ``benchmarks/party.py`` runs the same on the 25 agents of
``examples/valentines.toml``."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from datetime import datetime

import pytest

from ga_planning_world import World
from helpers import ROOT, read_table
from townsquare.api import BuildContext, LLMRequest, LLMResponse, MemoryRecord
from townsquare.platforms.town.smallville import SmallvillePersonasConfig, load_personas
from townsquare.plugins.generative_agents.dialogue.conversation import Conversation, Dialogue
from townsquare.plugins.generative_agents.dialogue.conversation_memory import build_conversation_memory
from townsquare.plugins.generative_agents.memory.memory_stream import MemoryStream, MemoryStreamConfig
from townsquare.plugins.generative_agents.memory.park_retrieval import ParkRetrieval
from townsquare.plugins.generative_agents.planning.agent_summary import build_agent_summary
from townsquare.plugins.generative_agents.planning.day_plan import DayPlanConfig, build_day_plan
from townsquare.testing.oracle import OracleLLM

BASE = ROOT / "tests" / "data" / "smallville" / "base_party"
ORACLE = "townsquare.testing.oracle"
INVITATION = "Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm"


def run(coro):
    return asyncio.run(coro)


class FourForTheParty:
    """The oracle, except that it rates every memory about the party 4 (as a real model might)."""

    name, model = "oracle", "oracle-rules"

    def __init__(self):
        self.oracle = OracleLLM()

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if request.purpose.startswith("importance") and "party" in request.messages[-1].content.lower():
            return LLMResponse(text="4", model=self.model, provider=self.name)
        return await self.oracle.complete(request)


def two_agents(summary: bool = True):
    """Isabella and Maria of the six-agent base with Park's components, Maria's memory already
    holding 195 routine records rated 3 from February 13 (9 am to 10 pm, every 4 minutes)."""
    personas = load_personas(SmallvillePersonasConfig(path=str(BASE), names=["Isabella Rodriguez", "Maria Lopez"]))
    world = World(personas, FourForTheParty())
    for agent in world.agents:
        build = BuildContext(services=None, seed=0, agent=agent)
        agent.components.update({
            "memory.stream": MemoryStream(MemoryStreamConfig()), "memory.retrieval": ParkRetrieval(),
            "memory.sensory": build_conversation_memory(None, build),
            "planner": build_day_plan(DayPlanConfig(active_when="awake", platform_note=""), build),
        })
        if summary:
            agent.components["persona.context"] = build_agent_summary(None, build)
    isabella, maria = world.agents
    for hour in range(9, 22):
        for minute in range(0, 60, 4):
            at = ctx(world, maria, datetime(2023, 2, 13, hour, minute))
            record = MemoryRecord(f"Maria Lopez is streaming a game on Twitch in her room, part {hour}-{minute}", importance=3)
            run(maria.components["memory.stream"].remember(at, [record]))
    return world, isabella, maria


def ctx(world, agent, when):
    return dataclasses.replace(world.ctx(agent), now=when)


def plan_prompt(world, agent_id):
    return [r for r in world.recorder.requests if r.purpose == "plan.day" and r.agent_id == agent_id][-1].messages[-1].content


def test_an_invitation_heard_in_conversation_reaches_the_next_days_plan():
    world, isabella, maria = two_agents()
    stream = maria.components["memory.stream"]
    assert len(stream) >= 195
    meeting = datetime(2023, 2, 13, 12, 0)
    sides = [(ctx(world, a, meeting), Dialogue()) for a in (isabella, maria)]
    transcript = run(Conversation().run(*sides, topic="Maria Lopez is at Hobbs Cafe, cafe"))
    assert INVITATION in transcript.turns[0].text  # Isabella tells her, from her status
    heard = [r for r in stream.records if INVITATION in r.text]
    assert heard and {r.importance for r in heard} == {4.0}  # a middling rating, as a real model might give
    # the conversation entered both schedules at noon
    for agent in (isabella, maria):
        step = run(agent.components["planner"].current_action(ctx(world, agent, meeting)))
        assert step.text.startswith("talking with") and step.start == 12 * 60

    morning = ctx(world, maria, datetime(2023, 2, 14, 9, 0))
    run(maria.components["planner"].ensure_day(morning))
    # the new day's status asked the memory what to remember for today's plan ("Maria Lopez's plan for Tuesday
    # February 14, 2023." and "Important recent events for Maria Lopez's life.", 30 records each): the conversation is
    # among the statements, though the afternoon's and evening's 195 records are more recent
    note = [r for r in world.recorder.requests if r.purpose == "summary.plan_note" and r.agent_id == maria.id][-1]
    listed = [line for line in note.messages[-1].content.splitlines() if line[:1].isdigit()]
    assert len(listed) >= 30 and any(INVITATION in line for line in listed)
    status = maria.components["persona.context"].status
    assert status.startswith("Maria Lopez is working on her physics degree") and INVITATION in status
    prompt = plan_prompt(world, maria.id)
    assert INVITATION in prompt  # heard only in conversation, now in her plan prompt
    party = [s for s in maria.components["planner"].strokes if "party" in s.text]
    assert [(s.minute, "Hobbs Cafe" in s.text) for s in party] == [(17 * 60, True)]


def test_an_invitation_heard_after_the_day_is_planned_changes_the_rest_of_the_day():
    world, isabella, maria = two_agents()
    planner = maria.components["planner"]
    run(planner.ensure_day(ctx(world, maria, datetime(2023, 2, 14, 8, 0))))
    assert not [c for c in planner.chunks if "party" in c.text]  # her day is planned without it
    before = {c.start: c.text for c in planner.chunks if c.start < 12 * 60}
    noon = datetime(2023, 2, 14, 12, 0)
    sides = [(ctx(world, a, noon), Dialogue()) for a in (isabella, maria)]
    transcript = run(Conversation().run(*sides, topic="Maria Lopez is at Hobbs Cafe, cafe"))
    assert INVITATION in transcript.turns[0].text
    # what she keeps for planning ("For Maria Lopez's planning: ...") had the model write the rest of her day again
    asked = [r for r in world.recorder.requests if r.purpose == "plan.conversation" and r.agent_id == maria.id]
    assert len(asked) == 1 and INVITATION in asked[0].messages[-1].content
    assert "has just talked with Isabella Rodriguez" in asked[0].messages[-1].content
    party = [c for c in planner.chunks if "party" in c.text]
    assert party and party[0].start == 17 * 60 and all("Hobbs Cafe" in c.text for c in party)
    assert planner.revisions[-1]["with"] == "Isabella Rodriguez"
    # the morning stays as it was, and the conversation keeps its minutes at noon
    assert {c.start: c.text for c in planner.chunks if c.start < 12 * 60} == before
    assert run(planner.current_action(ctx(world, maria, noon))).text == "talking with Isabella Rodriguez"
    # a planner told not to re-plan after conversations keeps the day
    world, isabella, maria = two_agents()
    maria.components["planner"].config.replan_after_conversation = False
    run(maria.components["planner"].ensure_day(ctx(world, maria, datetime(2023, 2, 14, 8, 0))))
    run(Conversation().run(*[(ctx(world, a, noon), Dialogue()) for a in (isabella, maria)], topic="Maria Lopez is at Hobbs Cafe, cafe"))
    assert not [c for c in maria.components["planner"].chunks if "party" in c.text]
    assert not [r for r in world.recorder.requests if r.purpose == "plan.conversation" and r.agent_id == maria.id]


def test_without_the_memory_written_summary_the_invitation_never_reaches_the_plan():
    world, isabella, maria = two_agents(summary=False)
    sides = [(ctx(world, a, datetime(2023, 2, 13, 12, 0)), Dialogue()) for a in (isabella, maria)]
    transcript = run(Conversation().run(*sides, topic="Maria Lopez is at Hobbs Cafe, cafe"))
    assert INVITATION in transcript.turns[0].text  # Isabella's seed still says it
    assert any(INVITATION in r.text for r in maria.components["memory.stream"].records)  # and Maria remembers it
    run(maria.components["planner"].ensure_day(ctx(world, maria, datetime(2023, 2, 14, 9, 0))))
    assert INVITATION not in plan_prompt(world, maria.id)
    assert not [s for s in maria.components["planner"].strokes if "party" in s.text]


# --------------------------------------------------------------------------- the whole town


def party_scenario(write_scenario):
    """examples/valentines.toml on the six-agent base: hourly rounds, Feb 13 06:00 to Feb 14 18:00."""
    text = (ROOT / "examples" / "valentines.toml").read_text()
    text = text.replace("data:smallville-n25", str(BASE))
    text = text.replace("rounds = 148", "rounds = 37").replace("count = 25", "count = 6")
    text = text.replace("minutes_per_round = 15 ", "minutes_per_round = 60 ")
    text = text.split("[populations.personas.currently]")[0]  # this base's Isabella already plans the party
    return write_scenario(text + '\n[llm]\nname = "oracle"\n')


def last_values(run_dir):
    rows = read_table(run_dir.path, "metrics")
    last = max(r for r, _, _ in rows)
    return {name[len("town_metrics."):]: value for r, name, value in rows if r == last and name.startswith("town_metrics.")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, plan_prompts):
    """The party in the six-agent town with the oracle: whole, and under each ablation. Three whole runs
    of 37 hourly rounds (a few seconds each; 20 s together on a machine shared with others): the
    proof needs the days to pass, and the tests below share them."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    folder = tmp_path_factory.mktemp("party")
    path = folder / "party.toml"

    def write(text):
        path.write_text(text)
        return path

    scenario = party_scenario(write)
    out = {}
    for condition, disabled in (("whole", []), ("no conversation memory", ["conversation_memory"]),
                                ("no memory-written summary", ["agent_summary"])):
        plugins = make_plugin_manager(enable=[ORACLE], disable=disabled)
        run_dir, _ = start_run(scenario, plugins=plugins, out=folder / condition.replace(" ", "-"))
        out[condition] = run_dir
    return out


@pytest.fixture(scope="module")
def plan_prompts(tmp_path_factory):
    """The whole party with the oracle rating dated news 5 (``llm.news_importance``), each agent's
    day-plan prompts recorded: (the run, {agent id: {day: prompt}})."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run

    folder = tmp_path_factory.mktemp("party5")
    path = folder / "party.toml"
    path.write_text(party_scenario(lambda text: text))
    scenario = path
    prompts: dict[str, dict[str, str]] = {}
    complete = OracleLLM.complete

    async def recording(self, request):
        if request.purpose == "plan.day":
            day = re.search(r"Today is (\w+ \w+ \d+)", request.messages[-1].content).group(1)
            prompts.setdefault(request.agent_id, {})[day] = request.messages[-1].content
        return await complete(self, request)

    OracleLLM.complete = recording
    try:
        run_dir, _ = start_run(scenario, overrides=["llm.news_importance=5"], plugins=make_plugin_manager(enable=[ORACLE]),
                               out=folder / "run")
    finally:
        OracleLLM.complete = complete
    return run_dir, prompts


def test_the_party_spreads_and_invited_guests_come(runs):
    values = last_values(runs["whole"])
    # Klaus (at lunch) and Sam (reading) hear it from Isabella at the cafe on the 13th; Klaus tells Maria at the dorm
    # that evening. Jennifer hears only of Sam's candidacy (each time he talks with her it is the first news in his
    # prompt) and Tom lives alone: neither hears of it
    heard = {agent: values[f"party.heard.ville-000{i}"] for i, agent in enumerate(
        ("Isabella", "Klaus", "Maria", "Sam", "Jennifer", "Tom"), 1)}
    assert heard == {"Isabella": 1, "Klaus": 1, "Maria": 1, "Sam": 1, "Jennifer": 0, "Tom": 0}
    # three guests (not the host), all of whom had the invitation in mind when they planned the 14th and came for it
    assert values["party.guests"] == 3 and values["party.attended_guests"] == 3 and values["party.present_guests"] == 3
    assert values["candidacy.heard"] == 4  # Sam told his wife, Isabella and Klaus
    first = {name: value for r, name, value in read_table(runs["whole"].path, "metrics") if r == 0}
    assert first["town_metrics.party.heard"] == first["town_metrics.candidacy.heard"] == 1
    assert values["density"] > first["town_metrics.density"]
    # nobody tried to talk to a sleeping agent (the policy checks before asking; the platform would refuse)
    actions = read_table(runs["whole"].path, "actions")
    assert not [row for row in actions if row[4] == "talk" and "asleep" in (row[11] or "")]


def test_no_conversation_leaves_a_memory_that_says_nothing(runs):
    from townsquare.plugins.generative_agents.memory.memory_text import says_nothing

    _, state = runs["whole"].latest_checkpoint()
    thoughts = [(r["meta"]["thought"], r["text"]) for saved in state["agents"].values()
                for r in saved["components"]["memory.stream"]["records"] if r["meta"].get("thought")]
    planning = [text.split("'s planning: ", 1)[1] for kind, text in thoughts if kind == "planning"]
    # a planning thought only where a conversation settled something dated (the invitation, a day's plan told),
    # never "nothing to plan for"
    assert planning and not [t for t in planning if says_nothing(t)]
    assert all(re.search(r"February \d+|\d:\d\d [ap]m|\d[ap]m", t) for t in planning)
    assert any(INVITATION in t for t in planning)
    assert not [t for kind, t in thoughts if kind == "memo" and says_nothing(t.split(" ", 2)[2])]
    # the conversations that settled nothing were asked and left no thought
    assert sum(saved["components"]["memory.sensory"]["empty_thoughts"] for saved in state["agents"].values()) > 0


def test_without_the_conversation_memory_only_the_host_knows(runs):
    values = last_values(runs["no conversation memory"])
    assert values["party.heard"] == 1 and values["party.heard.ville-0001"] == 1
    assert values["party.attended_guests"] == 0 and values["candidacy.heard"] == 1
    talks = [row for row in read_table(runs["no conversation memory"].path, "actions") if row[4] == "talk" and row[9] == 1]
    assert talks  # they still talk; nobody remembers what was said
    slots = {(r["slot"], r["component"]) for r in runs["no conversation memory"].read_manifest()["slot_table"]
             if r["scope"] == "ville"}
    assert ("memory.sensory", "-") in slots  # the slot is empty, nothing stands in


def test_without_the_memory_written_summary_nobody_comes(runs):
    values = last_values(runs["no memory-written summary"])
    # the news still travels in conversation (Klaus and Sam at the cafe, Maria from Klaus at the dorm)
    assert values["party.heard"] == 4
    # but no plan makes anyone come for it; the two who heard are at the cafe as every day (lunch, reading): there, not
    # for it
    assert values["party.attended_guests"] == 0 and values["party.present_guests"] == 2
    slots = {(r["slot"], r["component"]) for r in runs["no memory-written summary"].read_manifest()["slot_table"]
             if r["scope"] == "ville"}
    assert ("persona.context", "-") in slots


def test_eval_park_interviews_each_day_as_the_paper_did(runs, tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "evaluation.json"
    result = subprocess.run([sys.executable, "-m", "townsquare.cli", "eval", "park", str(runs["whole"].path), "--topic", "party",
                             "--each-day", "--questions", "0", "--out", str(out), "-p", ORACLE], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    days = json.loads(out.read_text())["social_by_day"]
    # the checkpoint that ends each simulated day: 9 pm on the 13th (every fourth hourly round is kept), the run's end
    assert [d["round"] for d in days] == [15, 36] and days[0]["topic"] == "a Valentine's Day party"
    for day in days:
        assert [a["agent"] for a in day["answers"]] == [f"ville-000{i}" for i in range(1, 7)]
        assert all(len(a["knows"]) == 5 and set(a["knows"].values()) <= {"yes", "no"} for a in day["answers"])
        said = [a["agent"] for a in day["answers"] if a["knows_topic"] == "yes"]
        assert said == sorted(day["informed"] + day["hallucinated"])
    # by the end everyone the text match counts has said yes, backed by the conversation that told them
    values = last_values(runs["whole"])
    heard = sorted(a for a in (f"ville-000{i}" for i in range(1, 7)) if values[f"party.heard.{a}"])
    assert days[-1]["informed"] == heard and days[-1]["hallucinated"] == []
    assert set(days[0]["informed"]) <= set(heard)
    assert "after round 15: know about a Valentine's Day party:" in result.stdout
    assert 0 < days[-1]["density"] <= 1


def test_rated_only_5_the_invitation_reaches_the_next_days_plan_of_everyone_who_heard_it(plan_prompts):
    run_dir, prompts = plan_prompts
    _, state = run_dir.latest_checkpoint()
    heard = {agent for agent, saved in state["agents"].items() for r in saved["components"]["memory.stream"]["records"]
             if r["kind"] == "chat" and INVITATION in r["text"] and r["created"] < "2023-02-14"}
    assert {r["importance"] for saved in state["agents"].values() for r in saved["components"]["memory.stream"]["records"]
            if r["kind"] == "chat" and r["text"].endswith(f"planning a {INVITATION}.")} == {5.0}  # rated as ordinary news
    assert len(heard) >= 3  # Isabella's listeners on the 13th, and those they told
    for agent in heard:
        assert INVITATION in prompts[agent]["Tuesday February 14"], agent
    assert not any(INVITATION in p for p in (prompts[a]["Tuesday February 14"] for a in set(prompts) - heard - {"ville-0001"}))
    values = last_values(run_dir)
    assert values["party.attended_guests"] >= len(heard - {"ville-0001"})


def test_the_reference_codes_recall_is_a_named_preset(write_scenario):
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.plugins.generative_agents.memory.park_retrieval import RECALL_PRESETS
    from townsquare.launch.scenario_files import load_scenario

    path = party_scenario(write_scenario)
    plugins = make_plugin_manager(enable=[ORACLE])
    ours = load_scenario(path, list(RECALL_PRESETS["ours"]), plugins)
    reference = load_scenario(path, list(RECALL_PRESETS["reference_code"]), plugins)
    assert ours.embedder.spec.name == "hash" and ours.populations[0].slots["memory.retrieval"].config.mode == "paper"
    # sentence embeddings, and relevance weighted 3 (importance 2, recency 0.5) as the reference code's retrieve does
    assert reference.embedder.spec.name == "minilm"
    retrieval = reference.populations[0].slots["memory.retrieval"]
    assert retrieval.config.mode == "reference_code"
    assert retrieval.spec.factory(retrieval.config, None).weights == (0.5, 2.0, 3.0)


def test_the_estimates_stand_in_answers_fall_back_without_a_warning(write_scenario, monkeypatch):
    import sqlite3

    from structlog.testing import capture_logs

    from townsquare.commands.dry_run import StandInModel
    from townsquare.commands.typical_answers import estimate_scenario
    from townsquare.plugins.generative_agents import park_answer_priors

    text = party_scenario(write_scenario).read_text().replace('[llm]\nname = "oracle"\n', "").replace("rounds = 37", "rounds = 4")
    path = write_scenario(text, "estimate.toml")

    def fallbacks(events_path):
        with sqlite3.connect(events_path) as db:
            return db.execute("SELECT COUNT(*) FROM llm_calls WHERE status = 'parse_failure'").fetchone()[0]

    def dry_run():
        with capture_logs() as logs:
            estimate = estimate_scenario(path, read=fallbacks)
        return estimate, [e for e in logs if e["event"] == "llm.fallback"]

    # a typical answer the design cannot use (actions that do not fill their hour): the plans fall
    # back to their defaults, recorded in the dry run, and the estimate warns about none
    monkeypatch.setattr(park_answer_priors, "typical_actions", lambda prompt, disposition: {"actions": [{"action": "wait", "minutes": 5}]})
    estimate, warned = dry_run()
    assert estimate.read > 0 and estimate.model.rows["plan.actions"][0] > 0 and warned == []
    monkeypatch.setattr(StandInModel, "stand_in", False)
    assert len(dry_run()[1]) == estimate.read  # from a provider that is no stand-in, each is a warning


def test_estimate_prints_calls_and_tokens_per_simulated_day(write_scenario):
    import subprocess
    import sys

    text = party_scenario(write_scenario).read_text().replace('[llm]\nname = "oracle"\n', "")
    text = text.replace("rounds = 37", "rounds = 14").replace("start = 2023-02-13T06:00:00", "start = 2023-02-13T20:00:00")
    path = write_scenario(text, "estimate.toml")
    result = subprocess.run([sys.executable, "-m", "townsquare.cli", "estimate", str(path)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("per simulated day (typical):")
    days = {line.split()[0]: [int(v.replace(",", "")) for v in line.split()[1:4]] for line in lines[start + 3:start + 5]}
    assert set(days) == {"2023-02-13", "2023-02-14"} and all(calls > 0 and tokens > 0 for calls, tokens, _ in days.values())
    total = next(line for line in lines[:start] if line.startswith("total")).split()
    assert sum(calls for calls, _, _ in days.values()) == int(total[1].replace(",", ""))
