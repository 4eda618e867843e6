"""``townsquare eval some RUN``: the SoMe benchmark (Xue et al.) over a run.

By default the ground truth comes from the run itself (:mod:`.run_truth`) and the tools search
the run's events (:mod:`.corpus`); with ``--some-data`` the queries come from SoMe's own
``ground_truth.json`` files and the tools search a SoMe database folder (``--database``). The
agent is the run's LLM (``--llm`` to use another one, as for ``run``), the judges the run's LLM
or ``--judge`` models. Every call goes through the run's LLM middleware (response cache,
budget, retries), with the cache and the call log in the output folder (``RUN/some`` unless
``--out``): the same command again resumes an interrupted evaluation or replays a finished one.

Output: the per-task table (ACC or judged score, TCR, tool use), ``summary.csv``,
``summary.json``, ``results.json`` (every query, answer and tool call), the ground truth in
SoMe's format (``ground_truth/<task>/ground_truth.json``), ``llm_calls.sqlite``; the run's
report shows the table when it finds ``RUN/some/summary.json``.
"""

from __future__ import annotations

import asyncio
import csv
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

import click

from townsquare.api import hookimpl

HERE = Path(__file__).resolve().parent

#: placeholders each prompt must keep (a --prompts file that drops one is an error)
REQUIRED = {
    **{f"system_{name}": frozenset() for name in (
        "realtime_event_detection", "streaming_event_summary", "misinformation_detection", "user_behavior_prediction",
        "user_emotion_analysis", "user_comment_silmulation", "media_content_recommend", "social_media_question_answering")},
    "query_red": frozenset({"location", "start", "end"}), "query_red_anywhere": frozenset({"start", "end"}),
    "query_ses": frozenset({"topic"}), "query_mid": frozenset({"claim"}), "query_ubp": frozenset({"uid", "post", "behavior"}),
    "query_uea": frozenset({"uid", "post"}), "query_ucs": frozenset({"uid", "post", "comment"}), "query_mcr": frozenset({"uid", "post"}),
    "query_smq_user": frozenset({"uid"}), "query_smq_topic": frozenset({"topic"}), "summarize_cluster": frozenset({"posts"}),
    "extract_yes_no": frozenset({"answer"}), "extract_emotion": frozenset({"answer"}), "extract_verdict": frozenset({"answer"}),
    "score_realtime_event_detection": frozenset({"reference", "answer"}),
    "score_streaming_event_summary": frozenset({"reference", "answer"}),
    "score_social_media_question_answering": frozenset({"reference", "answer"}),
    "label_emotion": frozenset({"post", "comment"}),
    "complete_realtime_event_detection": frozenset({"question", "answer"}),
    "complete_streaming_event_summary": frozenset({"reference", "answer"}),
    "complete_social_media_question_answering": frozenset({"question", "answer"}),
}


def load_some_prompts(override_file: str | None = None) -> dict[str, str]:
    from townsquare.lib.prompt_files import load_prompts

    return load_prompts(HERE / "prompts", "some", override_file, required=REQUIRED)


# --------------------------------------------------------------------------- the plan (checked before anything is written)


