"""Zhou et al.'s rich persona: schema, enrichment (LLM + repair + offline fallback), and the
personachat and synthetic persona sources."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import read_table
from townsquare.components import BuildContext, Services
from townsquare.errors import UsageError
from townsquare.llm import LLMClient, compose
from townsquare.persona import Persona
from townsquare.plugins.social_agent.persona import persona_schema as S
from townsquare.plugins.social_agent.persona.persona_enrichment import PURPOSE, enrich, offline_enrichment, third_person
from townsquare.plugins.social_agent.persona.personachat_personas import (
    PersonachatConfig, build_personachat, build_personachat_offline, read_personachat)
from townsquare.plugins.social_agent.prompts import load_prompts
from townsquare.plugins.social_agent.persona.synthetic import SyntheticConfig, SyntheticPersonas
from townsquare.testing.scripted import ScriptedConfig, ScriptedLLM

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "personachat_sample.csv"
MODULES = [
    "townsquare.testing.scripted",
    "townsquare.plugins.social_agent.persona.personachat_personas",
    "townsquare.plugins.social_agent.persona.synthetic",
    "townsquare.plugins.social_agent.persona.dynamic_persona",
]

RICH = {
    "name": "Theo Brandt", "age": 41, "gender": "Male", "nationality": "German", "personality": "Patient, Dry-humoured",
    "hobbies": "Puppy training, Motorbike restoration, Jazz records",
    S.HISTORY: "Theo has trained working dogs for ten years. He rebuilt a 1972 motorbike in his garage.",
    S.PREFERENCES: "Theo shares videos of his puppy learning tricks. He follows jazz record collectors.",
    S.KNOWLEDGE: "Theo knows dog obedience training well. He understands old motorbike engines.",
}


def scripted_client(rules: dict[str, str], failures: list | None = None) -> LLMClient:
    on_failure = (lambda request, answer, kind: failures.append((request.purpose, answer))) if failures is not None else None
    return LLMClient(compose(ScriptedLLM(ScriptedConfig(rules=rules)), []), model="scripted", on_parse_failure=on_failure)


# --------------------------------------------------------------------------- schema


def test_validate_rich_accepts_table4_and_normalises():
    value = dict(RICH, age="41", hobbies=["Puppy training", "Jazz records"], knowledge=["Knows dogs.", "Knows engines."])
    out = S.validate_rich(value)
    assert list(out) == list(S.RICH_KEYS)
    assert out["age"] == 41 and out["hobbies"] == "Puppy training, Jazz records"
    assert out["knowledge"] == "Knows dogs. Knows engines."


@pytest.mark.parametrize("change, message", [
    ({"age": "forty"}, '"age" must be an integer'),
    ({"age": 41.5}, '"age" must be an integer'),
    ({"age": True}, '"age" must be an integer'),
    ({"age": 400}, '"age" out of range'),
    ({"name": ""}, '"name" is empty'),
    ({"knowledge": 3}, '"knowledge" must be a non-empty string'),
    ({"mood": "fine"}, 'unknown key "mood"'),
])
def test_validate_rich_rejects(change, message):
    with pytest.raises(ValueError, match=message):
        S.validate_rich({**RICH, **change})
    with pytest.raises(ValueError, match='missing key "knowledge"'):
        S.validate_rich({k: v for k, v in RICH.items() if k != "knowledge"})


def test_items_basic_info_and_full_info():
    persona = Persona("Theo", ["I train my puppy."], dict(RICH))
    assert S.advanced_items(persona, S.HISTORY) == [
        "Theo has trained working dogs for ten years.", "He rebuilt a 1972 motorbike in his garage."]
    assert S.advanced_items(persona, S.KNOWLEDGE) == ["Theo knows dog obedience training well.", "He understands old motorbike engines."]
    assert S.advanced_items(Persona("x", [], {S.KNOWLEDGE: ["one", " ", "two"]}), S.KNOWLEDGE) == ["one", "two"]
    assert S.advanced_items(Persona("x"), S.HISTORY) == []
    with pytest.raises(ValueError):
        S.advanced_items(persona, "hobbies")
    assert S.basic_info(persona).splitlines() == [
        "Name: Theo Brandt", "Age: 41", "Gender: Male", "Nationality: German",
        "Personality: Patient, Dry-humoured", "Hobbies: Puppy training, Motorbike restoration, Jazz records"]
    full = S.full_info(persona).splitlines()
    assert full[6] == "Detailed historical behaviour information: " + RICH[S.HISTORY]
    assert full[8] == "Knowledge: " + RICH[S.KNOWLEDGE]
    # a plain persona shows its sentences, never a bare name
    assert S.full_info(Persona("Bo", ["I like jazz."])) == "Name: Bo\nAbout: I like jazz."
    assert S.knowledge_text(persona) == RICH[S.KNOWLEDGE]
    assert S.knowledge_text(Persona("Bo", ["I like jazz.", "I fix bikes."])) == "I like jazz. I fix bikes."


def test_split_sentences_keeps_abbreviations_and_quotes():
    assert S.split_sentences('She met Dr. Lee in 2010. He said "Go!" Then 3 dogs ran.') == [
        "She met Dr. Lee in 2010.", 'He said "Go!"', "Then 3 dogs ran."]


# --------------------------------------------------------------------------- enrichment


def test_prompt_is_ours_and_has_the_table4_keys():
    prompt = load_prompts("persona")["enrich"]
    assert "{sentences}" in prompt
    for key in S.RICH_KEYS:
        assert f'"{key}"' in prompt
    example = json.loads(prompt[prompt.index('{"name"'):].strip())
    assert S.validate_rich(example) == example  # the example obeys the schema it asks for
    assert "John" not in prompt  # not the paper's example


def test_enrich_uses_a_valid_answer():
    llm = scripted_client({"I train my puppy": json.dumps(RICH)})
    fields, ok = asyncio.run(enrich(llm, ["I train my puppy every morning."], load_prompts("persona")))
    assert ok and fields == S.validate_rich(RICH)


def test_enrich_repairs_once():
    failures: list = []
    bad = json.dumps({**RICH, "age": "about forty"})
    llm = scripted_client({"That was not valid": json.dumps(RICH), "I train my puppy": bad}, failures)
    fields, ok = asyncio.run(enrich(llm, ["I train my puppy every morning."], load_prompts("persona")))
    assert ok and fields["age"] == 41 and failures == []


def test_enrich_rejects_a_copy_of_the_prompt_example():
    """Gemma 3 270M (the offline model) answered with the prompt's example persona."""
    prompt = load_prompts("persona")["enrich"]
    example = json.loads(prompt[prompt.index('{"name"'):].strip())
    failures: list = []
    llm = scripted_client({"That was not valid .*copies the example": json.dumps(RICH), "I train my puppy": json.dumps(example)}, failures)
    fields, ok = asyncio.run(enrich(llm, ["I train my puppy every morning."], load_prompts("persona")))
    assert ok and fields["name"] == "Theo Brandt" and failures == []


