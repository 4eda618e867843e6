"""Park §4.3 planning: plans read from JSON, 5-8 strokes, hour chunks, 5-15 minute actions, the
summary description, reacting and re-planning, conversations in the schedule, state round-trip,
and the planner in a run."""

from __future__ import annotations

import asyncio
import json
import pytest

from ga_planning_world import START, ListMemory, World, by_purpose
from helpers import read_table, scenario_text
from townsquare.api import Action, BuildContext, MemoryRecord, Persona, PolicySpec, UsageError, hookimpl
from townsquare.plugins.generative_agents.planning import day_plan
from townsquare.plugins.generative_agents.planning.agent_summary import build_agent_summary
from townsquare.plugins.generative_agents.planning.day_plan import FALLBACK_DAY, DayPlanConfig, build_day_plan
from townsquare.plugins.generative_agents.planning.schedule import (Chunk, Stroke, chunks_from_strokes, clock_text, fit_durations,
                                                                    read_actions, read_schedule, read_strokes, strokes_text)

EDDY = Persona("Eddy", ["Eddy is a music student.", "Eddy likes long walks."])


def plan(*items):
    return json.dumps({"plan": [{"time": t, "activity": a} for t, a in items]})


def hours(*items, key="schedule"):
    return json.dumps({key: [{"time": t, "activity": a} for t, a in items]})


def steps(*items):
    return json.dumps({"actions": [{"action": a, "minutes": m} for a, m in items]})


STROKES = plan(("7:00 am", "wake up and complete the morning routine"), ("9:00 a.m.", "go to class"), ("12:00 pm", "have lunch"),
               ("1:00 pm", "work on his music composition"), ("5 pm", "check social media"), ("10:00 pm", "go to bed"))
HOURLY = hours(("7:00 am", "morning routine"), ("8:00 am", "walk to class"), ("9:00 am", "class"), ("12:00 pm", "lunch"),
               ("1:00 pm", "compose music"), ("5:00 pm", "scroll his social media feed"), ("6:00 pm", "dinner"), ("10:00 pm", "sleep"))
ACTIONS = steps(("get out of bed", 5), ("shower", 15), ("dress", 10), ("breakfast", 20), ("read", 10))


# --------------------------------------------------------------------------- reading the model's JSON


def test_strokes_read_from_json_with_lenient_times():
    strokes = read_strokes({"plan": [{"time": "7:00 am", "activity": "wake up"}, {"time": "9:00 a.m.", "activity": "**class**"},
                                     {"time": "whenever", "activity": "work"}, {"time": "8am", "activity": ""},
                                     "lunch at noon", {"time": "22:30", "activity": "sleep."}]})
    assert strokes == [Stroke("wake up", 420), Stroke("class", 540), Stroke("work", None), Stroke("lunch at noon", 720),
                       Stroke("sleep", 1350)]
    with pytest.raises(ValueError, match="plan"):
        read_strokes({"schedule": []})


def test_strokes_text_adds_the_time_a_stroke_does_not_say():
    assert strokes_text([Stroke("wake up", 420), Stroke("lunch at noon", 720), Stroke("read", None)]) == \
        "1) wake up at 7:00 am, 2) lunch at noon, 3) read"


def test_clock_text():
    assert [clock_text(m) for m in (0, 425, 720, 1439)] == ["12:00 am", "7:05 am", "12:00 pm", "11:59 pm"]


def test_schedule_entries_become_hour_chunks():
    chunks = read_schedule(json.loads(hours(("07:00", "wake up"), ("9:00 AM", "class"), ("11:30 am", "lunch"),
                                            ("11:32 am", "x"), ("no time", "y"), ("1:00 pm", "nap"), ("1:00 pm", "ignored"))))
    # 07:00 runs to 09:00 and is cut into hours; 09:00-11:30 is 60 + 90 (a 30-minute rest is a chunk of its own, being
    # longer than 5 minutes); 11:30 lasts 2 minutes and is dropped; 11:32 runs to 1:00 pm; the last lasts an hour
    assert [(c.start, c.end, c.text) for c in chunks] == [
        (420, 480, "wake up"), (480, 540, "wake up"), (540, 600, "class"), (600, 660, "class"), (660, 690, "class"),
        (692, 752, "x"), (752, 780, "x"), (780, 840, "nap")]