def plan_queries(run_path: str | None, tasks: list[Any], *, per_task: int, split: int | None, seed: int, some_data: str | None,
                 database: str | None, knowledge: str | None, prompts: dict[str, str], window_rounds: int,
                 min_posts: int, answered: bool = False) -> dict[str, Any]:
    """Tasks, their queries, ground truth and corpora; a UsageError for any bad input.
    ``answered``: the answers come from a file (``--answers``): SoMe's queries are all kept
    (the file says which are graded), those whose post is not in the database too."""
    import numpy as np

    from townsquare.api import UsageError

    from .corpus import Corpus, corpus_from_run, corpus_from_some, knowledge_documents, read_json
    from .run_truth import ground_truth, read_run
    from .tasks import read_ground_truth, some_queries

    events = Path(run_path or ".") / "events.sqlite"
    rng = np.random.default_rng(seed)
    extra = knowledge_documents(read_json(Path(knowledge)), knowledge) if knowledge else []
    plan: dict[str, Any] = {"queries": [], "truth": {}, "notes": [], "corpora": {}, "pending_emotions": None}
    if some_data:
        corpus = corpus_from_some(database) if database else Corpus([], {}, source="(no SoMe database)")
        corpus.knowledge += extra
        for task in tasks:
            where = str(Path(some_data) / task.name / "ground_truth.json")
            queries, skipped = some_queries(task, read_ground_truth(Path(some_data), task), corpus, prompts, where, answered)
            if skipped:
                plan["notes"].append(f"{task.short}: {skipped} queries skipped: their posts are not in {corpus.source}" if not answered
                                     else f"{task.short}: {skipped} queries' posts are not in {corpus.source}: the label extraction "
                                          "is shown the post's id")
            plan["queries"] += queries if answered else _pick(queries, per_task, rng)
            plan["corpora"][task.name] = corpus
        return plan
    assert run_path is not None, "a run's own ground truth needs the run"
    log = read_run(events)
    if log.rounds < 2:
        raise UsageError(f"{run_path}: the run has {log.rounds} round; SoMe's ground truth needs at least 2 (a past and a future)")
    split = log.rounds // 2 if split is None else split
    if not 1 <= split < log.rounds:
        raise UsageError(f"--split {split}: the run has {log.rounds} rounds; give a round from 1 to {log.rounds - 1}")
    plan["split"] = split
    history, whole = corpus_from_run(events, split), corpus_from_run(events)
    history.knowledge += extra
    whole.knowledge += extra
    plan["whole"] = whole
    for task in tasks:
        if task.short == "MID":
            plan["notes"].append("MID: skipped: a run has no fact-checked claims (they come from SoMe's files: --some-data)")
            continue
        truth = ground_truth(task, log, split, per_task, rng, prompts, window_rounds=window_rounds, min_posts=min_posts)
        corpus = history if task.short in ("UBP", "MCR", "UCS", "UEA") else whole
        plan["corpora"][task.name] = corpus
        if task.short == "UEA":
            plan["pending_emotions"] = truth  # labelled by the judge once the LLM is built
            if not truth:
                plan["notes"].append(f"UEA: no queries: the run has no comments from round {split} on")
            continue
        queries, _ = some_queries(task, truth, whole, prompts, f"{run_path} ({task.short} ground truth)")
        if not queries:
            plan["notes"].append(f"{task.short}: no queries: the run has nothing to ask about "
                                 f"({'no interactions' if task.kind == 'choice' else 'no trending terms'} in the rounds used)")
        plan["truth"][task.name] = truth
        plan["queries"] += queries
    return plan


def _pick(items: list[Any], k: int, rng: Any) -> list[Any]:
    if len(items) <= k:
        return items
    return [items[i] for i in sorted(rng.choice(len(items), size=k, replace=False))]


# --------------------------------------------------------------------------- the LLM clients


def labeller_spec(judges: tuple[str, ...], labeller: str | None) -> str | None:
    """Who labels UEA's comments: ``--labeller``, else the first ``--judge``; None: nobody named."""
    return labeller or (judges[0] if judges else None)


def llm_settings(run_path: str | None, llm_spec: str | None, overrides: tuple[str, ...],
                 plugin_options: tuple[str, ...]) -> tuple[Any, Callable[[list[str]], Any]]:
    """The scenario whose ``[llm]`` and middleware the evaluation's clients use, and how to
    resolve it with more overrides: the run's, or (answers produced elsewhere, no run) a scenario
    of LLM settings only (:func:`townsquare.api.commands.settings_scenario`)."""
    from townsquare.api.commands import llm_overrides, load_plugins, load_run, settings_scenario

    if run_path is None:
        return settings_scenario(overrides, load_plugins(plugin_options))
    _, scenario, plugins = load_run(run_path, extra_plugin_options=plugin_options, overrides=[*llm_overrides(llm_spec), *overrides])
    return scenario, lambda more: load_run(run_path, plugins, overrides=[*llm_overrides(llm_spec), *overrides, *more])[1]