def test_enrich_falls_back_offline_after_failed_repair():
    failures: list = []
    llm = scripted_client({}, failures)  # the scripted model answers {"name": "scripted", "age": "scripted", ...}
    sentences = ["I am 34 years old.", "I work as a night nurse.", "I like growing tomatoes on my balcony."]
    fields, ok = asyncio.run(enrich(llm, sentences, load_prompts("persona")))
    assert not ok and failures == [(PURPOSE, failures[0][1])]
    assert fields == offline_enrichment(sentences)


def test_offline_enrichment_is_deterministic_and_uses_the_sentences():
    sentences = ["I am 34 years old.", "I am a mother of two.", "I am from Canada.", "Knitting is my passion.",
                 "I like growing tomatoes on my balcony.", "I play chess online."]
    fields = offline_enrichment(sentences)
    assert fields == offline_enrichment(list(sentences)) == S.validate_rich(fields)
    first = fields["name"].split()[0]
    assert (fields["age"], fields["gender"], fields["nationality"]) == (34, "Female", "Canadian")
    assert fields["hobbies"] == "Knitting, Growing tomatoes on her balcony, Playing chess online"
    assert S.split_sentences(fields[S.HISTORY])[3:] == [
        "Knitting is her passion.", f"{first} likes growing tomatoes on her balcony.", f"{first} plays chess online."]
    assert f"{first} knows a good deal about knitting from personal experience." in fields[S.KNOWLEDGE]
    # nothing called an interest: no invented hobby
    plain = offline_enrichment(["I feel old.", "I had to have a transplant."])
    assert plain["hobbies"] == "Not stated" and S.validate_rich(plain) == plain
    assert S.validate_rich(offline_enrichment([]))["name"]


def test_third_person():
    assert third_person("I love my dog.", "Ana", "her") == "Ana loves her dog."
    assert third_person("I'm a nurse", "Ana", "her") == "Ana is a nurse."
    assert third_person("I watch movies when i relax.", "Bo", "his") == "Bo watches movies when Bo relaxes."
    assert third_person("My mom is visiting me.", "Bo", "his") == "His mom is visiting Bo."


# --------------------------------------------------------------------------- personachat source


