"""The oracle's rules for Park et al.'s purposes, each on the prompt the design really sends
(filled from the design's own templates): what counts as news, importance, the day's status,
plans, places, talking, remembering a conversation, the day written again after one,
reflection, the §7.1 interviews."""

from __future__ import annotations

import asyncio
import json

from townsquare.llm import LLMRequest, Message
from townsquare.plugins.generative_agents.dialogue.conversation_memory import PLANNING_SCHEMA
from townsquare.plugins.generative_agents.dialogue.conversation_memory import REQUIRED as CONVERSATION_REQUIRED
from townsquare.plugins.generative_agents.planning.day_plan import REQUIRED as PLAN_REQUIRED
from townsquare.plugins.generative_agents.planning.schedule import plan_schema
from townsquare.plugins.generative_agents.policy.town_agent import REQUIRED as TOWN_REQUIRED
from townsquare.plugins.generative_agents.prompt_files import fill, load_prompts
from townsquare.testing.oracle import OracleLLM
from townsquare.testing.oracle.park import dates_in, news_in, window

PLANNING = load_prompts("planning", PLAN_REQUIRED)
TOWN = load_prompts("town", TOWN_REQUIRED)
SUMMARY = load_prompts("summary", {})
MEMORY = load_prompts("memory", {})
CONVERSATION = load_prompts("conversation", CONVERSATION_REQUIRED)
EVALUATION = load_prompts("evaluation", {})
PARTY = "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm."


def ask(prompt: str, purpose: str, **request) -> str:
    return asyncio.run(OracleLLM().complete(LLMRequest(messages=(Message("user", prompt),), purpose=purpose, **request))).text


def test_news_is_what_is_planned_or_announced_not_routine_or_curiosity():
    text = "\n".join([
        "Daily plan requirement: Isabella Rodriguez opens Hobbs Cafe at 8am everyday.",  # routine heading: not read
        f"Status: {PARTY} She is telling everyone she meets.",
        "3. Monday February 13, 10:00 am: John Lin is curious about who will be running for mayor.",  # curiosity
        "4. Monday February 13, 11:00 am: Sam Moore said to Ada: I am running for local mayor!",  # first person
    ])
    assert news_in(text) == [PARTY, "Sam Moore is running for local mayor!"]
    assert dates_in(PARTY) == [(2, 14)] and window(PARTY) == (17 * 60, 19 * 60)
    assert window("a party at 5 pm") == (17 * 60, 18 * 60) and window("the party, 5-7 pm") == (17 * 60, 19 * 60)


def test_importance_rates_events_and_plans_over_routine():
    def rate(kind, memory):
        return ask(fill(MEMORY["importance"], name="Maria Lopez", kind=kind, memory=memory), "importance",
                   labels=tuple(str(i) for i in range(1, 11)))

    assert rate("observation", "the piano is idle (Hobbs Cafe, cafe)") == "1"
    assert rate("observation", "the piano is being played (Hobbs Cafe, cafe)") == "2"
    assert rate("observation", "Klaus Mueller is at Hobbs Cafe, cafe, eating lunch") == "3"
    assert rate("chat", "Klaus Mueller said to Maria Lopez: Hi Maria, how are you?") == "4"
    assert rate("plan", "Maria Lopez's plan for Monday February 13, 2023: 1) wake up at 9:00 am") == "6"
    assert rate("chat", f"Isabella Rodriguez said to Maria Lopez: {PARTY}") == "8"
    assert rate("reflection", f"For Maria Lopez's planning: {PARTY}") == "9"


def test_the_days_status_keeps_yesterdays_and_adds_what_is_scheduled_today():
    statements = "\n".join([f"1. Monday February 13, 12:00 pm: Isabella Rodriguez said to Maria Lopez: {PARTY.replace('Isabella Rodriguez is', 'I am')}",
                            "2. Monday February 13, 1:00 pm: Klaus Mueller said to Maria Lopez: the exam is on February 20th at 9am."])
    note = ask(fill(SUMMARY["plan_note"], name="Maria Lopez", statements=statements, today="Tuesday February 14, 2023"),
               "summary.plan_note")
    assert note == f"Today Maria Lopez should remember: {PARTY}"  # the exam is another day
    assert ask(fill(SUMMARY["plan_note"], name="Maria Lopez", statements=statements, today="Monday February 13, 2023"),
               "summary.plan_note") == "Nothing in particular."
    status = ask(fill(SUMMARY["status"], name="Maria Lopez", yesterday_status="Maria Lopez studies physics.",
                      plan_note=note, feelings="fine", today="Tuesday February 14, 2023"), "summary.status")
    assert status == f"Maria Lopez studies physics. {note}"