def test_chunks_from_strokes_share_the_gaps():
    strokes = [Stroke("wake", 420), Stroke("work", None), Stroke("lunch", 720), Stroke("walk", None), Stroke("read", None)]
    chunks = chunks_from_strokes(strokes, 60, 420, 1440)
    # work gets (720 - 420) / 2 = 150 -> 570; walk and read share (1440 - 720) / 3 = 240 -> 960, 1200
    assert [(c.start, c.text) for c in chunks if c.start in (420, 570, 720, 960, 1200)] == [
        (420, "wake"), (570, "work"), (720, "lunch"), (960, "walk"), (1200, "read")]
    assert chunks[-1].end == 1440 and all(c.minutes <= 60 + 5 for c in chunks)


def test_actions_read_from_json():
    value = {"actions": [{"action": "get out of bed", "minutes": 5}, {"action": "shower", "minutes": "15"},
                         {"action": "dress"}, {"action": "", "minutes": 5}, "stretch", {"action": "read", "minutes": 9.0}]}
    assert read_actions(value) == [("get out of bed", 5), ("shower", 15), ("read", 9)]


@pytest.mark.parametrize("durations, expected", [
    ([15, 15, 15, 15], [15, 15, 15, 15]),                 # valid: unchanged
    ([20, 3, 30], [15, 15, 15, 15]),                      # clamp 15, 5, 15; one filler of 5; +20 from the end
    ([15, 15, 15, 15, 10], [15, 15, 15, 10, 5]),          # sum 70: the last shortens 10 -> 5, the one before 15 -> 10
    ([5] * 13, [5] * 12),                                 # at most 60 / 5 = 12 actions
    ([10, 10], [15, 15, 15, 15]),                         # at least 4 actions of at most 15
    ([5, 5, 5, 5, 5, 5], [5, 5, 5, 15, 15, 15]),          # sum 30: +30 from the end, 10 each up to 15
])
def test_durations_fit_the_chunk(durations, expected):
    fit = fit_durations([(f"a{i}", d) for i, d in enumerate(durations)], 60, 5, 15, "filler")
    assert fit.minutes == expected
    assert sum(fit.minutes) == 60 and all(5 <= m <= 15 for m in fit.minutes)
    assert bool(fit.changes) == (durations != expected)


def test_durations_fit_other_chunk_lengths():
    fit = fit_durations([("a", 12), ("b", 12)], 30, 5, 15, "f")
    assert fit.minutes == [15, 15] and sum(fit.minutes) == 30
    with pytest.raises(ValueError):
        fit_durations([], 4, 5, 15, "f")


# --------------------------------------------------------------------------- the planner


def planner_world(answers, memory=True, summary=True, **config):
    """One agent with a list memory, Park's summary description (``summary``) and the planner."""
    world = World([EDDY], by_purpose(answers))
    (agent,) = world.agents
    if memory:
        agent.components["memory.stream"] = ListMemory()
    if summary:
        agent.components["persona.context"] = build_agent_summary(None, BuildContext(services=None, seed=0, agent=agent))
    agent.components["planner"] = build_day_plan(DayPlanConfig(**config), BuildContext(services=None, seed=0, agent=agent))
    return world, agent, agent.components["planner"]


GOOD = {"summary": "Eddy is a hard-working music student.", "plan.day": STROKES, "plan.hourly": HOURLY, "plan.actions": ACTIONS}


def run(coro):
    return asyncio.run(coro)