def test_read_personachat_csv_columns_and_duplicates():
    both = read_personachat(str(SAMPLE), "both")
    # 3 rows x 2 users, the puppy persona appears twice
    assert len(both) == 5
    assert both[0] == ("I train my puppy every morning.", "I restore old motorbikes in my garage.", "Jazz records are my passion.")
    assert [p[0] for p in read_personachat(str(SAMPLE), "user 2")] == [
        "I am 34 years old.", "I train my puppy every morning.", "I love to hike in the mountains."]
    assert len(read_personachat(str(SAMPLE), "user 1")) == 3


def test_read_personachat_json_and_errors(tmp_path):
    good = tmp_path / "p.json"
    good.write_text(json.dumps([{"persona_id": 0, "sentences": ["I sing.", "I fish."], "splits": ["valid"]},
                                {"persona_id": 1, "sentences": ["I sing.", "I fish."]}, {"sentences": ["I row."]}]))
    assert read_personachat(str(good)) == (("I sing.", "I fish."), ("I row.",))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sentences": "I sing."}]')
    with pytest.raises(UsageError, match=r'bad.json: item 0: expected \{"sentences": \[strings\]\}'):
        read_personachat(str(bad))
    wrong = tmp_path / "w.csv"
    wrong.write_text("persona,other\nx,y\n")
    with pytest.raises(UsageError, match=r"w.csv: no column 'user 1 personas' \(columns: persona, other\)"):
        read_personachat(str(wrong))
    with pytest.raises(UsageError, match="no such Personachat file"):
        read_personachat(str(tmp_path / "missing.csv"))
    with pytest.raises(UsageError, match="expected a .csv"):
        read_personachat(str(good.with_suffix(".txt")))


def _ctx(llm=None, population="users"):
    return BuildContext(services=Services(platform=None, embedder=None, llm=llm), seed=0, base_dir=str(DATA), population=population)


def test_personachat_source_enriches_with_the_llm_and_attributes_calls():
    seen: list[str] = []

    class Recording(ScriptedLLM):
        async def complete(self, request):
            seen.append(request.agent_id)
            return await super().complete(request)

    llm = LLMClient(compose(Recording(ScriptedConfig(rules={"I train my puppy": json.dumps(RICH)})), []), model="scripted")
    source = build_personachat(PersonachatConfig(path="personachat_sample.csv"), _ctx(llm))
    personas = asyncio.run(source.load(7, np.random.default_rng(0)))
    assert [p.name for p in personas][:1] == ["Theo Brandt"] and personas[0].fields == S.validate_rich(RICH)
    assert personas[0].sentences == list(read_personachat(str(SAMPLE))[0])
    # 5 distinct personas enriched once each (one repair for each of the 4 the rules do not cover),
    # then reused cyclically
    assert sorted(set(seen)) == [f"persona:users:{k}" for k in range(5)]
    assert source.fallbacks == 4 and all(S.is_rich(p) for p in personas)
    assert personas[5].name == "Theo Brandt #2" and personas[5].fields == personas[0].fields
    assert source.get_state() == {"fallbacks": 4}


def test_personachat_shuffle_uses_the_generator():
    source = build_personachat_offline(PersonachatConfig(path="personachat_sample.csv", shuffle=True), _ctx())
    def draw(seed):
        return [p.sentences for p in asyncio.run(source.load(3, np.random.default_rng(seed)))]

    assert draw(5) == draw(5) != draw(6)


def test_personachat_without_llm_is_one_clear_line():
    with pytest.raises(UsageError, match="source 'personachat' enriches personas with the LLM .* but the run has no LLM"):
        build_personachat(PersonachatConfig(path="personachat_sample.csv"), _ctx())
    offline = build_personachat(PersonachatConfig(path="personachat_sample.csv", enrich=False), _ctx())
    personas = asyncio.run(offline.load(2, None))
    assert all(S.is_rich(p) for p in personas)
    with pytest.raises(UsageError, match="personachat_offline' never calls the LLM"):
        build_personachat_offline(PersonachatConfig(path="personachat_sample.csv", enrich=True), _ctx())
    with pytest.raises(UsageError, match='needs path = '):
        build_personachat(None, _ctx())


def test_personachat_in_a_run(write_scenario, run_scenario, make_plugins):
    scenario = write_scenario(f"""
name = "pc"
seed = 2
rounds = 1
[activity]
model = "always"
[llm]
name = "scripted"
rules = {{ 'I train my puppy' = '''{json.dumps(RICH)}''' }}
[[populations]]
name = "users"
count = 3
slots = {{ policy = "embedding_baseline" }}
personas = {{ name = "personachat", path = "{SAMPLE}", column = "user 1" }}
""")
    run_dir, summary = run_scenario(scenario, plugins=make_plugins(enable=MODULES, strict=False))
    agents = read_table(run_dir.path, "agents")
    persona = json.loads(agents[0][4])
    assert agents[0][3] == "Theo Brandt" and persona["fields"]["age"] == 41
    assert all(set(json.loads(a[4])["fields"]) == set(S.RICH_KEYS) for a in agents)
    calls = [(r[1], r[2], r[3], r[6]) for r in read_table(run_dir.path, "llm_calls") if r[3].startswith(PURPOSE)]
    assert (-1, "persona:users:0", PURPOSE, "ok") in calls
    # personas 1 and 2 fell back: answer, repair, parse_failure each
    assert sum(1 for c in calls if c[3] == "parse_failure") == 2 and len(calls) == 1 + 2 * 3


