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
from typing import Any

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
}


def load_some_prompts(override_file: str | None = None) -> dict[str, str]:
    from townsquare.api import load_prompts

    return load_prompts(HERE / "prompts", "some", override_file, required=REQUIRED)


# --------------------------------------------------------------------------- the plan (checked before anything is written)


def plan_queries(run_path: str, tasks: list[Any], *, per_task: int, split: int | None, seed: int, some_data: str | None,
                 database: str | None, knowledge: str | None, prompts: dict[str, str], window_rounds: int,
                 min_posts: int) -> dict[str, Any]:
    """Tasks, their queries, ground truth and corpora; a UsageError for any bad input."""
    import numpy as np

    from townsquare.api import UsageError

    from .corpus import Corpus, corpus_from_run, corpus_from_some, knowledge_documents, read_json
    from .run_truth import ground_truth, read_run
    from .tasks import read_ground_truth, some_queries

    events = Path(run_path) / "events.sqlite"
    rng = np.random.default_rng(seed)
    extra = knowledge_documents(read_json(Path(knowledge)), knowledge) if knowledge else []
    plan: dict[str, Any] = {"queries": [], "truth": {}, "notes": [], "corpora": {}, "pending_emotions": None}
    if some_data:
        corpus = corpus_from_some(database) if database else Corpus([], {}, source="(no SoMe database)")
        corpus.knowledge += extra
        for task in tasks:
            where = str(Path(some_data) / task.name / "ground_truth.json")
            queries, skipped = some_queries(task, read_ground_truth(Path(some_data), task), corpus, prompts, where)
            if skipped:
                plan["notes"].append(f"{task.short}: {skipped} queries skipped: their posts are not in {corpus.source}")
            plan["queries"] += _pick(queries, per_task, rng)
            plan["corpora"][task.name] = corpus
        return plan
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