async def _evaluate(run_path: str | None, out: Path, llm_spec: str | None, judge_specs: tuple[str, ...], plan: dict[str, Any],
                    prompts: dict[str, str], settings: Any, votes: int, overrides: tuple[str, ...] = (),
                    plugin_options: tuple[str, ...] = (), labeller: str | None = None, resume: str | None = None,
                    dry_run: Any = None, given: dict[tuple[str, str], Any] | None = None) -> tuple[list[Any], dict[str, Any], dict[str, int]]:
    """Label UEA's comments on a run, then every query: the agent answers and is scored, or
    (``given``: (task, query id) -> an answer produced elsewhere) only the given answers are."""
    from townsquare.api import BuildContext, EmbeddingCache, Services, UsageError
    from townsquare.api.commands import EvalLLMs, close_each

    from .harness import Harness
    from .run_truth import label_emotions
    from .tasks import TASKS, some_queries

    scenario, resolve = llm_settings(run_path, llm_spec, overrides, plugin_options)
    if scenario.llm is None and given is None:
        raise UsageError(f"{run_path}: the run has no [llm] (give --llm PROVIDER[:MODEL])")
    embedder = None
    if given is None:  # the agent's tools search by embedding; graded answers need none
        ctx = BuildContext(services=None, seed=scenario.model.seed, base_dir=scenario.base_dir, scenario=scenario.model)
        embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx))
        ctx.services = Services(platform=None, embedder=embedder, run_dir=str(out))  # type: ignore[arg-type]
    if dry_run is None:
        out.mkdir(parents=True, exist_ok=True)
    evaluator = EvalLLMs(scenario, resolve, out, journal=out / "llm_calls.sqlite", resume=resume, dry_run=dry_run)
    try:
        agent = evaluator.client(None, "some-agent") if given is None else None
        # each judge asks under its own name: the cache never gives one judge's answers to another
        judges = [evaluator.client(spec, f"judge[{spec}]") for spec in judge_specs] or [agent]
        names = list(judge_specs) or ["agent"]
        queries = list(plan["queries"])
        if plan["pending_emotions"] is not None:
            task = TASKS["user_emotion_analysis"]
            spec = labeller_spec(judge_specs, labeller)
            reader = evaluator.client(spec, f"labeller[{spec or 'agent'}]")
            truth = await label_emotions(plan["pending_emotions"], reader, prompts, votes, plan["whole"].by_id)
            plan["truth"][task.name] = truth
            queries += some_queries(task, truth, plan["whole"], prompts, f"{run_path} (UEA ground truth)")[0]
        harness = Harness(agent, judges, embedder.embed if embedder is not None else None, prompts, settings, judge_names=names)
        if given is not None:
            queries = [q for q in queries if (q.task, q.id) in given]
        results = await harness.evaluate(queries, lambda name: plan["corpora"][name],
                                         None if given is None else [given[(q.task, q.id)] for q in queries])
        return results, {"agent_model": evaluator.identity(None) if given is None else "answers produced elsewhere (--answers)",
                         "judges": [evaluator.identity(spec) for spec in judge_specs] or [evaluator.identity(None)],
                         "labeller": evaluator.identity(labeller_spec(judge_specs, labeller))}, evaluator.write_journal()
    finally:
        await evaluator.aclose()
        await close_each([embedder.embedder] if embedder is not None else [])


# --------------------------------------------------------------------------- answers produced elsewhere


#: options about the agent, which ``--answers`` does without (nothing is asked of it)
AGENT_OPTIONS = {"llm_spec": "--llm", "max_steps": "--max-steps", "max_tokens": "--max-tokens", "max_tool_chars": "--max-tool-chars",
                 "free_tool_calls": "--free-tool-calls", "label_with_agent": "--label-with-agent", "knowledge": "--knowledge"}


def refuse_with_answers(ctx: Any, judges: tuple[str, ...], some_data: str | None) -> None:
    """One line for what ``--answers`` cannot take: no judge, an option about the agent,
    ``--per-task`` on SoMe's own queries (the answered queries are graded, all of them)."""
    from click.core import ParameterSource

    from townsquare.api import UsageError

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)

    if not judges:
        raise UsageError("--answers: name the judges (--judge PROVIDER[:MODEL], repeatable); answers produced elsewhere "
                         "bring no model of their own to grade them")
    for name, option in AGENT_OPTIONS.items():
        if given(name):
            raise UsageError(f"{option}: no agent is asked with --answers (the answers are the files')")
    if some_data and given("per_task"):
        raise UsageError("--per-task: with --answers and --some-data every answered query is graded")


