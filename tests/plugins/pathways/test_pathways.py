"""``townsquare eval pathways``: the oracle's dispositions recovered from its answers at each
study's recorded decision points, the readers on known answers, the shipped prompts are the
designs' real prompts, and a model placed on a sweep's map."""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import pytest

from helpers import cli_in_process
from townsquare.api import LLMRequest, Message
from townsquare.plugins.pathways.dispositions import (
    DISPOSITIONS, DecisionPoint, keeps_details, measure, normal_cdf, read_relay, read_watch, rounded_slope,
)
from townsquare.plugins.pathways.pathways_command import FIXTURES, STUDIES, load_points
from townsquare.plugins.pathways.sweep_map import place

PLUGINS = Path(__file__).resolve().parents[3] / "plugins"


def pathways(capsys, tmp_path, study, *sets):
    args = ["eval", "pathways", study, "--llm", "oracle", "--json", "--out", str(tmp_path / "out")]
    for item in sets:
        args += ["--set", item]
    code, out, err = cli_in_process(capsys, *args)
    assert code == 0, err
    found = json.loads(out)
    assert json.loads((tmp_path / "out" / "pathways.json").read_text()) == found
    return {d["name"]: d for d in found["dispositions"]}


def within(found, value):
    low, high = found["interval"]
    return low - 1e-9 <= value <= high + 1e-9


def test_the_party_check_recovers_news_importance_and_relay_fidelity(capsys, tmp_path):
    found = pathways(capsys, tmp_path, "party", "llm.news_importance=6")
    importance, relay = found["llm.news_importance"], found["llm.relay_fidelity"]
    assert importance["value"] == 6 and within(importance, 6) and importance["used"] == importance["prompts"] >= 20
    assert relay["value"] == 1 and within(relay, 1.0) and relay["used"] == relay["prompts"] >= 10
    assert relay["interval"][0] < 1  # a share of n relays: Wilson's interval is not empty at 1


@pytest.mark.parametrize("importance", [3, 9])
def test_news_importance_as_set(capsys, tmp_path, importance):
    found = pathways(capsys, tmp_path, "party", f"llm.news_importance={importance}")["llm.news_importance"]
    assert found["value"] == importance and within(found, importance)


def realized(study, disposition, what, share):
    """The share of the study's prompts on which the oracle's own draw (a hash of the prompt,
    testing/oracle/dispositions.py) falls below ``share``: what it does on exactly these prompts."""
    from townsquare.testing.oracle.prompt_view import PromptView

    _, points = load_points(study)
    draws = [PromptView.of(p.request).draw(what) for p in points if p.disposition == disposition]
    return sum(d < share for d in draws) / len(draws)


@pytest.mark.parametrize("fidelity", [0.0, 0.25, 0.5, 0.75])
def test_relay_fidelity_as_set(capsys, tmp_path, fidelity):
    found = pathways(capsys, tmp_path, "party", f"llm.relay_fidelity={fidelity}")["llm.relay_fidelity"]
    # every relay read right: the measured share is the share the oracle kept on these prompts,
    # a sample of its setting (0 and 1 exactly; in between, n = 35 draws)
    assert found["value"] == pytest.approx(realized("party", "llm.relay_fidelity", "relay_fidelity", fidelity), abs=1e-6)
    assert found["aside"] == 0  # the bare relays still name the party
    if fidelity == 0.0:
        assert found["value"] == 0.0 and within(found, 0.0)


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 1.0])
def test_conformity_weight_as_set(capsys, tmp_path, weight):
    found = pathways(capsys, tmp_path, "conformity", f"llm.conformity_weight={weight}")["llm.conformity_weight"]
    assert within(found, weight) and abs(found["value"] - weight) < 0.1 and found["used"] >= 20


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_follow_page_as_set(capsys, tmp_path, share):
    found = pathways(capsys, tmp_path, "cocoon", f"llm.follow_page={share}")["llm.follow_page"]
    assert found["value"] == pytest.approx(realized("cocoon", "llm.follow_page", "follow_page", share), abs=1e-6)
    assert found["aside"] == 0 and found["used"] >= 20
    if share in (0.0, 1.0):
        assert found["value"] == share and within(found, share)


def test_estimate_counts_a_call_per_prompt_and_writes_nothing(capsys, tmp_path):
    _, points = load_points("party")
    code, out, err = cli_in_process(capsys, "eval", "pathways", "party", "--llm", "oracle", "--estimate", "--out", str(tmp_path / "o"))
    assert code == 0, err
    assert f"ESTIMATE: {len(points):,} LLM calls" in out and "importance" in out and "dialogue.turn" in out
    assert not (tmp_path / "o").exists()