class CallLog:
    """The evaluation's ``llm_calls`` rows (every provider call, cache hit and parse failure)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def __call__(self, call: Any) -> None:
        self.rows.append((call.round, call.agent_id, call.purpose, call.provider, call.model, call.status, call.prompt_tokens,
                          call.completion_tokens, round(call.latency_ms, 3), call.cost, call.error, call.kind))

    def parse_failure(self, provider: Any):
        from townsquare.api import LLMCallRecord

        def record(request: Any, answer: str, kind: str = "unparsable") -> None:
            self(LLMCallRecord(round=-1, agent_id=request.agent_id, purpose=request.purpose, provider=provider.name,
                               model=provider.model, status="parse_failure", error=f"unparsable answer: {answer[:200]!r}", kind=kind))

        return record


async def _evaluate(run_path: str, out: Path, llm_spec: str | None, judge_specs: tuple[str, ...], plan: dict[str, Any],
                    prompts: dict[str, str], settings: Any, votes: int, overrides: tuple[str, ...] = ()) -> tuple[list[Any], dict[str, Any], CallLog]:
    from townsquare.api import BuildContext, EmbeddingCache, LLMClient, Services, UsageError
    from townsquare.api.commands import close_each
    from townsquare.api.commands import Accounting, RunDir, Simulation, compose, llm_overrides, load_run

    from .harness import Harness
    from .run_truth import label_emotions
    from .tasks import TASKS, some_queries

    run_dir, scenario, plugins = load_run(run_path, overrides=[*llm_overrides(llm_spec), *overrides])
    if scenario.llm is None:
        raise UsageError(f"{run_path}: the run has no [llm] (give --llm PROVIDER[:MODEL])")
    calls = CallLog()
    out.mkdir(parents=True, exist_ok=True)
    ctx = BuildContext(services=None, seed=scenario.model.seed, base_dir=scenario.base_dir, scenario=scenario.model)
    embedder = EmbeddingCache(scenario.embedder.spec.factory(scenario.embedder.config, ctx))
    ctx.services = Services(platform=None, embedder=embedder, run_dir=str(out))  # type: ignore[arg-type]
    sim = Simulation(scenario, plugins, RunDir(out))
    providers: list[Any] = []
    try:
        agent = sim.build_llm(ctx)
        sim.accounting.observers.append(calls)
        agent.on_parse_failure = calls.parse_failure(sim.provider)
        judges = []
        for spec in judge_specs:
            _, judged, _ = load_run(run_path, plugins, overrides=[*overrides, *llm_overrides(spec)])
            provider = judged.llm.spec.factory(judged.llm.config, BuildContext(services=ctx.services, seed=ctx.seed,
                                                                               base_dir=ctx.base_dir, scenario=judged.model))
            providers.append(provider)
            accounting = Accounting(provider, calls, lambda: -1, price=getattr(provider, "cost", None))
            client = LLMClient(compose(provider, [*sim.llm_middleware, accounting]), model=provider.model,
                               on_parse_failure=calls.parse_failure(provider))
            judges.append(client.for_agent(f"judge[{spec}]"))  # the judge's name keeps its cached answers apart
        judges = judges or [agent]
        queries = list(plan["queries"])
        if plan["pending_emotions"] is not None:
            task = TASKS["user_emotion_analysis"]
            truth = await label_emotions(plan["pending_emotions"], judges[0], prompts, votes, plan["whole"].by_id)
            plan["truth"][task.name] = truth
            queries += some_queries(task, truth, plan["whole"], prompts, f"{run_path} (UEA ground truth)")[0]
        harness = Harness(agent, judges, embedder.embed, prompts, settings)
        results = await harness.evaluate(queries, lambda name: plan["corpora"][name])
        return results, {"agent_model": f"{sim.provider.name}:{sim.provider.model}",
                         "judges": list(judge_specs) or [f"{sim.provider.name}:{sim.provider.model}"]}, calls
    finally:
        await close_each(providers)
        await sim.aclose()
        await close_each([embedder.embedder])


# --------------------------------------------------------------------------- writing


def write_outputs(out: Path, results: list[Any], summaries: list[Any], plan: dict[str, Any], info: dict[str, Any], calls: CallLog) -> None:
    from townsquare.api.commands import EventStore

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
    store = EventStore(out / "llm_calls.sqlite")
    try:
        store.write_now("llm_calls", calls.rows)
    finally:
        store.close()


# --------------------------------------------------------------------------- the command


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("some")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--tasks", default=None, metavar="T1,T2", help="Tasks by abbreviation or SoMe folder name (default: all that apply).")
    @click.option("--per-task", type=click.IntRange(min=1), default=10, show_default=True, help="Queries sampled per task.")
    @click.option("--split", type=int, default=None, help="Round from which labels come; the tools see rounds before it (default: half the run).")
    @click.option("--some-data", type=click.Path(file_okay=False), default=None, help="SoMe's datasets folder (one ground_truth.json per task) instead of the run's own ground truth.")
    @click.option("--database", type=click.Path(file_okay=False), default=None, help="A SoMe database folder (post_data/, user_data/, knowledge_data/) for the tools.")
    @click.option("--knowledge", type=click.Path(dir_okay=False), default=None, help="A JSON list of reports for knowledge_retrieve.")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key of the run's scenario (retries, budget...).")
    @click.option("--llm", "llm_spec", metavar="PROVIDER[:MODEL]", default=None, help="The agent's LLM (default: the run's).")
    @click.option("--judge", "judges", multiple=True, metavar="PROVIDER[:MODEL]", help="An LLM judge (repeat to average several; default: the agent's LLM).")
    @click.option("--max-steps", type=click.IntRange(min=1), default=12, show_default=True, help="Replies an agent may spend on one query.")
    @click.option("--max-tokens", type=click.IntRange(min=16), default=512, show_default=True, help="Completion tokens per agent reply.")
    @click.option("--max-tool-chars", type=click.IntRange(min=300), default=6000, show_default=True, help="Longest tool answer shown to the agent.")
    @click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="Queries worked on at once.")
    @click.option("--votes", type=click.IntRange(min=1), default=3, show_default=True, help="Judge readings per comment for UEA's labels.")
    @click.option("--window-rounds", type=click.IntRange(min=1), default=2, show_default=True, help="RED: rounds per time window.")
    @click.option("--min-posts", type=click.IntRange(min=2), default=2, show_default=True, help="RED/SES/SMQ: posts a term needs to be a topic.")
    @click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False), default=None, help="TOML file replacing some of SoMe's prompts.")
    @click.option("--seed", type=int, default=0, show_default=True, help="Seeds the sampling of queries.")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Output folder (default RUN/some).")
    @common_options
    def some_cmd(run_dir: str, tasks: str | None, per_task: int, split: int | None, some_data: str | None, database: str | None,
                 knowledge: str | None, overrides: tuple[str, ...], llm_spec: str | None, judges: tuple[str, ...], max_steps: int, max_tokens: int,
                 max_tool_chars: int, concurrency: int, votes: int, window_rounds: int, min_posts: int, prompts_file: str | None,
                 seed: int, out: str | None, **_: Any) -> None:
        """SoMe (Xue et al.): eight social-media agent tasks with eight tools, over RUN's events."""
        from townsquare.api import LLMFault, RunStopped, UsageError, data_path
        from townsquare.api.commands import open_run

        from .harness import HarnessSettings
        from .scoring import format_table, summarise
        from .tasks import TASKS, task_type
        from .tools import ToolSettings

        open_run(run_dir)
        chosen = [task_type(t) for t in tasks.split(",") if t.strip()] if tasks else list(TASKS.values())
        if not chosen:
            raise UsageError("--tasks: no task named")
        if database and not some_data:
            raise UsageError("--database: give --some-data too (the database serves SoMe's own queries)")
        some_data, database = (str(data_path(p)) if p else None for p in (some_data, database))  # data:NAME -> installed dataset
        prompts = load_some_prompts(prompts_file)
        started = time.perf_counter()
        plan = plan_queries(run_dir, chosen, per_task=per_task, split=split, seed=seed, some_data=some_data, database=database,
                            knowledge=knowledge, prompts=prompts, window_rounds=window_rounds, min_posts=min_posts)
        settings = HarnessSettings(max_steps=max_steps, max_tokens=max_tokens, concurrency=concurrency,
                                   tools=ToolSettings(max_answer_chars=max_tool_chars))
        target = Path(out) if out else Path(run_dir) / "some"
        try:
            results, info, calls = asyncio.run(_evaluate(run_dir, target, llm_spec, judges, plan, prompts, settings, votes, overrides))
        except LLMFault as exc:
            raise RunStopped(f"SoMe evaluation stopped: LLM call failed: {exc.describe()}; run the same command again to resume") from None
        except RunStopped as exc:
            raise RunStopped(f"SoMe evaluation stopped: {exc}; the answers so far are cached: run the same command again to resume") from None
        by_task = {t.name: [r for r in results if r.task == t.name] for t in chosen}
        summaries = [summarise(t, by_task[t.name]) for t in chosen if by_task[t.name]]
        info.update(run=str(run_dir), split=plan.get("split"), per_task=per_task, seed=seed, source=some_data or "run",
                    wall_seconds=round(time.perf_counter() - started, 1), llm_calls=len(calls.rows),
                    provider_calls=sum(1 for row in calls.rows if row[5] in ("ok", "error")))
        write_outputs(target, results, summaries, plan, info, calls)
        for note in plan["notes"]:
            click.echo(f"note: {note}", err=True)
        click.echo(format_table(summaries))
        click.echo(f"{len(results)} queries, {info['llm_calls']} LLM calls, {info['wall_seconds']} s; written to {target}")
