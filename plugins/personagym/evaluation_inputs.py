"""Everything an evaluation reads and decides before its first LLM call, checked: the data
folder, the persona descriptions and static questions, the environments, how many personas
(one line when fewer exist than asked), and warnings about who grades whom.

A bad input is one line naming it (exit 2) before anything is written.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Sequence

from townsquare.api import UsageError
from townsquare.lib.data_paths import data_path

from . import benchmark_data as data_files
from .answer_parsing import match_environments


@dataclass
class Inputs:
    tasks: dict[str, Any]
    pool: list[str]
    environments_from: str
    descriptions: list[str] | None = None   # benchmark personas (the agents are built from them)
    static: list[dict[str, list[str]]] | None = None
    fixed: list[str] | None = None
    count: int = 0                           # personas evaluated
    notes: list[str] = field(default_factory=list)
    release: Any = None                      # the released folder (benchmark_data.Release), when --data
    given: Any = None                        # answers produced elsewhere (given_answers.GivenAnswers), --answers


def read_inputs(data: str | None, questions: str, persona_file: str | None, environments: int,
                named: Sequence[str] = ()) -> Inputs:
    """The files: tasks (rubrics), environments, persona descriptions, static questions."""
    folder = data_path(data) if data else None  # data:personagym -> the installed dataset
    if folder is not None and not folder.is_dir():
        raise UsageError(f"--data {data}: no such folder (the released PersonaGym data)")
    if questions == "benchmark" and folder is None:
        raise UsageError("--questions benchmark needs --data DIR (the released folder with questions_benchmark-v1/)")
    release = data_files.open_release(folder) if folder is not None else None
    tasks = release.tasks if release is not None else data_files.own_tasks()
    has_pool = folder is not None and (folder / "environments.json").is_file()
    pool = data_files.load_environments(folder if has_pool else None)
    if environments > len(pool):
        raise UsageError(f"--environments {environments}: the pool has only {len(pool)} environments")
    for name in named:
        if not match_environments([name], pool):
            close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5)
            raise UsageError(f"--environment {name!r}: not one of the {len(pool)} environments"
                             + (f" (did you mean: {', '.join(close)}?)" if close else ""))
    inputs = Inputs(tasks, pool, str(folder / "environments.json") if has_pool else "the released list bundled with townsquare",
                    fixed=match_environments(named, pool) or None, release=release)
    if persona_file == "benchmark" or (persona_file is None and questions == "benchmark"):
        if release is None:
            raise UsageError("the benchmark personas need --data DIR (the released folder with personas_benchmark.json)")
        inputs.descriptions = release.personas()
    elif persona_file is not None:
        inputs.descriptions = data_files.load_persona_descriptions(data_path(persona_file))
    if questions == "benchmark" and release is not None:
        inputs.static = []  # filled for the personas evaluated, once their number is known
    return inputs


def settle_count(inputs: Inputs, asked: int | None, available: int, what: str) -> None:
    """How many personas: ``asked`` (default all), at most what exists; one note when fewer
    exist than asked. Then the static questions of those personas."""
    inputs.count = available if asked is None else min(asked, available)
    if asked is not None and asked > available:
        inputs.notes.append(f"--personas {asked}: only {available} {what}; evaluating {available}")
    if inputs.static is not None and inputs.descriptions is not None and inputs.release is not None:
        bank = inputs.release.static_questions()
        for description in inputs.descriptions[:inputs.count]:
            found = data_files.static_questions_for(bank, description)
            if found is None:
                raise UsageError(f"no released questions for the persona {description[:70]!r} "
                                 f"(in {inputs.release.folder / data_files.QUESTIONS_FOLDER})")
            inputs.static.append(found)


def graded_by_itself(agent_models: Sequence[str], judges: Sequence[tuple[str, str]], generator: str) -> list[str]:
    """Warnings for each judge, and the generator, that is a model under test (``provider:model``
    of each design's agents): a model grading its own answers, or writing the questions it is
    then asked, favours itself."""
    under_test = set(agent_models)
    out = [f"judge {label} is {model}, the model under test: it grades its own answers (give --judge another model)"
           for label, model in judges if model in under_test]
    if generator in under_test:
        out.append(f"the question generator is {generator}, the model under test: it writes the questions it then answers "
                   "(give --generator another model)")
    return out
