"""The designs an evaluation compares and the agents that answer for them.

A design is a scenario file or a run directory (``TARGET``): its populations' slots are the
agent design under test. Its agents answer in a simulation built in the design's folder (its
response cache ``llm_cache.sqlite`` and ``llm_calls`` rows ``events.sqlite``), behind the
scenario's middleware, so the same command again resumes a stopped evaluation or replays a
finished one.

Who answers:

* **benchmark personas** (``--persona-file``, or ``--questions benchmark``): the design's
  population is built from the descriptions (an ``inline`` persona source: each description is
  the persona's name and its one sentence), so every slot of the design (its
  ``persona.context`` above all) is filled from the benchmark persona, and nothing of the
  scenario's own personas is left. The agents start with the memory their build gives them;
  ``--with-run-memories`` lends each the memory slots (``memory.*``) of the run's agent at the
  same place, as the run left them. The other populations are built with one agent each
  (nothing of them is evaluated).
* **the design's own agents** otherwise: a scenario file's as built, a run directory's as the
  run left them (restored from its newest checkpoint, memory included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from townsquare.api import MEMORY_TIERS, UsageError, name_problem


@dataclass
class Target:
    """What ``TARGET`` resolved to: a scenario (and its source) or a run directory."""

    path: str
    scenario: Any
    plugins: Any
    run: Any = None            # RunDir for a run directory
    checkpoint: tuple[int, dict[str, Any]] | None = None
    resolve_with: Callable[[Sequence[str]], Any] = field(default=lambda overrides: None, repr=False)

    @property
    def label(self) -> str:
        """The design's name: the run folder's, or the scenario file's stem."""
        return Path(self.path).name if self.run is not None else Path(self.path).stem


def open_target(path: str, overrides: Sequence[str], plugin_options: Sequence[str], seed: int | None) -> Target:
    """A scenario file or a run directory; one line naming ``path`` when it is neither."""
    from townsquare.api.commands import load_plugins, load_run, load_scenario

    where = Path(path)
    if where.is_dir():
        run_dir, scenario, plugins = load_run(path, extra_plugin_options=plugin_options, overrides=overrides)
        checkpoint = run_dir.latest_checkpoint()
        if checkpoint is None:
            raise UsageError(f"{path}: the run has no checkpoint to rebuild its agents from")
        return Target(path, scenario, plugins, run_dir, checkpoint,
                      lambda more: load_run(path, plugins, overrides=[*overrides, *more])[1])
    if not where.is_file():
        raise UsageError(f"{path}: no such scenario file or run directory")
    plugins = load_plugins(plugin_options)
    scenario = load_scenario(path, list(overrides), plugins, seed=seed)
    return Target(path, scenario, plugins, None, None, lambda more: load_scenario(path, [*overrides, *more], plugins, seed=seed))


def settings_target(path: str, overrides: Sequence[str], plugin_options: Sequence[str]) -> Target:
    """The target of an evaluation of answers produced elsewhere (``path``: the first answer
    file): a scenario of LLM settings only (:func:`townsquare.api.commands.settings_scenario`),
    no ``[llm]`` of its own (every LLM is a ``--judge`` or ``--generator`` spec)."""
    from townsquare.api.commands import load_plugins, settings_scenario

    plugins = load_plugins(plugin_options)
    scenario, resolve = settings_scenario(overrides, plugins)
    return Target(path, scenario, plugins, resolve_with=resolve)


def population_index(target: Target, population: str | None) -> int:
    names = [p.config.name for p in target.scenario.populations]
    if population is None:
        return 0
    if population not in names:
        raise UsageError(f"--population {population}: no such population in {target.path} (populations: {', '.join(names)})")
    return names.index(population)


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


def persona_name(description: str, max_length: int) -> str:
    """A benchmark description as a persona name: the description itself, without what no
    name may hold (``/``, ``\\``, control characters), cut at ``max_length``."""
    name = "".join(ch for ch in description if ord(ch) >= 32 and ord(ch) != 127).replace("/", "-").replace("\\", "-").strip()
    name = name[:max_length].rstrip() or "persona"
    return name if name_problem(name, max_length) is None else "persona"


def persona_overrides(target: Target, index: int, descriptions: Sequence[str]) -> list[str]:
    """``--set`` overrides that build population ``index`` from ``descriptions`` (one agent
    each: name and sentence the description) and the other populations with one agent."""
    limit = target.scenario.model.limits.max_name_length
    items = ", ".join(f"{{name = {_toml_string(persona_name(d, limit))}, sentences = [{_toml_string(d)}]}}" for d in descriptions)
    out = [f'populations.{index}.personas={{name = "inline", items = [{items}]}}', f"populations.{index}.count={len(descriptions)}"]
    return out + [f"populations.{j}.count=1" for j in range(len(target.scenario.populations)) if j != index]


class Design:
    """One design's agents, built in ``folder`` (:class:`~townsquare.api.commands.EvalSimulation`),
    and those of them that answer."""

    def __init__(self, target: Target, folder: Path, *, population: str | None, descriptions: Sequence[str] | None,
                 with_run_memories: bool = False, llm_provider: Any = None, shared_budget: Any = None, dry_run: bool = False):
        from townsquare.api.commands import EvalSimulation

        self.target = target
        self.folder = folder
        self.index = population_index(target, population)
        self.descriptions = list(descriptions) if descriptions is not None else None
        self.with_run_memories = with_run_memories
        self.scenario = target.scenario if descriptions is None else target.resolve_with(persona_overrides(target, self.index, descriptions))
        self.evaluation = EvalSimulation(self.scenario, target.plugins, folder, llm_provider=llm_provider, shared_budget=shared_budget,
                                    dry_run=dry_run)

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def world(self) -> Any:
        """The design's open world (:class:`~townsquare.api.World`)."""
        return self.evaluation.world

    @property
    def round(self) -> int:
        return self.evaluation.round

    async def build(self, resume_command: str | None = None) -> None:
        checkpoint = self.target.checkpoint
        own = checkpoint is not None and self.descriptions is None
        lent = checkpoint is not None and not own and self.with_run_memories
        await self.evaluation.build(checkpoint[1] if own else None, checkpoint[0] + 1 if own or lent else 0, resume_command)
        if lent:
            self._lend_memories(checkpoint[1])
        if self.world.services.llm is None:
            raise UsageError(f"{self.target.scenario.source}: no [llm] to answer with (add one, or --llm PROVIDER[:MODEL])")

    def _lend_memories(self, state: dict[str, Any]) -> None:
        """Each evaluated agent gets the memory slots' state of the run's agent at its place."""
        saved = state.get("agents") or {}
        for agent in self.agents():
            components = (saved.get(agent.id) or {}).get("components") or {}
            for slot in MEMORY_TIERS:
                if slot in agent.components and slot in components:
                    agent.components[slot].set_state(components[slot])

    def agents(self) -> list[Any]:
        name = self.scenario.populations[self.index].config.name
        return [a for a in self.world.agents if a.population == name]

    def contexts(self, agents: Sequence[Any]) -> list[Any]:
        return [self.evaluation.context(a) for a in agents]

    def write_calls(self) -> dict[str, int]:
        """Write the ``llm_calls`` rows gathered so far; returns how many, by status."""
        return self.evaluation.write_calls()

    async def close(self) -> dict[str, int]:
        return await self.evaluation.aclose()