def answered_queries(plan: dict[str, Any], given: list[Any], prompts: dict[str, str],
                     source: str) -> tuple[dict[tuple[str, str], Any], list[str]]:
    """(task, query id) -> its answer, for every answer of the files (one line for an answer no
    query has), and notes: the queries left unanswered, the answers to tasks not evaluated."""
    from .given_answers import match
    from .tasks import TASKS, some_queries

    queries = list(plan["queries"])
    if plan["pending_emotions"] is not None:  # a run's UEA queries are labelled later; their ids are known now
        queries += some_queries(TASKS["user_emotion_analysis"], plan["pending_emotions"], plan["whole"], prompts, source)[0]
    evaluated = {q.task for q in queries}
    pairs, notes = match(queries, [g for g in given if g.task in evaluated], source)
    outside = sorted({TASKS[g.task].short for g in given if g.task not in evaluated})
    if outside:
        left = sum(1 for g in given if g.task not in evaluated)
        notes.append(f"{left} answer(s) to tasks not evaluated here ({', '.join(outside)}) left out")
    return {(q.task, q.id): g for q, g in pairs}, notes


# --------------------------------------------------------------------------- writing


def write_outputs(out: Path, results: list[Any], summaries: list[Any], plan: dict[str, Any], info: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for task, truth in plan["truth"].items():
        folder = out / "ground_truth" / task
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ground_truth.json").write_text(json.dumps(truth, ensure_ascii=False, indent=1), encoding="utf-8")
    (out / "results.json").write_text(json.dumps([asdict(r) for r in results], ensure_ascii=False, indent=1), encoding="utf-8")
    rows = [asdict(s) for s in summaries]
    with open(out / "summary.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["task"])
        writer.writeheader()
        writer.writerows(rows)
    (out / "summary.json").write_text(json.dumps({**info, "notes": plan["notes"], "tasks": rows}, ensure_ascii=False, indent=1),
                                      encoding="utf-8")


# --------------------------------------------------------------------------- the command


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("some")
    @click.argument("run_dir", metavar="[RUN]", required=False)
    @click.option("--tasks", default=None, metavar="T1,T2", help="Tasks by abbreviation or SoMe folder name (default: all that apply).")
    @click.option("--per-task", type=click.IntRange(min=1), default=10, show_default=True, help="Queries sampled per task.")
    @click.option("--split", type=int, default=None, help="Round from which labels come; the tools see rounds before it (default: half the run).")
    @click.option("--some-data", type=click.Path(file_okay=False), default=None, help="SoMe's datasets folder (one ground_truth.json per task) instead of the run's own ground truth.")
    @click.option("--database", type=click.Path(file_okay=False), default=None, help="A SoMe database folder (post_data/, user_data/, knowledge_data/) for the tools.")
    @click.option("--knowledge", type=click.Path(dir_okay=False), default=None, help="A JSON list of reports for knowledge_retrieve.")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the run's scenario (retries, budget...).")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The agent's LLM (default: the run's).")
    @click.option("--judge", "judges", multiple=True, metavar="PROVIDER[:MODEL]", help="An LLM judge (repeat to average several; default: the agent's LLM).")
    @click.option("--labeller", default=None, metavar="PROVIDER[:MODEL]",
                  help="The LLM that labels UEA's comments on a run (default: the first --judge; never the agent's unless --label-with-agent).")
    @click.option("--label-with-agent", is_flag=True, help="Let the agent's own LLM label UEA's comments (it is then graded on its own labels).")
    @click.option("--max-steps", type=click.IntRange(min=1), default=20, show_default=True,
                  help="Replies an agent may spend on one query (the released MAX_LLM_CALL_PER_RUN).")
    @click.option("--max-tokens", type=click.IntRange(min=16), default=512, show_default=True, help="Completion tokens per agent reply.")
    @click.option("--max-tool-chars", type=click.IntRange(min=300), default=6000, show_default=True, help="Longest tool answer shown to the agent.")
    @click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="Queries worked on at once.")
    @click.option("--votes", type=click.IntRange(min=1), default=3, show_default=True, help="Labeller readings per comment for UEA's labels.")
    @click.option("--window-rounds", type=click.IntRange(min=1), default=2, show_default=True, help="RED: rounds per time window.")
    @click.option("--min-posts", type=click.IntRange(min=2), default=2, show_default=True, help="RED/SES/SMQ: posts a term needs to be a topic.")
    @click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False), default=None, help="TOML file replacing some of SoMe's prompts.")
    @click.option("--free-tool-calls", is_flag=True,
                  help="Do not hold the agent's replies to the tool-call schema (grammar, strict JSON schema): the model's own call-writing errors count.")
    @click.option("--seed", type=int, default=0, show_default=True, help="Seeds the sampling of queries.")
    @click.option("--out", type=click.Path(file_okay=False), default=None,
                  help="Output folder (default RUN/some; with --answers and no RUN, runs/<first file's stem>-some).")
    @click.option("--estimate", is_flag=True, help="Print the calls, tokens and cost per stage; call no model, write nothing.")
    @click.option("--answers", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
                  help="Grade answers produced elsewhere instead of asking the agent: JSON Lines of task, id, answer, or a released "
                       "results file (results/<task>/<model>.json); repeatable. RUN may be left out with --some-data.")
    @common_options
    def some_cmd(run_dir: str | None, tasks: str | None, per_task: int, split: int | None, some_data: str | None, database: str | None,
                 knowledge: str | None, overrides: tuple[str, ...], llm_spec: str | None, judges: tuple[str, ...], labeller: str | None,
                 label_with_agent: bool, max_steps: int, max_tokens: int, max_tool_chars: int, concurrency: int, votes: int,
                 window_rounds: int, min_posts: int, prompts_file: str | None, free_tool_calls: bool, seed: int, out: str | None, estimate: bool,
                 answers: tuple[str, ...], plugin_options: tuple[str, ...] = (), **_: Any) -> None:
        """SoMe (Xue et al.): eight social-media agent tasks, each with its tools, over RUN's events
        (or SoMe's own queries); with --answers, answers produced elsewhere graded alike."""
        from townsquare.api import LLMFault, RunStopped, UsageError
        from townsquare.lib.data_paths import data_path
        from townsquare.api.commands import (
            cached_answers, calls_line, check_spec, clear_earlier_answers, command_line, llm_overrides, load_run, model_identity, open_run,
        )

        from .given_answers import read_answers
        from .harness import HarnessSettings
        from .scoring import format_table, summarise
        from .tasks import TASKS, task_type
        from .tools import ToolSettings

        given = read_answers(answers) if answers else None
        if given is not None:
            refuse_with_answers(click.get_current_context(), judges, some_data)
        if run_dir is not None:
            open_run(run_dir)
        elif given is None:
            raise UsageError("missing RUN: a run directory (or, without one, --answers FILE --some-data DIR: answers produced "
                             "elsewhere to SoMe's own queries)")
        elif not some_data:
            raise UsageError("--answers without RUN: give --some-data DIR (SoMe's queries; a run's own come from RUN)")
        if tasks:
            chosen = [task_type(t) for t in tasks.split(",") if t.strip()]
        else:  # every task that applies, or those the answers are to
            chosen = [t for t in TASKS.values() if given is None or any(g.task == t.name for g in given)]
        if not chosen:
            raise UsageError("--tasks: no task named")
        if database and not some_data:
            raise UsageError("--database: give --some-data too (the database serves SoMe's own queries)")
        some_data, database = (str(data_path(p)) if p else None for p in (some_data, database))  # data:NAME -> installed dataset

        _, resolve = llm_settings(run_dir, llm_spec, overrides, plugin_options)
        for spec, option in [*((j, "--judge") for j in judges), *(((labeller, "--labeller"),) if labeller else ())]:
            check_spec(resolve, spec, option)
        agent_model = model_identity(resolve([])) if given is None else None
        warnings = [f"judge {spec} is {agent_model}, the agent's model: it grades its own answers" for spec in judges
                    if model_identity(check_spec(resolve, spec, "--judge")) == agent_model]
        if not judges:
            warnings.append(f"the judge is the agent's own model ({agent_model}): it grades its own answers (give --judge another model)")
        if not some_data and any(t.short == "UEA" for t in chosen) and not label_with_agent and given is None:
            spec = labeller_spec(judges, labeller)
            if spec is None or model_identity(resolve(llm_overrides(spec))) == agent_model:
                chosen = [t for t in chosen if t.short != "UEA"]
                skipped = "UEA: skipped: its labels on a run come from an LLM, and that LLM would be the agent's own " \
                          "(give --labeller or --judge another model, or --label-with-agent)"
                if not chosen:
                    raise UsageError(skipped)
                warnings.append(skipped)
        prompts = load_some_prompts(prompts_file)
        started = time.perf_counter()
        plan = plan_queries(run_dir, chosen, per_task=per_task, split=split, seed=seed, some_data=some_data, database=database,
                            knowledge=knowledge, prompts=prompts, window_rounds=window_rounds, min_posts=min_posts,
                            answered=given is not None)
        graded = None
        if given is not None:
            graded, notes = answered_queries(plan, given, prompts, run_dir or str(some_data))
            plan["notes"] += notes
        settings = HarnessSettings(max_steps=max_steps, max_tokens=max_tokens, concurrency=concurrency,
                                   constrained_tool_calls=not free_tool_calls,
                                   tools=ToolSettings(max_answer_chars=max_tool_chars))
        for line in warnings:
            click.echo(f"warning: {line}", err=True)
        for note in plan["notes"]:
            click.echo(f"note: {note}", err=True)
        if estimate:
            for line in estimate_lines(run_dir, judges, plan, prompts, settings, votes, overrides, plugin_options, llm_spec, labeller,
                                       graded):
                click.echo(line)
            return
        target = Path(out) if out else Path(run_dir) / "some" if run_dir else Path("runs") / f"{Path(answers[0]).stem}-some"
        clear_earlier_answers(target / "llm_calls.sqlite")
        known = cached_answers(target)
        resume = command_line(click.get_current_context())
        try:
            results, info, calls = asyncio.run(_evaluate(run_dir, target, llm_spec, judges, plan, prompts, settings, votes, overrides,
                                                         plugin_options, labeller, resume, given=graded))
        except LLMFault as exc:
            raise RunStopped(f"SoMe evaluation stopped: LLM call failed: {exc.describe()}; the answers so far are cached: "
                             f"resume with {resume}") from None
        except RunStopped as exc:
            raise RunStopped(f"SoMe evaluation stopped: {exc}") from None
        by_task = {t.name: [r for r in results if r.task == t.name] for t in chosen}
        summaries = [summarise(t, by_task[t.name]) for t in chosen if by_task[t.name]]
        new = cached_answers(target) - known
        info.update(run=run_dir and str(run_dir), answers=list(answers), split=plan.get("split"), per_task=per_task, seed=seed,
                    source=some_data or "run",
                    wall_seconds=round(time.perf_counter() - started, 1), llm_calls=sum(calls.values()),
                    provider_calls=new + calls.get("error", 0), warnings=warnings)
        write_outputs(target, results, summaries, plan, info)
        click.echo(format_table(summaries))
        click.echo(f"{len(results)} queries, {calls_line(calls, new)}, {info['wall_seconds']} s; written to {target}")