def test_day_plan_from_summary_strokes_hours_and_actions():
    world, agent, planner = planner_world(GOOD)
    ctx = world.ctx(agent, 0)  # Monday 08:00
    assert run(planner.is_active(ctx)) is False  # walking to class
    purposes = world.recorder.purposes()
    assert purposes == ["summary"] * 3 + ["plan.day", "plan.hourly", "plan.actions"]
    assert len(planner.strokes) == 6 and planner.source == "llm"
    assert [(c.start, c.text) for c in planner.chunks[:2]] == [(420, "morning routine"), (480, "walk to class")]
    (chunk,) = [c for c in planner.chunks if c.start == 480]
    # the model's 5, 15, 10, 20, 10 (sum 60): 20 is clamped to 15, the missing 5 lengthens the last (10 -> 15)
    assert [(s.text, s.minutes) for s in chunk.steps] == [
        ("get out of bed", 5), ("shower", 15), ("dress", 10), ("breakfast", 15), ("read", 15)]
    assert [s.start for s in chunk.steps] == [480, 485, 500, 510, 525]
    assert planner.parse_failures == 1
    # the day's prompt has the summary, yesterday ("not recorded") and the 5-8 bounds
    prompt = world.recorder.requests[3].messages[-1].content
    assert "Eddy is a hard-working music student." in prompt and "not recorded" in prompt and "between 5 and 8 items" in prompt
    assert "Monday January 1, 2024" in prompt
    # remembered as a plan record
    (record,) = agent.components["memory.stream"].records
    assert record.kind == "plan" and record.text.startswith("Eddy's plan for Monday January 1, 2024: 1) wake up")
    # 17:00 is social media: active; the current action is the first of that chunk
    evening = world.ctx(agent, 9)
    assert run(planner.is_active(evening)) is True
    assert run(planner.current_action(evening)).text == "get out of bed"
    assert run(planner.status(evening)) == "Eddy is busy with: get out of bed"
    # 23:00 is after the last chunk (10 pm - 11 pm): asleep, inactive
    night = world.ctx(agent, 15)
    assert run(planner.current_action(night)) is None and run(planner.is_active(night)) is False
    assert run(planner.status(night)) == "Eddy is asleep"


def test_awake_rule():
    world, agent, planner = planner_world(GOOD, active_when="awake")
    assert run(planner.is_active(world.ctx(agent, 0))) is True and run(planner.is_active(world.ctx(agent, 15))) is False


def test_each_decomposed_chunk_sums_to_its_length_within_5_to_15_minutes():
    answers = dict(GOOD, **{"plan.actions": steps(*[(f"step {i}", 7 * i % 23 + 1) for i in range(9)])})
    world, agent, planner = planner_world(answers, active_when="awake")
    for r in range(16):
        run(planner.is_active(world.ctx(agent, r)))
    decomposed = [c for c in planner.chunks if c.steps is not None]
    assert len(decomposed) == 15  # 8:00 am to 10:00 pm, one chunk an hour
    for chunk in decomposed:
        assert sum(s.minutes for s in chunk.steps) == chunk.minutes == 60
        assert all(5 <= s.minutes <= 15 for s in chunk.steps)
        assert chunk.steps[0].start == chunk.start and chunk.steps[-1].end == chunk.end


def test_strokes_beyond_eight_are_cut_and_too_few_are_repaired_then_replaced():
    ten = plan(*[(f"{i + 6}:00", f"task {i}") for i in range(1, 11)])
    world, agent, planner = planner_world(dict(GOOD, **{"plan.day": ten}))
    failures = []
    world.llm.on_parse_failure = lambda request, answer, kind: failures.append(request.purpose)
    run(planner.ensure_day(world.ctx(agent, 0)))
    assert len(planner.strokes) == 8 and planner.source == "cut" and failures == ["plan.day"]
    assert (planner.strokes[-1].text, planner.strokes[-1].minute) == ("task 8", 14 * 60)

    three = plan(("7 am", "wake"), ("9 am", "work"), ("11 pm", "sleep"))
    world, agent, planner = planner_world(dict(GOOD, **{"plan.day": three, "plan.day.repair": STROKES}))
    run(planner.ensure_day(world.ctx(agent, 0)))
    assert len(planner.strokes) == 6 and planner.source == "llm"
    repair = world.recorder.requests[4]
    assert repair.purpose == "plan.day.repair" and "3 items; write between 5 and 8" in repair.messages[-1].content
    assert repair.json_schema["properties"]["plan"]["minItems"] == 5

    world, agent, planner = planner_world(dict(GOOD, **{"plan.day": three, "plan.day.repair": three}))
    run(planner.ensure_day(world.ctx(agent, 0)))
    assert planner.source == "fallback" and [s.text for s in planner.strokes] == list(FALLBACK_DAY)
    assert 5 <= len(planner.strokes) <= 8


