"""The intervention slot (townsquare.interventions): a plugin's intervention acts at the rounds it
names, through the engine's seams; it is in the slot table, checkpointed, measured, resumed and
ablated with -p no:NAME; Rec-Strategy and Soc-Strategy are interventions."""

from __future__ import annotations

import json
import sqlite3
import types
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from helpers import scenario_text
from townsquare.api import Action, InterventionSpec, Persona, RunSeams, hookimpl
from townsquare.errors import ComponentError
from townsquare.launch.runner import resume_run


class AnnounceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    every: int = 2
    text: str = "the town hall is closed"


class Announce:
    """Posts ``text`` as an outside account every ``every`` rounds and renames users-0002 once."""

    def __init__(self, config: AnnounceConfig, ctx: Any):
        self.config = config
        self.posted = 0

    def acts_at(self, round: int) -> bool:
        return round % self.config.every == 0

    async def intervene(self, seams: RunSeams, round: int) -> None:
        if "desk" not in seams.agents and round == 0:
            await seams.platform.register_account("desk", "desk", "an outside account")
        result = await seams.apply(Action(agent_id="desk", kind="post", text=f"{self.config.text} ({round})",
                                          detail={"intervention": "announce"}), round)
        self.posted += int(result.ok)
        if round == 2:
            await seams.set_persona("users-0002", Persona(name="Renamed", sentences=["I moved away."]), round)

    async def measure(self, view: Any) -> dict[str, float]:
        return {"posted": float(self.posted)}

    def get_state(self) -> dict[str, Any]:
        return {"posted": self.posted}

    def set_state(self, state: dict[str, Any]) -> None:
        self.posted = int(state["posted"])


announce = types.ModuleType("announce")
announce.townsquare_register_interventions = hookimpl(
    lambda: [InterventionSpec("announce", Announce, config_model=AnnounceConfig, description="a test intervention")])


def _scenario(write_scenario, rounds: int = 5) -> Any:
    return write_scenario(scenario_text(rounds=rounds, count=3, top='interventions = ["announce"]',
                                        extra="[engine]\nkeep_checkpoints = 0\n"))


def _rows(run_dir, sql: str) -> list[tuple]:
    db = sqlite3.connect(run_dir.events_path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_an_intervention_acts_at_its_rounds_through_the_seams(write_scenario, run_scenario, make_plugins):
    run_dir, summary = run_scenario(_scenario(write_scenario), plugins=make_plugins(announce))
    assert summary.rounds_completed == 5
    posts = _rows(run_dir, "SELECT round, text FROM posts WHERE author_id = 'desk' ORDER BY round")
    assert posts == [(0, "the town hall is closed (0)"), (2, "the town hall is closed (2)"), (4, "the town hall is closed (4)")]
    # recorded as its round's first action, with the intervention named
    for r in (0, 2, 4):
        first = _rows(run_dir, f"SELECT agent_id, detail FROM actions WHERE round = {r} ORDER BY seq LIMIT 1")[0]
        assert first[0] == "desk" and json.loads(first[1]) == {"intervention": "announce"}
    assert dict(_rows(run_dir, "SELECT round, value FROM metrics WHERE name = 'announce.posted'")) == {0: 1, 1: 1, 2: 2, 3: 2, 4: 3}
    name, persona = _rows(run_dir, "SELECT name, persona FROM agents WHERE agent_id = 'users-0002'")[0]
    assert name == "Renamed" and json.loads(persona)["sentences"] == ["I moved away."]
    manifest = json.loads(run_dir.manifest_path.read_text())
    assert {"scope": "run", "slot": "intervention", "component": "announce", "plugin": "announce"} in manifest["slot_table"]


def test_an_intervention_is_checkpointed_and_resumed(write_scenario, run_scenario, make_plugins):
    plugins = make_plugins(announce)
    run_dir, _ = run_scenario(_scenario(write_scenario, rounds=3), plugins=plugins)
    _, summary = resume_run(run_dir.path, overrides=["rounds=5"], plugins=make_plugins(announce))
    assert summary.rounds_completed == 5
    assert dict(_rows(run_dir, "SELECT round, value FROM metrics WHERE name = 'announce.posted'"))[4] == 3


def test_disabling_the_plugin_ablates_the_intervention(write_scenario, run_scenario, make_plugins):
    run_dir, _ = run_scenario(_scenario(write_scenario), plugins=make_plugins(announce, disable=["announce"]))
    assert _rows(run_dir, "SELECT COUNT(*) FROM posts WHERE author_id = 'desk'") == [(0,)]
    assert not any(row["slot"] == "intervention" for row in json.loads(run_dir.manifest_path.read_text())["slot_table"])


def test_an_intervention_without_acts_at_is_refused_when_built(write_scenario, run_scenario, make_plugins):
    module = types.ModuleType("halfway")
    module.townsquare_register_interventions = hookimpl(lambda: [InterventionSpec("halfway", lambda config, ctx: object())])
    path = write_scenario(scenario_text(rounds=2, count=3, top='interventions = ["halfway"]'))
    with pytest.raises(ComponentError, match=r"halfway.*slot intervention lacks acts_at"):
        run_scenario(path, plugins=make_plugins(module))


def test_rec_and_soc_strategy_are_interventions_and_each_is_ablated_alone(write_scenario, run_scenario, make_plugins):
    from test_cocoon import SCENARIO

    from helpers import ROOT

    text = SCENARIO.format(rec="true", soc="true", users="paged", cocoon="", personas=ROOT / "examples" / "cocoon_personas.jsonl")
    path = write_scenario(text)
    for disabled, left in (([], {"rec_strategy", "soc_strategy"}), (["soc_strategy"], {"rec_strategy"}), (["rec_strategy"], {"soc_strategy"})):
        run_dir, _ = run_scenario(path, plugins=make_plugins(enable=["townsquare.testing.scripted"], disable=disabled))
        slots = json.loads(run_dir.manifest_path.read_text())["slot_table"]
        assert {row["component"] for row in slots if row["slot"] == "intervention"} == left
        measured = {name.split(".")[0] for (name,) in _rows(run_dir, "SELECT DISTINCT name FROM metrics")}
        assert measured & {"rec_strategy", "soc_strategy"} == left
