"""The oracle's RecAgent rules read only the prompt: opinions found in it ("8/10", "4 out of 5")
move its answers; without them it does the least."""

from __future__ import annotations

import asyncio
import json

from townsquare.llm import LLMRequest, Message
from townsquare.testing.oracle import OracleLLM

SCORES = tuple(str(n) for n in range(1, 11))


def ask(prompt: str, purpose: str, **fields) -> str:
    request = LLMRequest(messages=(Message("user", prompt),), purpose=purpose, **fields)
    return asyncio.run(OracleLLM().complete(request)).text


def conformity_prompt(memory: str, previous: str = "none yet") -> str:
    return ("You are Ada. You enjoy Drama.\n\nWhat you remember about it:\n" + memory +
            f"\n\nAn interviewer asks about the movie <Silent Orbit 1> (Action: An action film.). Your score for it last time: {previous}.\n"
            "How would you score <Silent Orbit 1> now? Answer with one number.")


def test_conformity_leans_toward_the_opinions_in_memory():
    told = "- Bo posted to friends: My take on <Garden Orbit 5>: 2/10. My take on <Silent Orbit 1>: 9/10.\n- Cy watched <Silent Orbit 1> and rated it 3.5 out of 5."
    # the opinions of the movie: 9 and 7 (3.5 of 5), not Garden Orbit's 2; no last score: their mean, 8
    assert ask(conformity_prompt(told), "recagent.conformity", labels=SCORES) == "8"
    # a last score of 4: halfway to 8 is 6
    assert ask(conformity_prompt(told, "4/10"), "recagent.conformity", labels=SCORES) == "6"
    # nothing remembered: the last score stays; no last score either: 4, the genres miss the interests
    assert ask(conformity_prompt("- (nothing comes to mind)", "7/10"), "recagent.conformity", labels=SCORES) == "7"
    assert ask(conformity_prompt("- (nothing comes to mind)"), "recagent.conformity", labels=SCORES) == "4"


def frame(memory: str, instruction: str, profile: str = "You enjoy Action.") -> str:
    return f"You are Ada. {profile}\n\nMemories that matter here:\n{memory}\n\nSituation: It is Monday, 08:00 (round 1).\n\n{instruction}"


def test_sharing_its_own_opinion_once_then_browsing():
    watched = "- Ada watched <Silent Orbit 1> and rated it 3.5 out of 5."
    labels = ("recommender", "social", "nothing")
    assert ask(frame(watched, "What do you do now?"), "recagent.activity", labels=labels) == "social"
    shared = watched + "\n- Ada posted to friends: My take on <Silent Orbit 1>: 7/10."
    assert ask(frame(shared, "What do you do now?"), "recagent.activity", labels=labels) == "recommender"
    post = ask(frame(watched, "Write one message that all your friends will see, sharing your opinion of movies you watched or heard of: <Silent Orbit 1>."),
               "recagent.broadcast")
    assert post == "My take on <Silent Orbit 1>: 7/10."
    assert ask(frame(watched, "Do you start a private chat?"), "recagent.social", labels=("chat", "broadcast")) == "broadcast"
    chatty = frame(watched, "Do you start a private chat?", profile="You love private chats and trust your friends' recommendations.")
    assert ask(chatty, "recagent.social", labels=("chat", "broadcast")) == "chat"


def test_what_it_was_told_is_not_passed_on_as_its_own_take():
    heard = "- Bo posted to friends: My take on <Silent Orbit 1>: 9/10.\n- Ada chatted with Cy: [Cy]: I would give <Heat> 2/10. [Ada]: I would give <Alien> 8/10."
    labels = ("recommender", "social", "nothing")
    # Bo's 9 and Cy's 2 are theirs; Ada's own 8 for <Alien> she already said in the chat
    assert ask(frame(heard, "What do you do now?"), "recagent.activity", labels=labels) == "recommender"
    instruction = "Write one message that all your friends will see, sharing your opinion of movies you watched or heard of: <Silent Orbit 1>, <Heat>."
    assert ask(frame(heard, instruction), "recagent.broadcast") == ""


def test_conformity_counts_one_opinion_per_person():
    # Bo's post comes to mind twice (two tiers, two wordings): one opinion, 9; Cy's 3: the mean is 6, not 7
    told = ("- Bo posted to friends: My take on <Silent Orbit 1>: 9/10.\n- Bo posted to friends: <Silent Orbit 1>: 9/10, see it.\n"
            "- Cy watched <Silent Orbit 1> and rated it 1.5 out of 5.")
    assert ask(conformity_prompt(told), "recagent.conformity", labels=SCORES) == "6"
    # one more person with an opinion moves it
    assert ask(conformity_prompt(told + "\n- Di posted to friends: My take on <Silent Orbit 1>: 10/10."), "recagent.conformity", labels=SCORES) == "7"


def test_sensory_importance_follows_the_prompts_scale():
    def score(observation: str) -> int:
        prompt = f"Here is something Ada just experienced:\n\n{observation}\n\nFirst, rewrite it as one short sentence..."
        schema = {"type": "object", "properties": {"sentence": {"type": "string"}, "importance": {"type": "number"}}}
        answer = json.loads(ask(prompt, "recagent.sensory", json_schema=schema))
        assert answer["sentence"] == " ".join(observation.split())
        return answer["importance"]

    assert score("Ada watched <Heat> and felt: tense. Ada rated it 8/10.") == 8
    assert score("Bo posted to friends: My take on <Heat>: 6/10.") == 8
    assert score("Ada is recommended: <Heat>, <Alien>.") == 5
    assert score("Ada enters the recommender system.") == 2


def test_page_watches_what_was_heard_of_then_what_meets_the_interests():
    page = ("On your screen:\n1. <Paper Echo 3> (Drama): A drama film.\n2. <Silent Orbit 1> (Action): An action film.\n\n"
            "Movies you have heard about but not watched: {heard}\n\nPick one.")
    labels = ("watch 1", "watch 2", "next page", "search", "leave")
    assert ask(frame("- (nothing comes to mind)", page.format(heard="none"), "You enjoy Drama."), "recagent.page", labels=labels) == "watch 1"
    assert ask(frame("- (nothing comes to mind)", page.format(heard="<Silent Orbit 1>"), "You enjoy Drama."), "recagent.page", labels=labels) == "watch 2"
    assert ask(frame("- (nothing comes to mind)", page.format(heard="none"), "You enjoy Comedy."), "recagent.page", labels=labels) == "next page"


def test_judge_prefers_the_sequence_closer_to_the_history():
    prompt = ("Movies this person watched before:\n- <A> (Comedy)\n- <B> (Comedy|Romance)\n\nSequence A:\n- <C> (Drama)\n- <D> (Horror)\n\n"
              "Sequence B:\n- <E> (Comedy)\n- <F> (Romance)\n\nWhich sequence is more like the real person's?")
    assert ask(prompt, "recagent.judge", labels=("A", "B", "indistinguishable")) == "B"
    same = prompt.replace("<C> (Drama)", "<C> (Comedy)").replace("<D> (Horror)", "<D> (Romance)")
    assert ask(same, "recagent.judge", labels=("A", "B", "indistinguishable")) == "indistinguishable"