def day_plan(status: str, today: str = "Tuesday February 14, 2023") -> list[tuple[str, str]]:
    summary = "\n".join(["Name: Klaus Mueller (age: 20)", f"Status: {status}",
                         "Lifestyle: Klaus Mueller goes to bed around 11pm, wakes up around 7am, eats dinner around 6pm.",
                         "Daily plan requirement: Klaus Mueller goes to the library at Oak Hill College at 9am."])
    prompt = fill(PLANNING["day_plan"], summary=summary, name="Klaus Mueller", today=today, yesterday_date="Monday",
                  yesterday="not recorded", fewest=5, most=8)
    answer = json.loads(ask(prompt, "plan.day", json_schema=plan_schema(5, 8)))
    return [(item["time"], item["activity"]) for item in answer["plan"]]


def test_a_day_plan_goes_to_an_event_the_prompt_schedules_today_at_its_time_and_place():
    plain = day_plan("Klaus Mueller is writing a paper.")
    assert plain == [("7:00 am", "wake up and complete the morning routine"),
                     ("9:00 am", "goes to the library at Oak Hill College at 9am"), ("6:00 pm", "have dinner"),
                     ("7:00 pm", "relax at home"), ("11:00 pm", "go to bed")]
    invited = day_plan(f"Klaus Mueller is writing a paper. Today Klaus Mueller should remember: {PARTY}")
    assert ("5:00 pm", "attend a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm") in invited
    assert ("7:00 pm", "go back home and relax") in invited and ("6:00 pm", "have dinner") not in invited
    assert day_plan(f"Klaus Mueller is writing a paper. {PARTY}", today="Monday February 13, 2023") == plain  # not today


def test_places_named_by_the_activity_then_home_then_staying():
    def sector(activity, here="Lin family's house, kitchen"):
        options = ["Lin family's house", "Oak Hill College", "Hobbs Cafe", "The Willows Market and Pharmacy"]
        prompt = fill(TOWN["sector"], summary="Name: Eddy Lin", name="Eddy Lin", home="Lin family's house, Eddy Lin's bedroom",
                      current=here, activity=activity, world="the Ville", options=", ".join(options))
        return ask(prompt, "town.sector", labels=tuple(options))

    assert sector("go to Oak Hill College, then eat at Hobbs Cafe") == "Oak Hill College"  # the first place named
    assert sector("buy medicine at the pharmacy") == "The Willows Market and Pharmacy"  # a word of its name
    assert sector("go to bed", here="Hobbs Cafe, cafe") == "Lin family's house"  # home things at home
    assert sector("read a book", here="Hobbs Cafe, cafe") == "Hobbs Cafe"  # else stay
    arenas = ["common room", "kitchen", "Eddy Lin's bedroom", "bathroom"]
    prompt = fill(TOWN["arena"], summary="", name="Eddy Lin", sector="Lin family's house", activity="have dinner",
                  options=", ".join(arenas))
    assert ask(prompt, "town.arena", labels=tuple(arenas)) == "kitchen"


def test_talking_shares_news_once_then_acknowledges_then_ends():
    def turn(me, other, history, status=""):
        prompt = (f"Name: {me}\nStatus: {status}\n\nIt is Monday February 13, 2023, 12:00 pm.\n{me}'s status: busy\n"
                  f"Observation: x\nSummary of relevant context from {me}'s memory:\n(nothing remembered)\n\n"
                  f"The conversation is about: lunch\nHere is the dialogue so far:\n{history or '(nothing has been said yet)'}\n\n"
                  f"What would {me} say next to {other}? Reply with one JSON object and nothing else:")
        return json.loads(ask(prompt, "dialogue.turn", json_schema={"type": "object"}))

    first = turn("Isabella Rodriguez", "Maria Lopez", "", status=PARTY)
    assert first == {"utterance": PARTY.replace("Isabella Rodriguez is", "I am"), "end": False}
    history = f"Isabella Rodriguez: {first['utterance']}"
    second = turn("Maria Lopez", "Isabella Rodriguez", history)
    assert second["utterance"].startswith("That sounds good, thank you for telling me about a Valentine's Day party")
    history += f"\nMaria Lopez: {second['utterance']}"
    third = turn("Isabella Rodriguez", "Maria Lopez", history, status=PARTY)
    assert third["end"] is True and "good to talk" in third["utterance"]
    # with nothing to say, a greeting first, never the same news twice
    assert turn("Maria Lopez", "Klaus Mueller", "")["utterance"] == "Hi Klaus, how are you?"