def test_bad_inputs_are_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"prompts": [{"nothing": 1}]}')
    code, _, err = cli_in_process(capsys, "eval", "pathways", "party", "--llm", "oracle", "--prompts", str(bad))
    assert code == 2 and err.startswith("error: ") and "bad.json" in err and len(err.strip().splitlines()) == 1
    sweep = tmp_path / "sweep.json"
    sweep.write_text('{"points": 3}')
    code, _, err = cli_in_process(capsys, "eval", "pathways", "party", "--llm", "oracle", "--sweep", str(sweep), "--out", str(tmp_path / "o"))
    assert code == 2 and "not a sweep.json" in err


# --------------------------------------------------------------------------- the shipped prompts

TEMPLATES = {  # purpose -> (design, prompt file, key); a page is the frame around the page's instruction
    "importance": ("generative_agents", "memory.toml", "importance"),
    "dialogue.turn": ("generative_agents", "dialogue.toml", "turn"),
    "recagent.conformity": ("recagent", "studies.toml", "conformity"),
    "recagent.page": ("recagent", "policy.toml", "page"),
}


def template(purpose: str) -> str:
    design, name, key = TEMPLATES[purpose]
    prompts = tomllib.loads((PLUGINS / design / "prompts" / name).read_text())
    if purpose == "recagent.page":
        return prompts["frame"].replace("{instruction}", prompts["page"])
    return prompts[key]


def pattern(text: str) -> re.Pattern:
    """The template with every ``{placeholder}`` as any text (other braces are literal)."""
    parts = re.split(r"\{[a-z_]+\}", text)
    return re.compile(".*?".join(re.escape(p) for p in parts), re.S)


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_every_shipped_prompt_is_its_designs_template_filled_in(study):
    meta, points = load_points(study)
    assert meta["made_by"].startswith("python tools/pathway_prompts.py")
    assert {p.disposition for p in points} == set(STUDIES[study])
    for point in points:
        asked = point.request.messages[-1].content
        assert pattern(template(point.request.purpose)).fullmatch(asked), \
            f"{study}: a {point.request.purpose} prompt is not the current template: regenerate with python tools/pathway_prompts.py --study {study}"
    assert len({p.request.messages for p in points}) == len(points)  # no prompt twice


def test_relay_prompts_hold_the_news_they_could_pass_on():
    _, points = load_points("party")
    relays = [p for p in points if p.disposition == "llm.relay_fidelity"]
    assert len(relays) >= 10
    for point in relays:
        ref = point.reference
        said = point.request.messages[-1].content
        speaker = re.search(r"What would (.+?) say next to", said).group(1)
        held, dialogue = said.split("\nThe conversation is about:")[0], said.split("\nHere is the dialogue so far:")[1]
        # the speaker holds the news with its details, before the dialogue, and the dialogue has not had it
        assert ref["place"] in held and ref["day"] in held and ref["time"] in held
        assert ref["news"].rstrip(".") not in dialogue
        # someone else's news: neither the speaker's own plans nor its status line ("Tom Moreno's status: ...")
        assert not re.match(rf"{re.escape(speaker)}(?: |'s\b)", ref["news"])


# --------------------------------------------------------------------------- readers


def party_point(**reference):
    return DecisionPoint("party", "llm.relay_fidelity", LLMRequest((Message("user", "x"),), purpose="dialogue.turn"),
                         reference={"event": "a Valentine's Day party", "place": "Hobbs Cafe", **reference})


@pytest.mark.parametrize("utterance,relay,kept", [
    ("Have you heard? Isabella is having a Valentine's Day party at Hobbs Cafe on February 14th from 5pm to 7pm.", True, True),
    ("Isabella's party is tomorrow at 5 p.m. at Hobbs Cafe, come!", True, True),
    ("Have you heard? Isabella Rodriguez is planning a Valentine's Day party.", True, False),
    ("There is a party at Hobbs Cafe on Tuesday.", True, False),  # no time
    ("Nice weather today, isn't it?", False, None),
])
def test_a_relay_keeps_the_details_when_it_says_day_time_and_place(utterance, relay, kept):
    found = read_relay(party_point(), {"utterance": utterance, "end": False})
    assert (found is not None) == relay and (found if relay else None) == kept


def test_details_one_by_one():
    assert keeps_details("at Hobbs Cafe, 5pm, Feb 14", "Hobbs Cafe") == {"day": True, "time": True, "place": True}
    assert keeps_details("the 14th at 17:00", "Hobbs Cafe") == {"day": True, "time": True, "place": False}
    assert keeps_details("Valentine's Day at the cafe", "Hobbs Cafe") == {"day": False, "time": False, "place": False}


def test_a_watch_is_from_the_page_or_from_the_interests():
    point = DecisionPoint("cocoon", "llm.follow_page", LLMRequest((Message("user", "x"),), purpose="recagent.page"), reference={"top": 1, "interests": [3, 4]})
    assert read_watch(point, "watch 1") is True and read_watch(point, "watch 4") is False
    assert read_watch(point, "watch 2") is None and read_watch(point, "leave") is None