#: the replies an agent that follows its task's system prompt gives (``prompts/some.toml``): the
#: tools it calls, in order, before it answers (RED: a folder of at most 100 posts is read at
#: once; SES and SMQ: one read of the folder)
PROMPTED_PATHS = {
    "RED": ("post_search", "data_folder"), "SES": ("topic_search", "data_folder"), "MID": ("knowledge_retrieve",),
    "UBP": ("user_search", "data_folder"), "UEA": ("user_search", "data_folder"), "UCS": ("user_search", "data_folder"),
    "MCR": ("user_search", "data_folder"), "SMQ": ("user_search", "data_folder"),
}


def prompted_reply(request: Any) -> str | None:
    """A stand-in agent's reply that follows its task's prompted path (:data:`PROMPTED_PATHS`):
    each tool in turn, with the arguments a reader of the query and of the last tool result
    would give (the user's ID, the folder a tool stored), then an answer (a choice task's
    first label as the prompt asks; else text); None for every other request."""
    import re

    from townsquare.api.commands import schema_example

    from .tasks import TASKS
    from .tools import openai_tools

    parts = (request.agent_id or "").split("/")
    if request.purpose != "some.step" or len(parts) < 2 or parts[1] not in PROMPTED_PATHS:
        return None
    task = next(t for t in TASKS.values() if t.short == parts[1])
    done = sum(1 for m in request.messages if m.role == "assistant")
    path = PROMPTED_PATHS[task.short]
    if done >= len(path):
        return json.dumps({"answer": task.labels[0] if task.kind == "choice" else "abc " * 120})
    tool = path[done]
    arguments = schema_example(openai_tools([tool])[0]["function"]["parameters"])
    query, last = request.messages[1].content, request.messages[-1].content
    found = {"uid": re.search(r"ID (\S+?)[ ?.,]", query), "folder_name": re.search(r"data folder '([^']+)'", last),
             "topic_name": re.search(r'"([^"]+)"', query), "query": re.search(r'"([^"]+)"', query)}
    arguments.update({name: match.group(1) for name, match in found.items() if name in arguments and match})
    arguments.update({k: v for k, v in (("start_idx", 0), ("end_idx", 100), ("topk", 10)) if k in arguments})
    return json.dumps({"tool": tool, "arguments": arguments})