# --------------------------------------------------------------------------- synthetic source


def test_synthetic_personas_are_complete_varied_and_seeded():
    source = SyntheticPersonas()
    personas = source.load(200, np.random.default_rng(7))
    assert [p.fields for p in personas] == [p.fields for p in source.load(200, np.random.default_rng(7))]
    assert [p.name for p in personas] != [p.name for p in source.load(200, np.random.default_rng(8))]
    assert len({p.name for p in personas}) == 200
    for p in personas:
        assert S.validate_rich(p.fields) == p.fields
        assert p.fields["name"] in p.name
        for key in S.ADVANCED_KEYS:
            assert len(S.advanced_items(p, key)) >= 2
        # the advanced attributes talk about the persona's own hobbies
        assert len(p.sentences) >= 4
    assert len({p.fields["nationality"] for p in personas}) >= 12
    assert len({p.fields["hobbies"] for p in personas}) >= 150
    ages = [p.fields["age"] for p in personas]
    assert 18 <= min(ages) and max(ages) <= 75
    young = SyntheticPersonas(SyntheticConfig(min_age=20, max_age=22, min_hobbies=1, max_hobbies=1)).load(30, np.random.default_rng(0))
    assert {p.fields["age"] for p in young} <= {20, 21, 22}
    assert all("," not in p.fields["hobbies"] for p in young)


def test_synthetic_hobbies_match_attributes():
    from townsquare.plugins.social_agent.persona.persona_words import THEMES

    themes = {t.hobby: t for t in THEMES}
    for p in SyntheticPersonas().load(50, np.random.default_rng(1)):
        first = p.fields["name"].split()[0]
        for hobby in p.fields["hobbies"].split(", "):
            theme = themes[hobby]
            assert theme.statement in p.sentences
            known = {k.format(name=first, pos="her", pron="she", city="", years=0)[:25] for k in theme.knowledge}
            known |= {k.format(name=first, pos="his", pron="he", city="", years=0)[:25] for k in theme.knowledge}
            known |= {k.format(name=first, pos="their", pron="they", city="", years=0)[:25] for k in theme.knowledge}
            assert any(item[:25] in known for item in S.advanced_items(p, S.KNOWLEDGE))


def test_synthetic_in_a_run(write_scenario, run_scenario, make_plugins):
    scenario = write_scenario("""
name = "syn"
rounds = 1
[[populations]]
name = "crowd"
count = 40
slots = { policy = "embedding_baseline" }
personas = { name = "synthetic", nonbinary_share = 0.5 }
""")
    run_dir, _ = run_scenario(scenario, plugins=make_plugins(enable=MODULES, strict=False))
    agents = read_table(run_dir.path, "agents")
    assert len(agents) == 40 and len({a[3] for a in agents}) == 40
    genders = [json.loads(a[4])["fields"]["gender"] for a in agents]
    assert 10 <= genders.count("Non-binary") <= 30


def test_prompts_file_replaces_the_enrichment_prompt(tmp_path):
    (tmp_path / "mine.toml").write_text('enrich = "Profile wanted for: {sentences}"\n')
    llm = scripted_client({"^Profile wanted for: I train my puppy": json.dumps(RICH)})
    ctx = BuildContext(services=Services(platform=None, embedder=None, llm=llm), seed=0, base_dir=str(tmp_path), population="u")
    source = build_personachat(PersonachatConfig(path=str(SAMPLE), prompts_file="mine.toml", column="user 1"), ctx)
    personas = asyncio.run(source.load(1, None))
    assert personas[0].fields["name"] == "Theo Brandt" and source.fallbacks == 0
    (tmp_path / "bad.toml").write_text('enrichment = "x"\n')
    with pytest.raises(UsageError, match="unknown prompt 'enrichment'"):
        build_personachat(PersonachatConfig(path=str(SAMPLE), prompts_file="bad.toml"), ctx)


def test_sources_state_round_trips():
    for source in (SyntheticPersonas(), build_personachat_offline(PersonachatConfig(path="personachat_sample.csv"), _ctx())):
        state = json.loads(json.dumps(source.get_state()))
        source.set_state(state)
        assert source.get_state() == state
