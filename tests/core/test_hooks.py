"""Every hook has a test here named test_hook_<hook name>, and a section in docs/hooks.md.

The two meta-tests at the top fail when a hook is added without either (datasette's rule).
"""

from __future__ import annotations

import re
import sys
import types

import click
import pytest
from click.testing import CliRunner

from helpers import ROOT, read_table, scenario_text
from townsquare import hookimpl, hookspecs
from townsquare.actions import Action
from townsquare.specs import (
    EmbedderSpec, InterventionSpec, KnowledgeSourceSpec, LLMProviderSpec, MemorySpec, MetricSpec, PersonaComponentSpec,
    PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec, RecommenderSpec, ReflectorSpec, ValidationDimensionSpec,
)


def test_every_hook_has_a_test():
    module = sys.modules[__name__]
    missing = [h for h in hookspecs.ALL_HOOKS if not hasattr(module, f"test_hook_{h}")]
    assert not missing, f"hooks without a test_hook_<name> test: {missing}"


def test_every_hook_is_documented():
    docs = (ROOT / "docs" / "hooks.md").read_text()
    documented = set(re.findall(r"^### (townsquare_\w+)", docs, re.MULTILINE))
    assert set(hookspecs.ALL_HOOKS) <= documented, f"missing from docs/hooks.md: {set(hookspecs.ALL_HOOKS) - documented}"
    assert documented <= set(hookspecs.ALL_HOOKS), f"docs/hooks.md documents unknown hooks: {documented - set(hookspecs.ALL_HOOKS)}"


def test_every_hook_is_typed_and_says_how_it_collects():
    for name in hookspecs.ALL_HOOKS:
        func = getattr(hookspecs, name)
        assert "return" in func.__annotations__, name
        doc = func.__doc__ or ""
        assert "Example::" in doc and ("Collects" in doc or "Stops at first non-None result" in doc), name


class _Thing:
    """A do-nothing component with state, good for any slot in a registry test."""

    def __init__(self, config=None, ctx=None):
        self.ctx = ctx

    def get_state(self):
        return {}

    def set_state(self, state):
        pass


def _registers(make_plugins, hook_name: str, spec):
    plugin = types.SimpleNamespace(**{hook_name: hookimpl(lambda: [spec])})
    plugin.plugin_name = f"test_{hook_name}"
    plugins = make_plugins(plugin)
    got = plugins.registry.get(spec.slot, spec.name)
    assert got is spec and got.plugin == f"test_{hook_name}"
    assert {"slot": spec.slot, "name": spec.name, "priority": spec.priority} in plugins.infos[got.plugin].components
    return plugins


def test_hook_townsquare_register_persona_components(make_plugins):
    _registers(make_plugins, "townsquare_register_persona_components", PersonaComponentSpec("x_ctx", _Thing, persona_kind="context"))
    _registers(make_plugins, "townsquare_register_persona_components", PersonaComponentSpec("x_kb", _Thing, persona_kind="knowledge"))


def test_hook_townsquare_register_persona_sources(make_plugins):
    _registers(make_plugins, "townsquare_register_persona_sources", PersonaSourceSpec("x_src", _Thing))


def test_hook_townsquare_register_memory(make_plugins):
    for kind in ("sensory", "short_term", "long_term", "stream", "retrieval"):
        spec = MemorySpec(f"x_{kind}", _Thing, memory_kind=kind)
        _registers(make_plugins, "townsquare_register_memory", spec)
        assert spec.slot == f"memory.{kind}"


def test_hook_townsquare_register_planners(make_plugins):
    _registers(make_plugins, "townsquare_register_planners", PlannerSpec("x_plan", _Thing))


def test_hook_townsquare_register_reflectors(make_plugins):
    _registers(make_plugins, "townsquare_register_reflectors", ReflectorSpec("x_reflect", _Thing))


def test_hook_townsquare_register_policies(make_plugins):
    _registers(make_plugins, "townsquare_register_policies", PolicySpec("x_policy", _Thing))


def test_hook_townsquare_register_recommenders(make_plugins):
    _registers(make_plugins, "townsquare_register_recommenders", RecommenderSpec("x_rec", _Thing))


def test_hook_townsquare_register_platforms(make_plugins):
    _registers(make_plugins, "townsquare_register_platforms", PlatformSpec("x_platform", _Thing))


def test_hook_townsquare_register_llm_providers(make_plugins):
    _registers(make_plugins, "townsquare_register_llm_providers", LLMProviderSpec("x_llm", _Thing))


def test_hook_townsquare_register_embedders(make_plugins):
    _registers(make_plugins, "townsquare_register_embedders", EmbedderSpec("x_embed", _Thing))


def test_hook_townsquare_register_knowledge_sources(make_plugins):
    _registers(make_plugins, "townsquare_register_knowledge_sources", KnowledgeSourceSpec("x_kb", _Thing))