def test_a_conversation_leaves_a_note_for_planning_only_when_it_settled_something_dated():
    def notes(transcript):
        prompt = fill(CONVERSATION["planning"], name="Maria Lopez", other="Isabella Rodriguez", transcript=transcript)
        return json.loads(ask(prompt, "conversation.planning", json_schema=PLANNING_SCHEMA))

    told = f"Isabella Rodriguez: {PARTY.replace('Isabella Rodriguez is', 'I am')}\nMaria Lopez: That sounds good."
    assert notes(told) == {"notes": [PARTY]}
    assert notes("Isabella Rodriguez: Hi Maria, how are you?\nMaria Lopez: Fine, thanks.") == {"notes": []}


def test_after_a_conversation_the_rest_of_the_day_fits_in_what_it_settled_for_today():
    schedule = "\n".join(["7:00 am: wake up", "9:00 am: study at the library", "12:00 pm: talking with Isabella Rodriguez",
                          "1:00 pm: stream games in her room", "6:00 pm: have dinner", "8:00 pm: go to bed"])

    def rest(notes, today="Tuesday February 14, 2023"):
        prompt = fill(PLANNING["conversation"], summary="Name: Maria Lopez", name="Maria Lopez", today=today,
                      now="12:10 pm", schedule=schedule, other="Isabella Rodriguez", notes=notes)
        answer = json.loads(ask(prompt, "plan.conversation", json_schema={"type": "object"}))
        return [(e["time"], e["activity"]) for e in answer["schedule"]]

    kept = [("12:10 pm", "talking with Isabella Rodriguez"), ("1:00 pm", "stream games in her room"),
            ("6:00 pm", "have dinner"), ("8:00 pm", "go to bed")]
    assert rest(PARTY, today="Monday February 13, 2023") == kept  # the party is another day: the day stays
    assert rest(PARTY) == [("12:10 pm", "talking with Isabella Rodriguez"), ("1:00 pm", "stream games in her room"),
                           ("5:00 pm", "attend a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm"),
                           ("7:00 pm", "have dinner"), ("8:00 pm", "go to bed")]


def test_interviews_say_yes_to_what_the_prompt_tells():
    def knows(topic, memories, persona="Maria Lopez is a student."):
        prompt = fill(EVALUATION["knows_topic"], name="Maria Lopez", persona=persona, memories=memories, topic=topic)
        return ask(prompt, "eval.knows_topic", labels=("yes", "no"))

    relay = "- Klaus Mueller said to Maria Lopez: Have you heard? Isabella Rodriguez is planning a Valentine's Day party."
    assert knows("a Valentine's Day party", relay) == "yes"
    assert knows("a Valentine's Day party", "- Isabella Rodriguez is at Hobbs Cafe, cafe, decorating for the party") == "no"
    assert knows("a Valentine's Day party", "(nothing)", persona=PARTY) == "yes"  # the host's own seed
    assert knows("Sam Moore running for mayor", relay) == "no"

    def acquainted(memories, persona="Maria Lopez is a student."):
        prompt = fill(EVALUATION["knows_person"], name="Maria Lopez", persona=persona, memories=memories, other="Klaus Mueller")
        return ask(prompt, "eval.knows_person", labels=("yes", "no"))

    assert acquainted("- Maria Lopez talked with Klaus Mueller: a conversation catching up") == "yes"
    assert acquainted("(nothing)", persona="Maria Lopez lives in the dorm with Klaus Mueller.") == "yes"
    assert acquainted("- Klaus Mueller is at Oak Hill College, library, reading") == "no"  # seen is not known
    assert acquainted("- Maria Lopez lives in Dorm for Oak Hill College with Klaus Mueller.") == "yes"  # a seed memory


def test_the_oracle_reads_only_its_request():
    prompt = fill(MEMORY["importance"], name="Maria Lopez", kind="chat", memory=PARTY)
    answers = {OracleLLM(ctx=object()).complete(LLMRequest(messages=(Message("user", prompt),), purpose="importance",
                                                           labels=tuple(str(i) for i in range(1, 11))))
               for _ in range(3)}
    assert {asyncio.run(a).text for a in answers} == {"8"}
