"""``townsquare eval personagym TARGET``: PersonaGym (Samuel et al.) over a scenario's agents
(as built) or a run's agents (as the run left them); see :mod:`.evaluation` for the steps,
:mod:`.agent_session` for how agents and LLMs are set up, :mod:`.results_files` for the output.

Every input is read and checked before anything is written: the target, the data folder, the
persona file, the judge and generator specs, the prompts file. A bad one is one line naming it,
exit status 2. An LLM failure that outlasts the retries stops the evaluation cleanly (exit 3):
the answers already paid for are in ``OUT/llm_cache.sqlite``, and the same command resumes.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from pathlib import Path
from typing import Any

import click

from townsquare.api import Persona, UsageError, data_path, load_prompts

from . import benchmark_data as data_files
from .answer_parsing import match_environments
from .benchmark_data import PROMPTS

REQUIRED = {
    "select_environments": frozenset({"persona", "environments"}),
    "generate_questions": frozenset({"persona", "environments", "task", "criteria", "count"}),
    "answer_system": frozenset({"persona"}),
    "answer": frozenset({"question", "memories"}),
    "score_examples": frozenset({"persona", "question", "rubric"}),
    "grade": frozenset({"title", "description", "criteria", "examples", "persona", "question", "response"}),
}
#: the paper gives no number of environments per persona: one keeps a persona at
#: 5 tasks x 10 questions, the size of the released benchmark-v1 set
DEFAULT_ENVIRONMENTS = 1


def _inputs(target: Any, data: str | None, questions: str, persona_file: str | None, personas: int | None,
            environments: int, named: tuple[str, ...] = ()) -> dict[str, Any]:
    """Everything read from files, checked."""
    folder = data_path(data) if data else None  # data:personagym -> the installed dataset
    if folder is not None and not folder.is_dir():
        raise UsageError(f"--data {data}: no such folder (the released PersonaGym data)")
    if questions == "benchmark" and folder is None:
        raise UsageError("--questions benchmark needs --data DIR (the released folder with questions_benchmark-v1/)")
    tasks = data_files.own_tasks()
    if folder is not None:
        tasks = data_files.released_tasks(folder, tasks)
    pool = data_files.load_environments(folder if folder is not None and (folder / "environments.json").is_file() else None)
    if environments > len(pool):
        raise UsageError(f"--environments {environments}: the pool has only {len(pool)} environments")
    fixed = match_environments(named, pool)
    for name in named:
        if not match_environments([name], pool):
            close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5)
            raise UsageError(f"--environment {name!r}: not one of the {len(pool)} environments"
                             + (f" (did you mean: {', '.join(close)}?)" if close else ""))
    descriptions: list[str] | None = None
    if persona_file == "benchmark" or (persona_file is None and questions == "benchmark"):
        if folder is None:
            raise UsageError("the benchmark personas need --data DIR (the released folder with personas_benchmark.json)")
        descriptions = data_files.load_persona_descriptions(folder / "personas_benchmark.json")
    elif persona_file is not None:
        descriptions = data_files.load_persona_descriptions(data_path(persona_file))
    static = None
    if questions == "benchmark" and folder is not None:
        bank = data_files.load_static_questions(folder)
        wanted = descriptions[:personas] if personas else descriptions
        static = []
        for description in wanted or []:
            found = data_files.static_questions_for(bank, description)
            if found is None:
                raise UsageError(f"no released questions for the persona {description[:70]!r} "
                                 f"(in {folder / data_files.QUESTIONS_FOLDER})")
            static.append(found)
    return {"tasks": tasks, "pool": pool, "descriptions": descriptions, "static": static, "fixed": fixed or None,
            "environments_from": str(folder / "environments.json") if folder is not None and (folder / "environments.json").is_file()
            else "the released list bundled with townsquare"}


def judge_labels(judges: tuple[str, ...]) -> list[str]:
    """One label per judge: its spec (``run`` for the run's LLM), numbered when repeated."""
    specs = list(judges) or ["run"]
    return [f"{spec}#{specs[:i].count(spec) + 1}" if specs.count(spec) > 1 else spec for i, spec in enumerate(specs)]


def _default_out(target_path: str, target: Any) -> Path:
    if target.run is not None:
        return Path(target_path) / "personagym"
    return Path("runs") / f"{target.scenario.model.name}-personagym"


async def _run(target: Any, out: Path, inputs: dict[str, Any], prompts: dict[str, str], *, personas: int | None,
               population: str | None, judges: tuple[str, ...], generator: str | None, environments: int,
               per_task: int) -> tuple[list[Any], dict[str, int]]:
    from .agent_session import Session
    from .evaluation import Judge, Subject, evaluate

    session = Session(target, out)
    try:
        await session.build()
        agents = session.sim.agents
        if population is not None:
            agents = [a for a in agents if a.population == population]
        descriptions = inputs["descriptions"]
        count = min(x for x in (personas, len(agents), len(descriptions) if descriptions else None) if x is not None)
        chosen = agents[:count]
        subjects = []
        for i, ctx in enumerate(session.contexts(chosen)):
            if descriptions is not None:
                # the persona under test is the description alone; the agent's components stay
                ctx.agent.persona = Persona(name=ctx.agent.persona.name, sentences=[descriptions[i]])
            description = ctx.agent.persona.text.strip() or ctx.agent.persona.name
            subjects.append(Subject(ctx, description, inputs["static"][i] if inputs["static"] else None))
        generator_llm = session.client(generator, f"personagym.generator:{generator or 'run'}")
        labels = judge_labels(judges)
        ensemble = [Judge(label, session.client(spec, f"personagym.judge.{label}"))
                    for label, spec in zip(labels, judges or (None,))]
        results = await evaluate(subjects, generator=generator_llm, judges=ensemble, prompts=prompts, tasks=inputs["tasks"],
                                 pool=inputs["pool"], environments=environments, per_task=per_task, fixed=inputs["fixed"])
        return results, session.counts
    finally:
        await session.close()


def cached_answers(folder: Path) -> int:
    """How many answers the evaluation's response cache holds."""
    import sqlite3

    path = folder / "llm_cache.sqlite"
    if not path.is_file():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def register(cli: Any) -> None:
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("personagym")
    @click.argument("target", metavar="SCENARIO_OR_RUN")
    @click.option("--personas", type=click.IntRange(min=1), default=None, help="Evaluate the first N agents (default all).")
    @click.option("--population", default=None, help="Only agents of this population.")
    @click.option("--persona-file", default=None, metavar="FILE|benchmark",
                  help="Give the agents these persona descriptions (JSON list of strings, or one a line); "
                       "'benchmark': the released personas_benchmark.json of --data.")
    @click.option("--data", type=click.Path(), default=None, help="The released PersonaGym folder (rubrics, questions, environments, personas).")
    @click.option("--questions", type=click.Choice(["generated", "benchmark"]), default="generated", show_default=True,
                  help="Generate questions (§3.2) or use the released static set (benchmark-v1, for comparison with the paper).")
    @click.option("--environments", type=click.IntRange(min=1), default=DEFAULT_ENVIRONMENTS, show_default=True,
                  help="Environments used per persona, of those the selector chooses.")
    @click.option("--environment", "named", multiple=True, metavar="NAME",
                  help="Use this environment of the pool instead of the selector's choice (repeatable).")
    @click.option("--questions-per-task", "per_task", type=click.IntRange(min=1), default=10, show_default=True,
                  help="Questions per task per environment (10 in the paper).")
    @click.option("--judge", "judges", multiple=True, metavar="PROVIDER[:MODEL]",
                  help="An evaluator LLM (repeat for an ensemble; the paper uses two); default: the run's LLM.")
    @click.option("--generator", default=None, metavar="PROVIDER[:MODEL]",
                  help="The LLM that selects environments, writes questions and score examples (default: the run's LLM).")
    @click.option("--llm", "llm_spec", default=None, metavar="PROVIDER[:MODEL]", help="The agents' LLM, as for run.")
    @click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False), default=None,
                  help="TOML file replacing some of the prompts (same keys and placeholders).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed (scenario files only).")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for the results, cache and LLM calls (default RUN/personagym, or runs/NAME-personagym).")
    @common_options
    def personagym(target: str, personas: int | None, population: str | None, persona_file: str | None, data: str | None,
                   questions: str, environments: int, named: tuple[str, ...], per_task: int, judges: tuple[str, ...], generator: str | None,
                   llm_spec: str | None, prompts_file: str | None, overrides: tuple[str, ...], seed: int | None,
                   out: str | None, plugin_options: tuple[str, ...] = (), **_: Any) -> None:
        """PersonaGym: environments, questions, the agents' answers, rubric grades by an
        ensemble of judges, and PersonaScore per agent (Samuel et al.)."""
        from townsquare.api import LLMFault, RunStopped

        from townsquare.api.commands import RunDir as Folder, llm_overrides

        from .agent_session import check_spec, open_target
        from .results_files import table, write

        started = time.monotonic()
        target_info = open_target(target, [*llm_overrides(llm_spec), *overrides], plugin_options, seed)
        for spec in judges:
            check_spec(target_info, spec, "--judge")
        if generator is not None:
            check_spec(target_info, generator, "--generator")
        if target_info.scenario.llm is None:
            raise UsageError(f"{target}: no [llm] to answer with (add one, or --llm PROVIDER[:MODEL])")
        populations = [p.config.name for p in target_info.scenario.populations]
        if population is not None and population not in populations:
            raise UsageError(f"--population {population}: no such population (populations: {', '.join(populations)})")
        inputs = _inputs(target_info, data, questions, persona_file, personas, environments, named)
        prompts = load_prompts(PROMPTS, "personagym", prompts_file, ".", required=REQUIRED)
        folder = Path(out) if out else _default_out(target, target_info)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {folder}: exists and is not a folder")
        if folder.is_dir() and (folder / "manifest.json").is_file():
            raise UsageError(f"--out {folder}: is a run directory; choose another folder for the evaluation")
        folder.mkdir(parents=True, exist_ok=True)
        with Folder(folder).lock():
            known = cached_answers(folder)
            try:
                results = asyncio.run(_run(target_info, folder, inputs, prompts, personas=personas, population=population,
                                              judges=judges, generator=generator, environments=environments, per_task=per_task))
            except KeyboardInterrupt:
                raise RunStopped(f"interrupted; run the same command again to resume from {folder / 'llm_cache.sqlite'}") from None
            except LLMFault as exc:
                raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}; "
                                 f"run the same command again to resume from {folder / 'llm_cache.sqlite'}") from None
            results, calls = results
            new = cached_answers(folder) - known
            source = ("the released static set (benchmark-v1)" if questions == "benchmark" else
                      f"generated: {per_task} per task per environment, "
                      + (f"environments {', '.join(inputs['fixed'])}" if inputs["fixed"] else f"{environments} environment(s) per persona"))
            info = {"target": str(target), "questions_source": questions, "questions": source,
                    "rubrics": sorted({t.source for t in inputs["tasks"].values()}), "environments_from": inputs["environments_from"],
                    "agent_llm": llm_spec or "run", "generator": generator or "run",
                    "llm_calls": calls, "new_answers": new, "wall_seconds": round(time.monotonic() - started, 1)}
            paths = write(folder, results, info, judge_labels(judges))
        click.echo(table(results))
        rubrics = " and ".join({"ours": "our own words", "released": "the released rubrics"}[r] for r in info["rubrics"])
        click.echo(f"questions: {source}; rubrics: {rubrics}; judges: {', '.join(judges) or 'the run LLM'}")
        click.echo(f"{sum(calls.values())} LLM calls ({', '.join(f'{k} {v}' for k, v in sorted(calls.items()))}), "
                   f"{new} answered by the model, {max(0, sum(calls.values()) - calls.get('parse_failure', 0) - calls.get('error', 0) - new)} "
                   f"from the cache; {info['wall_seconds']} s")
        failed = calls.get("parse_failure", 0)
        if failed:
            click.echo(f"note: {failed} answers could not be read even after a repair request (parse_failure rows)", err=True)
        click.echo(f"written to {paths[0]}, {paths[1].name}, {paths[2].name}")