def test_hook_townsquare_register_metrics(make_plugins, write_scenario, run_scenario):
    class Count(_Thing):
        async def measure(self, view):
            return {"seen": len(view.agents)}

    plugins = _registers(make_plugins, "townsquare_register_metrics", MetricSpec("x_count", Count, priority=1))
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=1, top='metrics = ["x_count"]')), plugins=plugins)
    assert read_table(run_dir.path, "metrics") == [(0, "x_count.seen", 3.0)]


def test_hook_townsquare_register_interventions(make_plugins, write_scenario, run_scenario):
    class Outside(_Thing):
        def acts_at(self, round):
            return round == 1

        async def intervene(self, seams, round):
            await seams.platform.register_account("outside", "outside", "not an agent")
            await seams.apply(Action(agent_id="outside", kind="post", text="hello from outside"), round)

    plugins = _registers(make_plugins, "townsquare_register_interventions", InterventionSpec("x_outside", Outside))
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=2, top='interventions = ["x_outside"]')), plugins=plugins)
    assert [(row[2], row[4]) for row in read_table(run_dir.path, "posts") if row[1] == "outside"] == [(1, "hello from outside")]


def test_hook_townsquare_register_validation_dimensions(make_plugins, write_scenario, run_scenario, tmp_path):
    """A third party's dimension is scored by validate beside the built-in ones, with its
    real value, replicates, distance and floor."""
    pytest.importorskip("powerlaw")
    from townsquare.lib.validation import Measurement
    from townsquare.plugins.validation.validate import validate_runs

    class PostsPerAuthor:
        unit, distance, label = "user", "relative_error", "mean events per user"

        def applies(self, trace):
            return None if len(trace) else "no events"

        def measure(self, trace, reference):
            counts = trace.events_per_user()
            return Measurement(value=float(counts.mean()), per_user=counts.astype(float))

    plugins = _registers(make_plugins, "townsquare_register_validation_dimensions",
                         ValidationDimensionSpec("x_events_per_user", lambda config, ctx: PostsPerAuthor()))
    runs = [run_scenario(write_scenario(scenario_text(rounds=2, count=3)), plugins=plugins, seed=s)[0].path for s in (1, 2)]
    found = validate_runs(runs, str(runs[0]), plugins, dimensions=["x_events_per_user"], splits=4)
    mine = found.result("x_events_per_user")
    assert mine.plugin == "test_townsquare_register_validation_dimensions" and len(mine.replicates) == 2
    assert mine.real == mine.replicates[0] and mine.distances[0] == 0  # the first run, scored against itself


class _Recorder:
    """An observer plugin that records every lifecycle hook call."""

    plugin_name = "recorder"

    def __init__(self):
        self.calls = []

    @hookimpl
    def townsquare_on_run_start(self, run):
        self.calls.append(("run_start", run.start_round))

    @hookimpl
    def townsquare_on_round_start(self, round, now):
        self.calls.append(("round_start", round, now))

    @hookimpl
    def townsquare_on_llm_call(self, call):
        self.calls.append(("llm_call", call.purpose, call.status))

    @hookimpl
    def townsquare_on_action_applied(self, round, action, result):
        self.calls.append(("action", round, action.kind, result.ok))

    @hookimpl
    def townsquare_on_round_end(self, round, metrics):
        self.calls.append(("round_end", round, sorted(metrics)))

    @hookimpl
    def townsquare_on_run_end(self, summary):
        self.calls.append(("run_end", summary.rounds_completed))


def _observed(make_plugins, write_scenario, run_scenario, **kwargs):
    recorder = _Recorder()
    plugins = make_plugins(recorder, enable=["townsquare.testing.scripted"])
    run_scenario(write_scenario(scenario_text(**kwargs)), plugins=plugins)
    return recorder.calls


def test_hook_townsquare_on_run_start(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=1)
    assert calls[0] == ("run_start", 0)


def test_hook_townsquare_on_round_start(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=2)
    assert [c for c in calls if c[0] == "round_start"] == [
        ("round_start", 0, "2024-01-01T08:00:00"), ("round_start", 1, "2024-01-01T09:00:00")]


def test_hook_townsquare_on_llm_call(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=2, policy="scripted_feed", llm=True)
    llm_calls = [c for c in calls if c[0] == "llm_call"]
    assert llm_calls and all(c[2] == "ok" for c in llm_calls)
    assert {c[1] for c in llm_calls} <= {"like", "like.repair", "post"}


def test_hook_townsquare_on_action_applied(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=2, policy="scripted_feed", llm=True)
    kinds = {c[2] for c in calls if c[0] == "action"}
    assert "browse" in kinds or "post" in kinds


def test_hook_townsquare_on_round_end(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=2)
    ends = [c for c in calls if c[0] == "round_end"]
    assert [c[1] for c in ends] == [0, 1]
    assert "activity.agents.active" in ends[0][2]


def test_hook_townsquare_on_run_end(make_plugins, write_scenario, run_scenario):
    calls = _observed(make_plugins, write_scenario, run_scenario, rounds=2)
    assert calls[-1] == ("run_end", 2)


