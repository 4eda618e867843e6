"""Every townsquare hook, in one module.

Three kinds, told apart by name (STYLE.md, convention 1):

* ``townsquare_register_*`` collect typed records (:mod:`townsquare.specs`) from every plugin.
  The plugin manager calls each implementation separately so it can stamp the plugin's name on
  its records and report clashes naming both plugins.
* ``townsquare_on_*`` notify observers and return nothing. Within one run they fire in this
  order (``tests/core/test_lifecycle_order.py`` asserts it)::

      on_run_start
      for each round:
          on_round_start
          on_llm_call*          (while agents step, in completion order)
          on_action_applied*    (in agent order, then in the order each policy returned them)
          on_round_end          (after metrics are stored, before the checkpoint is written)
      on_run_end

  A resumed run fires ``on_run_start`` again with ``RunInfo.start_round`` > 0.
* ``townsquare_register_commands`` adds click commands to the CLI;
  ``townsquare_report_run`` adds lines to what the CLI prints when a run has finished.

Hooks are called by keyword. An implementation takes only the arguments it needs and must not
give them default values (pluggy would silently not pass them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .markers import hookspec

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import click

    from .actions import Action, ActionResult
    from .lifecycle import RunInfo, RunSummary
    from .llm import LLMCallRecord
    from .turns import TurnsBackend
    from .specs import (
        EmbedderSpec, InterventionSpec, KnowledgeSourceSpec, LLMMiddlewareSpec, LLMProviderSpec, MemorySpec, MetricSpec,
        PersonaComponentSpec, PersonaSourceSpec, PlannerSpec, PlatformSpec, PolicySpec,
        RecommenderSpec, ReflectorSpec, ValidationDimensionSpec,
    )


# ---------------------------------------------------------------------------
# persona
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_persona_components() -> "list[PersonaComponentSpec]":
    """Register persona components: slot ``persona.context`` (what of a persona a prompt shows)
    and ``persona.knowledge`` (which outside knowledge an agent may use).

    Fires once when the plugin manager collects components. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_persona_components():
            return [PersonaComponentSpec("full_persona", FullPersona, persona_kind="context")]
    """


@hookspec
def townsquare_register_persona_sources() -> "list[PersonaSourceSpec]":
    """Register persona sources, which a population names with ``persona_source``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_persona_sources():
            return [PersonaSourceSpec("jsonl", JsonlPersonas, config_model=JsonlConfig)]
    """


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_memory() -> "list[MemorySpec]":
    """Register memory components: ``memory_kind`` sensory, short_term, long_term (RecAgent's
    pipeline), stream (Park et al.'s memory stream) or retrieval (a scoring function).

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_memory():
            return [MemorySpec("memory_stream", MemoryStream, memory_kind="stream", priority=100)]
    """


# ---------------------------------------------------------------------------
# planning and reflection
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_planners() -> "list[PlannerSpec]":
    """Register planners (slot ``planner``): Zhou et al.'s activity plan, Park et al.'s day plan.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_planners():
            return [PlannerSpec("activity_plan", ActivityPlanner, config_model=PlanConfig)]
    """


@hookspec
def townsquare_register_reflectors() -> "list[ReflectorSpec]":
    """Register reflectors (slot ``reflector``): importance-triggered reflection (Park), follow
    reflection every two simulated days (Zhou), insight generation (RecAgent).

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_reflectors():
            return [ReflectorSpec("follow_reflection", FollowReflection)]
    """


# ---------------------------------------------------------------------------
# action policy
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_policies() -> "list[PolicySpec]":
    """Register action policies (slot ``policy``): LLM prompts per action, the embedding
    baseline, a random policy.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_policies():
            return [PolicySpec("embedding_baseline", EmbeddingBaseline, config_model=BaselineConfig)]
    """


# ---------------------------------------------------------------------------
# recommender and platform
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_recommenders() -> "list[RecommenderSpec]":
    """Register recommenders, which a scenario names in ``[recommender] name = ...``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_recommenders():
            return [RecommenderSpec("chronological", Chronological)]
    """


@hookspec
def townsquare_register_platforms() -> "list[PlatformSpec]":
    """Register platforms, which a scenario names in ``[platform] name = ...``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_platforms():
            return [PlatformSpec("in_memory", InMemoryPlatform, config_model=InMemoryConfig)]
    """


# ---------------------------------------------------------------------------
# LLM, embeddings, knowledge, metrics, interventions, validation
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_llm_providers() -> "list[LLMProviderSpec]":
    """Register chat-completion backends, named in ``[llm] name = ...``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_llm_providers():
            return [LLMProviderSpec("openai", OpenAIProvider, config_model=OpenAIConfig)]
    """


@hookspec
def townsquare_register_llm_middleware() -> "list[LLMMiddlewareSpec]":
    """Register links of the chain around every LLM provider (response cache, budget,
    retries, concurrency limit). Every enabled middleware is used, ordered by ``order``;
    ``-p no:NAME`` takes one out. Settings come from ``[plugins.NAME]``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_llm_middleware():
            return [LLMMiddlewareSpec("retry", Retry, config_model=RetryConfig, order=30)]
    """


@hookspec
def townsquare_register_answer_priors() -> "list[townsquare.lib.answer_priors.AnswerPrior]":
    """Declare what a model typically answers to the purposes a design asks: the share of a
    decision's answers that act, a typical plan. ``townsquare estimate`` answers its dry run
    so, and nothing else reads them (:class:`townsquare.lib.answer_priors.AnswerPrior`).

    Fires once per estimate. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_answer_priors():
            return [AnswerPrior("like", shares={"like": 0.3}, note="our choice")]
    """


@hookspec
def townsquare_register_embedders() -> "list[EmbedderSpec]":
    """Register embedders, named in ``[embedder] name = ...``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_embedders():
            return [EmbedderSpec("hash", HashEmbedder, config_model=HashConfig)]
    """


@hookspec
def townsquare_register_knowledge_sources() -> "list[KnowledgeSourceSpec]":
    """Register external knowledge sources, named in ``[knowledge] name = ...``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_knowledge_sources():
            return [KnowledgeSourceSpec("hotpotqa", HotpotQAKnowledge, config_model=HotpotConfig)]
    """


@hookspec
def townsquare_register_metrics() -> "list[MetricSpec]":
    """Register metrics, listed in a scenario's ``metrics = [...]``.

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_metrics():
            return [MetricSpec("follower_gini", FollowerGini)]
    """


@hookspec
def townsquare_register_interventions() -> "list[InterventionSpec]":
    """Register interventions, listed in a scenario's ``interventions = [...]``
    (:mod:`townsquare.interventions`).

    Fires once when components are collected. Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_interventions():
            return [InterventionSpec("soc_strategy", build_soc_strategy, config_model=SocStrategyConfig)]
    """


@hookspec
def townsquare_register_validation_dimensions() -> "list[ValidationDimensionSpec]":
    """Register what ``townsquare validate`` compares between runs and a trace of real people
    (activity per user, ratings, cascade depth...): each factory builds a
    :class:`townsquare.lib.validation.Dimension`. Fires once when components are collected.
    Collects from every plugin.

    Example::

        @hookimpl
        def townsquare_register_validation_dimensions():
            return [ValidationDimensionSpec("session_length", SessionLength)]
    """


# ---------------------------------------------------------------------------
# lifecycle (observers)
# ---------------------------------------------------------------------------


@hookspec
def townsquare_on_run_start(run: "RunInfo") -> None:
    """A run (or a resumed run) is about to play its first round. Collects; returns nothing.

    Example::

        @hookimpl
        def townsquare_on_run_start(run):
            print("starting", run.name, "at round", run.start_round)
    """


@hookspec
def townsquare_on_round_start(run: "RunInfo", round: int, now: str) -> None:
    """A round begins; ``now`` is the simulated time (ISO 8601). Collects; returns nothing.
    Right after it, components that define ``on_round_start(round, now)`` are called with ``now``
    as a ``datetime`` (see :mod:`townsquare.slots`): a component needs no hook of its own.

    Example::

        @hookimpl
        def townsquare_on_round_start(round, now):
            log.info("round", round=round, now=now)
    """


@hookspec
def townsquare_on_llm_call(run: "RunInfo", call: "LLMCallRecord") -> None:
    """A provider call finished (successfully or not). Fires during agent steps, in completion
    order, for a run's calls only (the run's LLM journal tells it; the world an interview or an
    evaluation opens tells no hook). Collects; returns nothing.

    Example::

        @hookimpl
        def townsquare_on_llm_call(call):
            tokens[call.agent_id] += call.prompt_tokens + call.completion_tokens
    """


@hookspec
def townsquare_on_action_applied(run: "RunInfo", round: int, action: "Action", result: "ActionResult") -> None:
    """The platform answered one action. Fires in the deterministic apply order. Collects;
    returns nothing.

    Example::

        @hookimpl
        def townsquare_on_action_applied(action, result):
            if action.kind == "follow" and result.ok:
                edges.append((action.agent_id, action.target_agent))
    """


@hookspec
def townsquare_on_round_end(run: "RunInfo", round: int, now: str, metrics: "dict[str, float]") -> None:
    """A round's actions are applied and its metrics measured; the checkpoint follows.
    Collects; returns nothing.

    Example::

        @hookimpl
        def townsquare_on_round_end(round, metrics):
            print(round, metrics.get("followers.gini"))
    """


@hookspec
def townsquare_on_run_end(run: "RunInfo", summary: "RunSummary") -> None:
    """The run finished its last round or stopped cleanly (``summary.stopped`` says why).
    Collects; returns nothing.

    Example::

        @hookimpl
        def townsquare_on_run_end(summary):
            print(summary.actions, "actions")
    """


# ---------------------------------------------------------------------------
# Engine backends
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def townsquare_engine_backend(name: str) -> "TurnsBackend | None":
    """Where agents take their turns for ``[engine] backend = NAME`` (other than ``local``,
    the world's own agents): a :class:`~townsquare.turns.TurnsBackend`, whose ``connect(world)``
    runs before the run's world is built and whose ``start(world, connection)`` returns the
    run's :class:`~townsquare.turns.Turns`; or None when this plugin has no such backend.
    Stops at first non-None result. The built-in plugin ``scaleout`` answers ``ray``
    (:class:`townsquare.scaleout.ray_backend.RayBackend`); a backend needs only
    :mod:`townsquare.api` (``tests/core/test_turns_backend.py`` writes one on a thread pool).
    Import heavy libraries inside the implementation, so a run that does not ask for the
    backend does not pay for them.

    Example::

        @hookimpl
        def townsquare_engine_backend(name):
            if name == "threads":
                from .thread_turns import ThreadBackend
                return ThreadBackend()
    """


# ---------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------


@hookspec(firstresult=True)
def townsquare_resolve_data_references(data: "dict[str, Any]", source: str) -> Any:
    """Scenario ``data`` with every ``data:NAME/sub/path`` string replaced by that path in the
    installed dataset NAME, and the datasets it names (NAME -> what their install recorded) for
    the run's manifest: a pair, or None. Stops at first non-None result. The built-in plugin
    ``data`` answers (:func:`townsquare.lib.data_paths.resolve_data_references`); with no
    answer, a scenario that names a ``data:`` path is a one-line error.

    Example::

        @hookimpl
        def townsquare_resolve_data_references(data, source):
            return resolve_data_references(data, source), datasets_in(data)
    """


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


@hookspec
def townsquare_register_commands(cli: "click.Group") -> None:
    """Add commands to the ``townsquare`` CLI. Fires once when the CLI starts, after plugins
    load. Collects; returns nothing. Each plugin's implementation is called on its own: one that
    raises is reported and skipped like a plugin that fails to import, and the CLI goes on.
    Every command, a plugin's too, accepts ``-p`` and ``--strict-plugins``.

    Example::

        @hookimpl
        def townsquare_register_commands(cli):
            @cli.command()
            def hello():
                click.echo("hi")
    """


@hookspec
def townsquare_report_run(run_dir: "Path") -> "str | None":
    """A line for the summary the CLI prints after a run (``run``, ``resume``, ``branch``) has
    finished, below the counts, or None. ``run_dir`` is the run directory; read what you need
    from it (``events.sqlite`` read-only). Fires once per finished run, not for a stopped one.
    Collects every plugin's line, in plugin order; one that raises is reported and skipped.

    Example::

        @hookimpl
        def townsquare_report_run(run_dir):
            values = read_my_metric(run_dir / "events.sqlite")
            return f"my metric: {values['last']:.2f}" if values else None
    """


#: Used by the plugin manager to forward unknown hook kwargs checks and by the docs meta-test.
ALL_HOOKS: tuple[str, ...] = tuple(
    name for name, value in dict(globals()).items() if name.startswith("townsquare_") and callable(value)
)


def describe(name: str) -> dict[str, Any]:
    """A hook's name, kind and first docstring line (used by ``townsquare plugins``)."""
    func = globals()[name]
    kind = ("register" if name.startswith("townsquare_register_") else "observer" if name.startswith("townsquare_on_")
            else "report" if name.startswith("townsquare_report_") else "decision")
    return {"name": name, "kind": kind, "summary": (func.__doc__ or "").strip().splitlines()[0]}