def test_unreadable_hourly_schedule_falls_back_to_the_strokes():
    world, agent, planner = planner_world(dict(GOOD, **{"plan.hourly": "I will see how the day goes."}))
    run(planner.ensure_day(world.ctx(agent, 0)))
    assert planner.chunks[0].start == 420 and planner.chunks[0].text.startswith("wake up")
    assert any(c.text == "check social media" and c.start == 1020 for c in planner.chunks)
    assert planner.chunks[-1].end == 1440 and planner.parse_failures == 1


def test_summary_is_refreshed_once_per_simulated_day_with_yesterdays_plan():
    world, agent, planner = planner_world(GOOD)
    for r in (0, 1, 5, 14):  # Monday 08:00 .. 22:00
        run(planner.is_active(world.ctx(agent, r)))
    summary = agent.components["persona.context"]
    assert world.recorder.purposes().count("summary") == 3 and summary.refreshes == 1
    run(planner.is_active(world.ctx(agent, 24)))  # Tuesday 08:00
    assert world.recorder.purposes().count("summary") == 6 and summary.refreshes == 2
    # the new day's status is revised from memory first (the reference code's revise_identity)
    purposes = world.recorder.purposes()
    assert [p for p in purposes if p.startswith("summary.")] == ["summary.plan_note", "summary.feelings", "summary.status"]
    last_plan = len(purposes) - 1 - purposes[::-1].index("plan.day")
    assert purposes.index("summary.plan_note") > purposes.index("plan.actions") and purposes.index("summary.status") < last_plan
    day2 = [r for r in world.recorder.requests if r.purpose == "plan.day"][1].messages[-1].content
    assert "On Monday January 1, 2024, Eddy's plan was: 1) wake up and complete the morning routine at 7:00 am" in day2
    assert "Today is Tuesday January 2, 2024" in day2


def test_summary_recalls_each_aspect_and_falls_back_to_the_persona():
    world, agent, planner = planner_world(GOOD)
    memory = agent.components["memory.stream"]
    run(memory.remember(world.ctx(agent, 0), [MemoryRecord("Eddy's occupation: composing a piece for class")]))
    run(planner.describe(world.ctx(agent, 0)))
    prompts = [r.messages[-1].content for r in world.recorder.requests if r.purpose == "summary"]
    assert "current daily occupation" in prompts[1] and "1. Eddy's occupation: composing a piece for class" in prompts[1]

    world, agent, planner = planner_world(GOOD, memory=False)
    text = run(planner.describe(world.ctx(agent, 0)))
    prompts = [r.messages[-1].content for r in world.recorder.requests if r.purpose == "summary"]
    assert "1. Eddy is a music student.\n2. Eddy likes long walks." in prompts[0]
    assert text == "Name: Eddy\n" + "Eddy is a hard-working music student.\n" * 3 + "Eddy is a music student.\nEddy likes long walks."

    # no persona.context component (-p no:agent_summary): the seed alone, and no call
    world, agent, planner = planner_world(GOOD, summary=False)
    assert run(planner.describe(world.ctx(agent, 0))) == "Name: Eddy\nEddy is a music student.\nEddy likes long walks."
    assert world.recorder.purposes() == []