def judged_reply(request: Any) -> str | None:
    """A stand-in judge's reply to a scoring prompt, in the form it asks for (every criterion
    3 of 5: no repair and no completion check follow, as with a judge that reads its prompt and
    an answer that is not worthless); None for every other request."""
    from .tasks import TASKS

    parts = request.purpose.split(".")
    if len(parts) != 3 or parts[:2] != ["some", "score"]:
        return None
    task = next((t for t in TASKS.values() if t.short.lower() == parts[2]), None)
    return None if task is None else ", ".join(f"{c.capitalize()}: 3" for c in task.criteria)


def estimate_lines(run_dir: str | None, judges: tuple[str, ...], plan: dict[str, Any], prompts: dict[str, str], settings: Any,
                   votes: int, overrides: tuple[str, ...], plugin_options: tuple[str, ...], llm_spec: str | None, labeller: str | None,
                   given: dict[tuple[str, str], Any] | None = None) -> list[str]:
    """A dry run of the evaluation: a stand-in agent that follows each task's prompted path
    (:func:`prompted_reply`: the tools the system prompt names, run on the real corpus, then
    the answer), priced per stage and model; the most the agent may take is said beside it."""
    import tempfile

    from townsquare.api.commands import DryRun

    dry = DryRun({"some.step": 120, "some.tool.summarize": 150, "some.extract": 2, "some.score": 20, "some.complete": 2,
                  "some.label": 2}, script=lambda request: prompted_reply(request) or judged_reply(request))
    with tempfile.TemporaryDirectory(prefix="townsquare-some-estimate-") as tmp:
        asyncio.run(_evaluate(run_dir, Path(tmp), llm_spec, judges, plan, prompts, settings, votes, overrides, plugin_options,
                              labeller, dry_run=dry, given=given))
    queries = len(plan["queries"]) + sum(len(v) for v in (plan["pending_emotions"] or {}).values())
    if given is not None:
        lines = [f"ESTIMATE: {dry.calls():,} LLM calls to grade {len(given)} answers produced elsewhere (no agent is asked); "
                 "no model was called."]
    else:
        lines = [f"ESTIMATE: {dry.calls():,} LLM calls for about {queries} queries, each agent following its task's prompted tool "
                 "path; no model was called."]
    lines += dry.table(lambda purpose: ".".join(purpose.split(".")[:2]))
    if given is None:
        lines.append(f"the agent may take up to --max-steps {settings.max_steps} replies a query: at most "
                     f"{queries * settings.max_steps:,} agent calls, each prompt longer by every tool answer it read (up to "
                     f"{settings.tools.max_answer_chars:,} characters).")
    lines.append("a judged answer that scores 0 gets one more call, a completion check (not counted: the stand-in judge scores "
                 "3 of 5); an answer that is just a label needs no extraction call.")
    lines.append("prompt tokens ~ characters / 4; completion tokens assumed per call: agent 120, summaries 150, scores 20, labels 2.")
    if any(row[5] is None for row in dry.rows(lambda p: p)):
        lines.append("no price for some models: set llm.price_prompt_per_1k and llm.price_completion_per_1k for a cost.")
    return lines