def test_hook_townsquare_engine_backend(make_plugins, write_scenario, run_scenario):
    """A plugin's backend is asked to play the run named ``[engine] backend`` (here the thread
    workers of tests/thread_turns_support.py): it connects before the world is built, plays the
    turns, and the run finishes as usual."""
    from thread_turns_support import BACKEND, PLUGIN

    BACKEND.connected.clear()
    path = write_scenario(scenario_text(rounds=2, extra='[engine]\nbackend = "threads"\n'))
    _, summary = run_scenario(path, plugins=make_plugins(enable=[PLUGIN]))
    assert BACKEND.connected == ["threads"] and summary.rounds_completed == 2 and summary.actions > 0


def test_hook_townsquare_resolve_data_references(make_plugins, write_scenario, run_scenario):
    """The plugin that answers resolves a scenario's ``data:`` strings (the manifest keeps
    them as written) and names the datasets the manifest records."""
    class Resolver:
        plugin_name = "probe_datasets"

        @hookimpl
        def townsquare_resolve_data_references(self, data, source):
            return {**data, "name": "resolved-" + data["name"].rpartition("/")[2]}, {"probe": {"version": "1"}}

    path = write_scenario(scenario_text(rounds=1))
    run_dir, _ = run_scenario(path, plugins=make_plugins(Resolver(), disable=["data"]), overrides=["name=data:probe/t"])
    manifest = run_dir.read_manifest()
    assert manifest["name"] == "resolved-t" and manifest["scenario"]["name"] == "data:probe/t"
    assert manifest["datasets"] == {"probe": {"version": "1"}}


def test_hook_townsquare_register_commands(make_plugins):
    from townsquare.cli import build_cli

    class Commands:
        plugin_name = "hello_cmd"

        @hookimpl
        def townsquare_register_commands(self, cli):
            @cli.command()
            def hello():
                click.echo("hello from a plugin")

    plugins = make_plugins(Commands())
    cli = build_cli(plugins)
    plugins.hook.townsquare_register_commands(cli=cli)
    result = CliRunner().invoke(cli, ["hello"])
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"


def test_hook_townsquare_report_run(make_plugins, write_scenario, tmp_path):
    """A plugin's line under a finished run's summary; the kernel imports no plugin for it, so
    without the plugin (groundedness disabled too) there is no such line."""
    from townsquare.cli import build_cli

    class Summary:
        plugin_name = "summary_line"

        @hookimpl
        def townsquare_report_run(self, run_dir):
            return f"rows in {run_dir.name}: {len(read_table(run_dir, 'actions'))}"

    path = write_scenario(scenario_text(rounds=2))
    outputs = {}
    for label, plugins in (("with", make_plugins(Summary())), ("without", make_plugins(disable=["groundedness"]))):
        cli = build_cli(plugins)
        result = CliRunner().invoke(cli, ["run", str(path), "--out", str(tmp_path / label), "--quiet"], obj=plugins)
        assert result.exit_code == 0, result.output
        outputs[label] = result.output
    actions = len(read_table(tmp_path / "with", "actions"))
    assert f"rows in with: {actions}\n" in outputs["with"] and "groundedness:" in outputs["with"]
    assert "rows in" not in outputs["without"] and "groundedness:" not in outputs["without"]


def test_hook_townsquare_register_llm_middleware(make_plugins, write_scenario, run_scenario):
    from townsquare.specs import LLMMiddlewareSpec

    seen = []

    def link(tag):
        class Link:
            def __init__(self, config, ctx):
                pass

            async def __call__(self, request, call_next):
                seen.append(tag)
                return await call_next(request)

        return Link

    class Chain:
        plugin_name = "chain"

        @hookimpl
        def townsquare_register_llm_middleware(self):
            return [LLMMiddlewareSpec("inner", link("inner"), order=20), LLMMiddlewareSpec("outer", link("outer"), order=10)]

    plugins = make_plugins(Chain(), enable=["townsquare.testing.scripted"])
    extra = "[plugins.scripted]\npolicy_post_probability = 1.0\n"
    run_dir, _ = run_scenario(write_scenario(scenario_text(rounds=1, count=1, policy="scripted_feed", llm=True, extra=extra)), plugins=plugins)
    assert seen == ["outer", "inner"]
    rows = [r["component"] for r in run_dir.read_manifest()["slot_table"] if r["slot"] == "llm_middleware" and r["plugin"] == "chain"]
    assert rows == ["outer", "inner"]


def test_hook_townsquare_register_answer_priors(make_plugins):
    from townsquare.lib.answer_priors import AnswerPrior
    from townsquare.api.commands import answer_priors

    plugin = types.SimpleNamespace(townsquare_register_answer_priors=hookimpl(
        lambda: [AnswerPrior("x.decide", shares={"yes": 0.25}, note="a test")]))
    plugin.plugin_name = "test_priors"
    declared = {p.purpose: p for p in answer_priors(make_plugins(plugin))}
    assert declared["x.decide"].shares == {"yes": 0.25}
    assert "plan" in declared  # the built-in designs declare theirs through the same hook