def test_react_no_keeps_the_plan_and_yes_replans_from_now():
    replan = hours(("2:00 pm", "walk to the park to meet Maria"), ("3:00 pm", "talk with Maria"), ("5:00 pm", "dinner"))
    answers = dict(GOOD, **{"react": "no", "react.context": "Maria is a friend.", "react.reaction": "walk to the park to meet Maria",
                            "plan.replan": replan})
    world, agent, planner = planner_world(answers, active_when="awake")
    ctx = world.ctx(agent, 6)  # 14:00
    run(planner.is_active(ctx))
    before = [c.to_dict() for c in planner.chunks]
    assert run(planner.react(ctx, "Maria posted that she is at the park", about="Maria")) is False
    assert [c.to_dict() for c in planner.chunks] == before
    context_prompt = [r for r in world.recorder.requests if r.purpose == "react"][0].messages[-1].content
    assert "Eddy's status: Eddy is busy with: get out of bed\n" in context_prompt

    answers["react"] = "Yes."
    world, agent, planner = planner_world(answers, active_when="awake")
    ctx = world.ctx(agent, 6)
    run(planner.is_active(ctx))
    before = [c.to_dict() for c in planner.chunks]
    assert run(planner.react(ctx, "Maria posted that she is at the park", about="Maria")) is True
    # the 1 pm chunk's actions that began before 2 pm stay; from 2 pm the re-plan
    assert [(c.start, c.end, c.text) for c in planner.chunks if c.start >= 780] == [
        (780, 840, "compose music"), (840, 900, "walk to the park to meet Maria"), (900, 960, "talk with Maria"),
        (960, 1020, "talk with Maria"), (1020, 1080, "dinner")]
    assert [c.to_dict() for c in planner.chunks if c.end <= 840] == [c for c in before if c["end"] <= 840]
    records = agent.components["memory.stream"].records
    assert records[-1].kind == "plan" and records[-1].meta["level"] == "reaction"
    assert records[-1].text == 'Eddy reacted to "Maria posted that she is at the park": walk to the park to meet Maria'
    assert planner.reactions[0]["reaction"] == "walk to the park to meet Maria"


def test_state_round_trips_through_json():
    world, agent, planner = planner_world(GOOD)
    run(planner.is_active(world.ctx(agent, 9)))
    state = json.loads(json.dumps(planner.get_state()))
    _, _, other = planner_world({})
    other.set_state(state)
    assert other.get_state() == planner.get_state()
    # a restored planner does not plan again the same day
    assert run(other.is_active(world.ctx(agent, 9))) is True


def test_config_checks_and_prompt_override(tmp_path):
    with pytest.raises(ValueError, match="fewest_strokes"):
        DayPlanConfig(fewest_strokes=9)
    with pytest.raises(ValueError, match="shortest_action"):
        DayPlanConfig(shortest_action=20)
    bad = tmp_path / "p.toml"
    bad.write_text('actions = "Split {chunk} please"\n')
    with pytest.raises(UsageError, match=r"p.toml: prompt 'actions' lacks the placeholder \{hi\}"):
        build_day_plan(DayPlanConfig(prompts_file=str(bad)), BuildContext(services=None, seed=0))


def test_registration():
    (spec,) = day_plan.townsquare_register_planners()
    assert (spec.name, spec.slot, spec.needs_llm) == ("day_plan", "planner", True)


# --------------------------------------------------------------------------- in a run


class PlanAware:
    """A test policy that prefers ``day_plan`` (as a generative-agents policy does) and posts
    what its agent is doing."""

    plugin_name = "plan_aware"

    class Policy:
        def __init__(self, config, ctx):
            self.seen = []

        async def step(self, ctx):
            planner = ctx.agent.components.get("planner")
            if not hasattr(planner, "current_action"):
                return []
            step = await planner.current_action(ctx)
            self.seen.append(step.text if step else None)
            return [Action(ctx.agent.id, "post", text=f"now: {step.text}")] if step else []

        def get_state(self):
            return {"seen": self.seen}

        def set_state(self, state):
            self.seen = list(state["seen"])

    @hookimpl
    def townsquare_register_policies(self):
        return [PolicySpec("plan_aware", self.Policy, uses={"planner": "day_plan"})]


