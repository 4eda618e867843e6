"""``townsquare eval personagym TARGET [TARGET...]``: PersonaGym (Samuel et al.) over one agent
design or several compared (:mod:`.evaluation_run`), or over answers produced elsewhere
(``--answers FILE``, :mod:`.given_answers`), and ``townsquare eval personagym-grades``, which
reads human raters' grades back (:mod:`.raters`).

Every input is read and checked before anything is written: the targets, the data folder, the
persona file, the answer files, the judge and generator specs, the prompts file. A bad one is one line naming it,
exit status 2. ``--estimate`` runs the evaluation on stand-in models and prints its calls,
tokens and (with prices) cost per stage, calling no model. A budget or an LLM failure that
outlasts the retries stops the evaluation cleanly (exit 3), naming the command that resumes it;
the answers already paid for are in the response cache.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from townsquare.api import UsageError
from townsquare.lib.prompt_files import load_prompts

from .benchmark_data import PROMPTS

REQUIRED = {
    "select_environments": frozenset({"persona", "environments"}),
    "generate_questions": frozenset({"persona", "environments", "task", "criteria", "count"}),
    "answer_system": frozenset({"persona"}),
    "answer": frozenset({"question"}),
    "answer_with_memories": frozenset({"question", "memories"}),
    "example_request": frozenset({"persona", "question", "rubric"}),
    "score_examples": frozenset({"count", "requests"}),
    "rubric": frozenset({"title", "description", "criteria", "examples", "persona", "question", "response"}),
    "grade": frozenset({"count", "rubrics"}),
}
#: the paper gives no number of environments per persona: one keeps a persona at
#: 5 tasks x 10 questions, the size of the released benchmark-v1 set
DEFAULT_ENVIRONMENTS = 1

#: completion tokens a dry run assumes per call (our guesses; the output says so)
EXPECTED_TOKENS = {"personagym.environments": 60, "personagym.answer": 250}


def judge_labels(judges: tuple[str, ...]) -> list[str]:
    """One label per judge: its spec (``run`` for the run's LLM), numbered when repeated."""
    specs = list(judges) or ["run"]
    return [f"{spec}#{specs[:i].count(spec) + 1}" if specs.count(spec) > 1 else spec for i, spec in enumerate(specs)]


def unique_labels(labels: list[str]) -> list[str]:
    """The rows' names (designs, then answer files), numbered where one repeats."""
    return [f"{label}-{labels[:i].count(label) + 1}" if labels.count(label) > 1 else label for i, label in enumerate(labels)]


def _default_out(plan: Any) -> Path:
    if len(plan.labels) > 1:
        return Path("runs") / f"{'-vs-'.join(plan.labels)}-personagym"
    if not plan.targets:
        return Path("runs") / f"{plan.labels[0]}-personagym"
    if plan.targets[0].run is not None:
        return Path(plan.targets[0].path) / "personagym"
    return Path("runs") / f"{plan.targets[0].scenario.model.name}-personagym"


#: options that mean nothing with --answers (the personas and questions are the files'), and
#: those that mean nothing without a design beside them (no agent answers)
NOT_WITH_ANSWERS = {"persona_file": "--persona-file", "questions": "--questions", "named": "--environment",
                    "environments": "--environments"}
NOT_WITHOUT_DESIGNS = {"population": "--population", "with_run_memories": "--with-run-memories", "llm_spec": "--llm",
                       "seed": "--seed", "answer_tokens": "--answer-tokens"}


def refuse_options(ctx: Any, answers: tuple[str, ...], labels: tuple[str, ...], designs: int) -> None:
    """One line for an option given that does not apply with (or without) ``--answers``."""
    from click.core import ParameterSource

    if labels and not answers:
        raise UsageError("--label names an --answers file's row; give --answers FILE")
    if not answers:
        return
    given = {name for name in (*NOT_WITH_ANSWERS, *NOT_WITHOUT_DESIGNS)
             if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}
    for name, option in NOT_WITH_ANSWERS.items():
        if name in given:
            raise UsageError(f"{option}: does not apply with --answers (the personas and questions are the answer files')")
    for name, option in NOT_WITHOUT_DESIGNS.items():
        if name in given and not designs:
            raise UsageError(f"{option}: no agent answers with --answers alone (give a SCENARIO_OR_RUN to answer beside the files)")


def stage_of(purpose: str) -> str:
    """``personagym.grade.expected_action`` -> ``personagym.grade`` (repairs with their step)."""
    return ".".join(purpose.split(".")[:2])


def _plan(targets_in: tuple[str, ...], *, llm_spec: str | None, overrides: tuple[str, ...], plugin_options: tuple[str, ...],
          seed: int | None, personas: int | None, population: str | None, persona_file: str | None, data: str | None,
          questions: str, environments: int, named: tuple[str, ...], per_task: int, judges: tuple[str, ...],
          generator: str | None, prompts_file: str | None, with_run_memories: bool, settings: Any,
          answers: tuple[str, ...] = (), labels: tuple[str, ...] = ()) -> Any:
    from townsquare.api.commands import check_spec, llm_overrides

    from .agent_session import open_target, population_index, settings_target
    from .evaluation_inputs import read_inputs, settle_count
    from .evaluation_run import Plan
    from .given_answers import answer_labels

    if not targets_in and not answers:
        raise UsageError("nothing to evaluate: give SCENARIO_OR_RUN (designs whose agents answer) or --answers FILE "
                         "(answers produced elsewhere)")
    targets = [open_target(t, [*llm_overrides(llm_spec), *overrides], plugin_options, seed) for t in targets_in]
    base = targets[0] if targets else settings_target(answers[0], overrides, plugin_options)
    rows = unique_labels([*(t.label for t in targets), *answer_labels(answers, labels)])
    if len(rows) > 1 and not judges:
        raise UsageError(f"{len(rows)} designs: name the judges (--judge PROVIDER[:MODEL], repeatable); without one the "
                         f"first design's model would grade every design, its own answers included")
    if not targets and not judges:
        raise UsageError("--answers: name the judges (--judge PROVIDER[:MODEL], repeatable); answers produced elsewhere "
                         "bring no model of their own to grade them")
    for spec in judges:
        check_spec(base.resolve_with, spec, "--judge")
    if generator is not None:
        check_spec(base.resolve_with, generator, "--generator")
    for target in targets:
        if target.scenario.llm is None:
            raise UsageError(f"{target.path}: no [llm] to answer with (add one, or --llm PROVIDER[:MODEL])")
        population_index(target, population)
        if with_run_memories and target.run is None:
            raise UsageError(f"--with-run-memories: {target.path} is a scenario file; only a run's agents have memories to lend")
    inputs = read_inputs(data, questions, persona_file, environments, named)
    if answers:
        _read_answers(inputs, answers, rows[len(targets):], personas, per_task)
        if not targets and generator is None:  # the release's generator is one of its judges too (GPT-4o)
            generator = judges[0]
            inputs.notes.append(f"the score examples are written by the first judge, {generator} (--generator to choose another)")
    if with_run_memories and inputs.descriptions is None:
        raise UsageError("--with-run-memories lends a run's memories to benchmark personas: give --persona-file or --questions benchmark "
                         "(a run's own agents answer with their memories already)")
    if inputs.descriptions is not None:
        if inputs.given is None:  # the answer files' personas are counted where they are read
            settle_count(inputs, personas, len(inputs.descriptions), "benchmark personas" if persona_file in (None, "benchmark")
                         else f"personas in {persona_file}")
    else:
        counts = [t.scenario.populations[population_index(t, population)].config.count for t in targets]
        where = f"agents in population {population}" if population else "agents in the evaluated population"
        settle_count(inputs, personas, min(counts), where)
    prompts = load_prompts(PROMPTS, "personagym", prompts_file, ".", required=REQUIRED)
    return Plan(targets, rows, inputs, prompts, settings, judges, judge_labels(judges), generator, population,
                with_run_memories, environments, per_task, base=base)


def _read_answers(inputs: Any, paths: tuple[str, ...], labels: list[str], personas: int | None, per_task: int) -> None:
    """The ``--answers`` files into ``inputs``: their personas (the designs' agents, if any, are
    built from them) and answers; questions without a task are looked up in ``--data``'s."""
    from .benchmark_data import QUESTIONS_FOLDER
    from .evaluation_inputs import settle_count
    from .given_answers import combine, read_answers

    release = inputs.release
    bank = release.static_questions() if release is not None and (release.folder / QUESTIONS_FOLDER).is_dir() else None
    files = [read_answers(path, label, bank) for path, label in zip(paths, labels)]
    settle_count(inputs, personas, len(files[0].personas), f"personas in {paths[0]}")
    inputs.given = combine(files, inputs.count, per_task)
    inputs.descriptions = inputs.given.descriptions
    inputs.notes += inputs.given.notes


def _warnings(plan: Any) -> list[str]:
    from townsquare.api.commands import model_identity, spec_overrides

    from .evaluation_inputs import graded_by_itself

    first = plan.settings_target

    def identity(spec: str | None) -> str:
        return model_identity(first.scenario if spec is None else first.resolve_with(spec_overrides(spec)))

    judges = [(label, identity(spec)) for label, spec in zip(plan.judge_labels, plan.judges or (None,))]
    return graded_by_itself([model_identity(t.scenario) for t in plan.targets], judges, identity(plan.generator))


def _estimate(plan: Any) -> list[str]:
    from townsquare.api.commands import DryRun

    from .evaluation_run import run

    expected = {**EXPECTED_TOKENS, "personagym.questions": 40 * plan.per_task, "personagym.examples": 300 * plan.settings.batch,
                "personagym.grade": 200 * plan.settings.batch}
    dry = DryRun(expected)
    with tempfile.TemporaryDirectory(prefix="townsquare-personagym-estimate-") as tmp:
        asyncio.run(run(plan, Path(tmp), dry))
    files = len(plan.labels) - len(plan.targets)
    rows = " and ".join([*([f"{len(plan.targets)} design(s)"] if plan.targets else []), *([f"{files} answer file(s)"] if files else [])])
    lines = [f"ESTIMATE: {dry.calls():,} LLM calls for {plan.inputs.count} persona(s) x {rows}, "
             f"{len(plan.judge_labels)} judge(s), {plan.settings.batch} question(s) a grading call; no model was called."]
    lines += dry.table(stage_of)
    lines.append("prompt tokens ~ characters / 4; completion tokens assumed per call: answers 250, questions 40 a question, "
                 f"score examples {300 * plan.settings.batch:,} and grades {200 * plan.settings.batch:,} (300 and 200 a question, "
                 f"{plan.settings.batch} a call); repairs of malformed answers not included.")
    if any(row[5] is None for row in dry.rows(stage_of)):
        lines.append("no price for some models: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost.")
    return lines


def register(cli: Any) -> None:
    from townsquare.api.commands import common_options, eval_group

    from .grades_command import register_grades

    @eval_group(cli).command("personagym")
    @click.argument("targets", metavar="[SCENARIO_OR_RUN...]", nargs=-1)
    @click.option("--personas", type=click.IntRange(min=1), default=None, help="Evaluate the first N personas (default all).")
    @click.option("--population", default=None, help="The population whose agents answer (default the first).")
    @click.option("--persona-file", default=None, metavar="FILE|benchmark",
                  help="Build the agents from these persona descriptions (JSON list of strings, or one a line); "
                       "'benchmark': the released personas_benchmark.json of --data.")
    @click.option("--with-run-memories", is_flag=True,
                  help="With benchmark personas on a run: each agent answers with the memory of the run's agent at its place.")
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
                  help="An evaluator LLM (repeat for an ensemble; the paper uses two); default with one design: its own LLM "
                       "(warned); several designs need it.")
    @click.option("--generator", default=None, metavar="PROVIDER[:MODEL]",
                  help="The LLM that selects environments, writes questions and score examples (default: the run's LLM).")
    @click.option("--llm", "llm_spec", default=None, metavar="PROVIDER[:MODEL]", help="The agents' LLM, as for run.")
    @click.option("--answer-tokens", type=click.IntRange(min=16), default=3000, show_default=True,
                  help="Longest answer, in tokens (the released code's 3,000).")
    @click.option("--batch", type=click.IntRange(min=1), default=5, show_default=True,
                  help="Questions per score-examples and grading call (the released code's 5; 1: one question a call).")
    @click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False), default=None,
                  help="TOML file replacing some of the prompts (same keys and placeholders).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a scenario key (dotted path).")
    @click.option("--seed", type=int, default=None, help="Override the scenario's seed (scenario files only).")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Folder for the results, cache and LLM calls (default RUN/personagym, runs/NAME-personagym, "
                       "or runs/A-vs-B-personagym for several designs).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost per stage of this evaluation; call no model.")
    @click.option("--table", is_flag=True,
                  help="Also print and write the paper's Table 1 shape (rows: designs and answer files, and the paper's models "
                       "on the released questions; columns: tasks; each cell a score and its interval) as CSV, Markdown and LaTeX.")
    @click.option("--answers", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
                  help="Grade answers produced elsewhere: JSON Lines of persona, question, answer (and task, else looked up in "
                       "--data's released questions); repeatable, each file a row; with SCENARIO_OR_RUN its agents answer the "
                       "same questions.")
    @click.option("--label", "labels", multiple=True, metavar="NAME",
                  help="The row name of each --answers file, in order (default: the file's stem).")
    @common_options
    def personagym(targets: tuple[str, ...], personas: int | None, population: str | None, persona_file: str | None,
                   with_run_memories: bool, data: str | None, questions: str, environments: int, named: tuple[str, ...],
                   per_task: int, judges: tuple[str, ...], generator: str | None, llm_spec: str | None, answer_tokens: int,
                   batch: int, prompts_file: str | None, overrides: tuple[str, ...], seed: int | None, out: str | None,
                   estimate: bool, table: bool, answers: tuple[str, ...], labels: tuple[str, ...],
                   plugin_options: tuple[str, ...] = (), **_: Any) -> None:
        """PersonaGym: environments, questions, the agents' answers, rubric grades by an
        ensemble of judges, and PersonaScore per persona (Samuel et al.); with several
        designs, their paired differences on the same questions and judges; with --answers,
        answers produced elsewhere graded by the same steps and judges."""
        from townsquare.api import LLMFault, RunStopped
        from townsquare.api.commands import cached_answers, clear_earlier_answers, command_line, locked

        from .llm_steps import Settings

        started = time.monotonic()
        refuse_options(click.get_current_context(), answers, labels, len(targets))
        settings = Settings(answer_tokens=answer_tokens, batch=batch,
                            use_memories=with_run_memories or not (persona_file or questions == "benchmark" or answers))
        plan = _plan(targets, llm_spec=llm_spec, overrides=overrides, plugin_options=plugin_options, seed=seed, personas=personas,
                     population=population, persona_file=persona_file, data=data, questions=questions, environments=environments,
                     named=named, per_task=per_task, judges=judges, generator=generator, prompts_file=prompts_file,
                     with_run_memories=with_run_memories, settings=settings, answers=answers, labels=labels)
        for note in plan.inputs.notes:
            click.echo(f"note: {note}", err=True)
        warnings = _warnings(plan)
        for warning in warnings:
            click.echo(f"warning: {warning}", err=True)
        if estimate:
            for line in _estimate(plan):
                click.echo(line)
            return
        folder = Path(out) if out else _default_out(plan)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {folder}: exists and is not a folder")
        if folder.is_dir() and (folder / "manifest.json").is_file():
            raise UsageError(f"--out {folder}: is a run directory; choose another folder for the evaluation")
        folder.mkdir(parents=True, exist_ok=True)
        plan.resume = command_line(click.get_current_context())
        from .evaluation_run import design_folder, run

        folders = list(dict.fromkeys([folder, *(design_folder(folder, plan, k) for k in range(len(plan.labels)))]))
        with locked(folder):
            for where in folders:
                clear_earlier_answers(where / "events.sqlite")
            known = cached_answers(folder)
            try:
                results = asyncio.run(run(plan, folder))
            except KeyboardInterrupt:
                raise RunStopped(f"interrupted; the answers so far are cached: resume with {plan.resume}") from None
            except LLMFault as exc:
                raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                                 f"resume with {plan.resume}") from None
            new = cached_answers(folder) - known
            from .comparison import identical_prompts
            from .output import write_all

            for line in identical_prompts(results, plan.slots).values():
                click.echo(f"warning: {line}", err=True)
                warnings.append(line)

            lines = write_all(folder, plan, results, warnings, new, round(time.monotonic() - started, 1), table)
        for line in lines:
            click.echo(line)

    register_grades(cli)
