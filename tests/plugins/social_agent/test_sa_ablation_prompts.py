"""Ablation by toggling plugins (Zhou et al. appendix G): `-p no:dynamic_persona` and
`-p no:knowledge_boundary` run, the manifest names the fallback components, and the prompts the
model receives change as they should."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from helpers import ROOT
from townsquare import hookimpl
from townsquare.llm import LLMResponse
from townsquare.persona import Persona
from townsquare.plugins.social_agent.persona.persona_schema import ADVANCED_KEYS, advanced_items
from townsquare.specs import LLMProviderSpec

SCENARIO = f"""
name = "ablation-prompts"
seed = 4
rounds = 2
[llm]
name = "recorder"
[knowledge]
name = "hotpotqa"
path = "{ROOT / 'examples' / 'knowledge.json'}"
persist = false

[[populations]]
name = "initial"
count = 3
end_round = 1
activity = {{ model = "always" }}
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", planner = "none", reflector = "none", memory.short_term = "none" }}
config = {{ social_agent = {{ browse = false, initial_posts = 2 }} }}

[[populations]]
name = "regular"
count = 2
start_round = 1
activity = {{ model = "always" }}
personas = {{ name = "synthetic" }}
slots = {{ policy = "social_agent", planner = "none", reflector = "none" }}
config = {{ social_agent = {{ feed_size = 3, post_probability_without_plan = 0.0 }} }}
"""


class Recorder:
    """Test-only provider: answers every request plainly and keeps what it was asked."""

    name, model = "recorder", "recorder-test"

    def __init__(self, prompts):
        self.prompts = prompts

    async def complete(self, request):
        prompt = request.messages[-1].content
        self.prompts.append((request.agent_id, request.purpose, prompt))
        if request.labels:
            return LLMResponse(text=request.labels[-1])  # "no operation": nothing changes the feed
        if request.purpose == "topics":
            return LLMResponse(text='{"topics": ["Training a puppy with treats", "Planning a safe hiking route in the mountains"]}')
        return LLMResponse(text=f"post number {len(self.prompts)} about something new")


def run(make_plugins, write_scenario, run_scenario, disable=()):
    prompts = []

    class Plugin:
        plugin_name = "recorder_llm"

        @hookimpl
        def townsquare_register_llm_providers(self):
            return [LLMProviderSpec("recorder", lambda config, ctx: Recorder(prompts))]

    plugins = make_plugins(Plugin(), disable=list(disable))
    run_dir, _ = run_scenario(write_scenario(SCENARIO), plugins=plugins)
    rows = {(r["scope"], r["slot"]): r["component"] for r in run_dir.read_manifest()["slot_table"]}
    personas = {row[0]: Persona.from_dict(json.loads(row[4]))
                for row in sqlite3.connect(run_dir.events_path).execute("SELECT * FROM agents")}
    return prompts, rows, personas


#: what opens the knowledge in a post prompt (prompts/actions.toml, post_with_knowledge)
KNOWLEDGE = "You know the facts below"


def persona_section(prompt: str) -> str:
    return prompt.split("Persona information:", 1)[1].split("\n\nKnowledge:", 1)[0]


def test_without_persona_dynamic_prompts_carry_the_whole_persona(make_plugins, write_scenario, run_scenario):
    dynamic, rows, personas = run(make_plugins, write_scenario, run_scenario)
    full, full_rows, _ = run(make_plugins, write_scenario, run_scenario, disable=["dynamic_persona"])
    assert rows[("regular", "persona.context")] == "dynamic_persona"
    assert full_rows[("regular", "persona.context")] == "full_persona"

    def likes(prompts):
        return [(agent, persona_section(p)) for agent, purpose, p in prompts if purpose == "like"]

    assert likes(dynamic) and len(likes(dynamic)) == len(likes(full))
    for (agent, shown), (_, whole) in zip(likes(dynamic), likes(full)):
        items = [item for key in ADVANCED_KEYS for item in advanced_items(personas[agent], key)]
        # full persona: every item of every advanced attribute; dynamic: one item per attribute
        assert all(item in whole for item in items)
        assert sum(item in shown for item in items) == len(ADVANCED_KEYS) < len(items)


def test_without_knowledge_boundary_every_retrieved_item_is_used(make_plugins, write_scenario, run_scenario):
    bounded, rows, personas = run(make_plugins, write_scenario, run_scenario)
    unbounded, free_rows, _ = run(make_plugins, write_scenario, run_scenario, disable=["knowledge_boundary"])
    assert rows[("initial", "persona.knowledge")] == "knowledge_boundary"
    assert free_rows[("initial", "persona.knowledge")] == "unbounded_knowledge"

    def knowledge_counts(prompts):
        posts = [p for _, purpose, p in prompts if purpose == "post"]
        return [len(re.findall(r"Q: ", p.split(KNOWLEDGE, 1)[1])) if KNOWLEDGE in p else 0 for p in posts]

    kept, everything = knowledge_counts(bounded), knowledge_counts(unbounded)
    assert len(kept) == len(everything) == 6  # 3 initial agents x 2 posts, same topics in both runs
    assert everything == [3] * 6  # top k = 3 retrieved, all used
    assert all(k <= 3 for k in kept) and sum(kept) < sum(everything)  # T_k rejects some


def test_without_any_knowledge_component_posts_carry_none(make_plugins, write_scenario, run_scenario):
    prompts, rows, _ = run(make_plugins, write_scenario, run_scenario, disable=["knowledge_boundary", "unbounded_knowledge"])
    assert rows[("initial", "persona.knowledge")] == "no_knowledge"
    posts = [p for _, purpose, p in prompts if purpose == "post"]
    assert posts and not any(KNOWLEDGE in p for p in posts)