RULES = (
    "[plugins.scripted]\nrules = { "
    f"\"plan for today in broad strokes, from waking\" = '{STROKES}', "
    f"\"hour by hour\" = '{hours(('8:00 am', 'read the news online'), ('9:00 am', 'browse social media'), ('10:00 am', 'walk'))}', "
    f"\"plans to: walk\" = '{steps(('walk in the park', 30), ('walk home', 30))}', "
    f"\"Break this into\" = '{steps(('open the laptop', 10), ('read posts online', 50))}' }}\n"
)


def test_day_plan_in_a_run_and_its_ablation(make_plugins, write_scenario, run_scenario):
    path = write_scenario(scenario_text(rounds=3, count=2, policy="plan_aware", llm=True, extra=RULES))
    run_dir, summary = run_scenario(path, plugins=make_plugins(PlanAware(), enable=["townsquare.testing.scripted"]))
    assert summary.rounds_completed == 3
    rows = {(r["scope"], r["slot"]): r["component"] for r in run_dir.read_manifest()["slot_table"]}
    assert rows[("users", "planner")] == "day_plan"
    _, state = run_dir.latest_checkpoint()
    agent_state = state["agents"][next(iter(state["agents"]))]
    components = agent_state.get("components", agent_state)
    planner = components["planner"]
    assert len(planner["strokes"]) == 6 and planner["source"] == "llm"
    # 08:00 and 09:00 are online (active: they post), 10:00 is a walk (inactive). The model's 10 and 50 minutes clamp
    # to 10, 15; two fillers of 5 make the 4 actions an hour needs (sum 35); the missing 25 lengthen them from the end
    posts = [row for row in read_table(run_dir.path, "actions") if "post" in row]
    assert len(posts) == 4 and all("now: open the laptop" in str(row) for row in posts)
    (eight, nine, ten) = [c for c in planner["chunks"] if c["steps"]]
    assert [(s["text"], s["minutes"]) for s in eight["steps"]] == [
        ("open the laptop", 15), ("read posts online", 15), ("read the news online", 15), ("read the news online", 15)]
    assert [s["start"] for s in nine["steps"]] == [540, 555, 570, 585] and ten["text"] == "walk"
    assert [(s["text"], s["minutes"]) for s in ten["steps"]] == [
        ("walk in the park", 15), ("walk home", 15), ("walk", 15), ("walk", 15)]

    # -p no:day_plan: the slot falls back to the highest-priority planner left and the run completes
    plugins = make_plugins(PlanAware(), enable=["townsquare.testing.scripted"], disable=["day_plan"])
    run_dir, summary = run_scenario(path, plugins=plugins)
    assert summary.rounds_completed == 3
    rows = {(r["scope"], r["slot"]): r["component"] for r in run_dir.read_manifest()["slot_table"]}
    assert rows[("users", "planner")] == "activity_plan"


def test_memory_tiers_without_the_whole_protocol_are_left_out():
    class Log:  # fills a memory slot but cannot recall
        async def remember(self, ctx, records):
            return list(records)

        def since(self, when):
            return []

        def get_state(self):
            return {}

        def set_state(self, state):
            pass

    world, agent, planner = planner_world(GOOD)
    agent.components["memory.short_term"] = Log()
    run(planner.is_active(world.ctx(agent, 0)))
    assert agent.components["memory.stream"].records[0].kind == "plan"


def test_prompts_built_from_memory_stay_bounded_however_much_is_remembered():
    answers = dict(GOOD, **{"react": "no", "react.context": "context"})
    world, agent, planner = planner_world(answers)
    memory = agent.components["memory.stream"]
    run(memory.remember(world.ctx(agent, 0), [MemoryRecord(f"Eddy's core characteristics note {i}: " + "x" * 300)
                                             for i in range(2000)]))
    run(planner.is_active(world.ctx(agent, 0)))
    run(planner.react(world.ctx(agent, 0), "Eddy's core characteristics are discussed online"))
    sizes = {r.purpose: len(r.messages[-1].content) for r in world.recorder.requests}
    template = max(len(t) for t in planner.prompts.values())
    assert sizes["summary"] <= 1200 + template and sizes["react.context"] <= 1200 + 100 + template
    assert sizes["plan.day"] < 3 * 1200 + template  # the summary's three parts are cut to memory_chars / 2 each