def test_conformity_weight_of_rounded_scores():
    import numpy as np

    rng = np.random.default_rng(3)
    own = rng.integers(2, 9, 80).astype(float)
    recalled = np.clip(own + rng.choice([-3, -2.5, -2, -1.5, -1, 1, 1.5, 2, 2.5, 3], 80), 1, 10)
    # a rater without noise that rounds half to even, as the oracle does: the interval is the set
    # of weights its answers allow (at 0, |w| < 1/6: no step of 3 or less moves a score), and it holds the weight
    for w in (0.0, 0.3, 0.7, 1.0):
        scores = [int(round(o + w * (r - o))) for o, r in zip(own, recalled)]
        found = rounded_slope(own, recalled, scores)
        assert found.low <= w <= found.high and found.high - found.low <= 0.34 and found.sd < 1e-3
    # with noise (sd 0.8) the estimate is near the truth and the interval holds it
    latent = own + 0.4 * (recalled - own) + rng.normal(0, 0.8, 80)
    noisy = rounded_slope(own, recalled, [int(np.clip(round(x), 1, 10)) for x in latent])
    assert noisy.low <= 0.4 <= noisy.high and abs(noisy.mean - 0.4) < 0.1 and 0.5 < noisy.sd < 1.2
    # answered at the ends of the scale: 10 means "10 or more", not 10
    assert rounded_slope([5.0, 5.0], [9.0, 9.0], [10, 10]).high >= 1.0
    # a rater that answers 1 whatever it recalls above its own score: the further w goes below 0,
    # the better it fits, so the answers bound w on neither side of the grid's low end
    away = rounded_slope([5.0, 6.0, 4.0], [8.0, 9.0, 7.0], [1, 1, 1])
    assert away.mean == -math.inf and away.low == -math.inf and away.high < 0
    points = [DecisionPoint("conformity", "llm.conformity_weight", LLMRequest((Message("user", str(i)),), purpose="recagent.conformity"),
                            reference={"own": 4, "recalled": r}) for i, r in enumerate([8, 2, 6])]
    measured = measure("llm.conformity_weight", points, ["6", "3", None])
    assert measured.unreadable == 1 and measured.used == 2 and measured.interval.low <= 0.5 <= measured.interval.high


def test_normal_cdf():
    from statistics import NormalDist

    for z in (-8.0, -1.96, -0.3, 0.0, 0.7, 1.96, 5.0):
        assert normal_cdf(z) == pytest.approx(NormalDist().cdf(z), abs=2e-7)


def test_every_disposition_is_an_oracle_setting():
    from townsquare.testing.oracle import OracleConfig

    assert {name.split(".", 1)[1] for name in DISPOSITIONS} <= set(OracleConfig.model_fields)
    assert {d for ds in STUDIES.values() for d in ds} == set(DISPOSITIONS)
    assert FIXTURES.is_dir()


# --------------------------------------------------------------------------- the sweep's map


def sweep_of(points, settings):
    return {"method": "grid", "settings": settings, "points": points}


def test_placed_on_a_one_setting_sweep_by_linear_interpolation():
    sweep = sweep_of([
        {"settings": {"llm.news_importance": 4}, "metric": "heard", "mean": 1.0, "interval": [1.0, 1.0]},
        {"settings": {"llm.news_importance": 8}, "metric": "heard", "mean": 11.0, "interval": [9.0, 13.0]},
    ], [{"key": "llm.news_importance", "values": [4, 8]}])
    (found,), notes = place(sweep, {"llm.news_importance": (5.0, 4.5, 7.0), "llm.relay_fidelity": (0.8, 0.6, 0.9)})
    assert found.mean == pytest.approx(3.5) and found.interval == pytest.approx((3.0, 4.0))
    assert found.span == pytest.approx((2.25, 8.5)) and not found.clamped
    assert notes == ["llm.relay_fidelity is measured but not swept: the sweep holds it at the scenario's value"]
    (outside,), _ = place(sweep, {"llm.news_importance": (9.5, 9.0, 10.0)})
    assert outside.mean == 11.0 and outside.clamped == ["llm.news_importance"]


def test_placed_on_a_two_setting_grid_bilinearly_and_per_unmeasured_setting():
    settings = [{"key": "llm.news_importance", "values": [4, 8]}, {"key": "llm.relay_fidelity", "values": [0.0, 1.0]},
                {"key": "platform.reshow", "values": [False, True]}]
    points = []
    for n in (4, 8):
        for f in (0.0, 1.0):
            for reshow in (False, True):
                value = n + 10 * f + (100 if reshow else 0)
                points.append({"settings": {"llm.news_importance": n, "llm.relay_fidelity": f, "platform.reshow": reshow},
                               "metric": "heard", "mean": value, "interval": [value - 1, value + 1]})
    found, _ = place(sweep_of(points, settings), {"llm.news_importance": (6.0, 6.0, 6.0), "llm.relay_fidelity": (0.5, 0.5, 0.5)})
    assert [(p.condition, p.mean) for p in found] == [({"platform.reshow": False}, pytest.approx(11.0)),
                                                      ({"platform.reshow": True}, pytest.approx(111.0))]
