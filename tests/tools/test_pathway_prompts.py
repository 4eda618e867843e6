"""tools/pathway_prompts.py: the decision points it keeps from an oracle run are the prompts the
study's pathway goes through, with what the oracle read in them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import pathway_prompts  # noqa: E402
from townsquare.plugins.pathways.pathways_command import load_points  # noqa: E402

BASE = ROOT / "tests" / "data" / "smallville" / "base_party"


def party_scenario(tmp_path: Path) -> Path:
    """examples/valentines.toml on the six-agent fixture base, hourly rounds (as test_park_party's)."""
    text = (ROOT / "examples" / "valentines.toml").read_text()
    text = text.replace("data:smallville-n25", str(BASE)).replace("rounds = 148", "rounds = 37").replace("count = 25", "count = 6")
    text = text.replace("minutes_per_round = 15 ", "minutes_per_round = 60 ").split("[populations.personas.currently]")[0]
    path = tmp_path / "party.toml"
    path.write_text(text)
    return path


def test_party_points_are_dated_news_and_relays_with_their_details(tmp_path):
    data = pathway_prompts.make("party", 50, scenario=party_scenario(tmp_path))
    kinds = {d: [p for p in data["prompts"] if p["disposition"] == d] for d in ("llm.news_importance", "llm.relay_fidelity")}
    assert kinds["llm.news_importance"] and kinds["llm.relay_fidelity"]
    for p in kinds["llm.news_importance"]:
        memory = p["reference"]["memory"]
        assert p["purpose"] == "importance" and "party" in memory.lower() and re.search(r"\d", memory)
        assert not memory.startswith("For ") and p["oracle_answer"] == "8"  # the default news importance
    for p in kinds["llm.relay_fidelity"]:
        said = json.loads(p["oracle_answer"])["utterance"]
        ref = p["reference"]
        assert p["purpose"] == "dialogue.turn" and said.startswith("Have you heard? ")
        assert all(ref[k] in said and ref[k] in p["messages"][-1]["content"] for k in ("day", "time", "place"))
    # the fixture format loads as the command reads it
    path = tmp_path / "party.json"
    pathway_prompts.write(data, path)
    meta, points = load_points("party", path)
    assert len(points) == len(data["prompts"]) and meta["made_by"] == "python tools/pathway_prompts.py --study party"


PARTY = "Isabella Rodriguez is planning a Valentine's Day party at Hobbs Cafe on February 14th, 2023, from 5pm to 7pm."


def turn_request(me: str, status: str, memory: str):
    """A dialogue turn prompt in the shape of generative_agents' dialogue.toml ``turn``."""
    from townsquare.api import LLMRequest, Message

    prompt = (f"Name: {me}\nStatus: going about the day\n\nIt is Tuesday February 14, 2023, 5:30 pm.\n{me}'s status: {status}\n"
              f"Observation: Klaus Mueller is talking with {me}.\nSummary of relevant context from {me}'s memory:\n{memory}\n\n"
              f"The conversation is about: the evening\nHere is the dialogue so far:\n(nothing has been said yet)\n\n"
              f"What would {me} say next to Klaus Mueller? Reply with one JSON object and nothing else:")
    return LLMRequest((Message("user", prompt),), json_schema={"type": "object"}, purpose="dialogue.turn")


def test_a_relay_point_is_someone_elses_news_not_the_speakers_own_status():
    at_party = turn_request("Tom Moreno", f"Tom Moreno is busy with: attend {PARTY[len('Isabella Rodriguez is planning '):]}",
                            "1. Tom Moreno enjoyed talking with Jane Moreno")
    told = turn_request("Tom Moreno", "Tom Moreno is busy with: stock the shelves",
                        f"1. Isabella Rodriguez said to Tom Moreno: {PARTY.replace('Isabella Rodriguez is', 'I am')}")
    hosting = turn_request("Isabella Rodriguez", f"{PARTY[:-1]} (from 5:30 pm to 5:45 pm)", "1. Isabella Rodriguez decorated the cafe")
    points = pathway_prompts.party_points([(r, "", 1) for r in (at_party, told, hosting)], 10)
    assert [p["messages"] for p in points] == [[{"role": "user", "content": told.messages[0].content}]]
    assert points[0]["reference"] == {"news": PARTY, "event": "a Valentine's Day party", "day": "February 14th, 2023",
                                      "time": "5pm", "place": "Hobbs Cafe"}


def test_conformity_points_move_between_own_and_recalled(tmp_path):
    data = pathway_prompts.make("conformity", 30, overrides=["rounds=4"])
    assert data["prompts"]
    for p in data["prompts"]:
        ref, asked = p["reference"], p["messages"][-1]["content"]
        assert f"last time: {int(ref['own'])}/10" in asked and abs(ref["recalled"] - ref["own"]) >= 1
        # the oracle, at its default weight 0.5, answered halfway (rounded half to even)
        assert int(p["oracle_answer"]) == round((ref["own"] + ref["recalled"]) / 2)


def test_cocoon_points_put_an_uninteresting_item_first(tmp_path):
    data = pathway_prompts.make("cocoon", 30, overrides=["rounds=2", "populations.0.count=8"])
    assert data["prompts"]
    for p in data["prompts"]:
        ref = p["reference"]
        assert ref["top"] == 1 and ref["interests"] and 1 not in ref["interests"]
        assert p["oracle_answer"] == f"watch {ref['interests'][0]}"  # default follow_page 0: its interests


@pytest.mark.parametrize("most", [1, 3])
def test_spread_keeps_order_and_ends(most):
    items = [{"i": i} for i in range(10)]
    kept = pathway_prompts.spread(items, most)
    assert len(kept) == most and kept[0] == items[0] and (most == 1 or kept[-1] == items[-1])
