"""``townsquare eval zhou RUN``: Zhou et al.'s automatic evaluation of a run (§4.2; Tables 1, 2
and 15; fig. 6), computed by :mod:`.zhou_metrics`.

Per stage and action: persona-post similarity of acted-on vs browsed-only posts and ΔBS
(``--similarity``: ``auto`` = BERTScore when ``bert_score`` is installed and its model is on
this machine, else the run's embedder's cosine), C.score and ΔC (``--nli``: ``llm`` = an LLM
judge, ``transformers:MODEL`` = a Hugging Face NLI model, ``none``); per stage for posts and
comments: distinct-1/2 and the LLM judge's Info / Cons / Hum (1-3; ``--no-quality`` skips
them); the knowledge-adoption rate; the regular agents' follower distribution; a warning
where likes were decided by the similarity rule (ΔBS is then circular:
:func:`.zhou_metrics.circular_notes`).

The LLM judge is the run's own LLM, or ``--judge PROVIDER[:MODEL]``, behind the run's
middleware (its response cache in the run directory, the budget ``--set
plugins.llm_budget...``, retries; :class:`townsquare.api.commands.EvalLLMs`), so an
evaluation replays from the cache; every judge call is an ``llm_calls`` row in
``RUN/zhou_eval.sqlite`` (beside ``--out``), and a budget stop names the command that resumes.
``--estimate`` prints the judges' calls, tokens and cost per stage and calls no model. Writes
``RUN/zhou_eval.json`` (or ``--out``), which ``townsquare report`` shows, and prints the
tables. Nothing in the run's tables changes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl

EVAL_FILE = "zhou_eval.json"
#: the judges' ``llm_calls`` rows, beside the result (a run's own tables are never written)
CALLS_FILE = "zhou_eval.sqlite"


def evaluate_run(run_path: str, *, similarity: str = "auto", bertscore_model: str | None = None, bertscore_layers: int | None = None,
                 nli: str = "llm", quality: bool = True, judge_spec: str | None = None, pairs: int = 200, texts: int = 60,
                 populations: tuple[str, ...] = (), seed: int = 0, prompts_file: str | None = None,
                 plugin_options: tuple[str, ...] = (), plugins: Any = None, overrides: tuple[str, ...] = (),
                 journal: Path | None = None, resume: str | None = None, dry_run: Any = None) -> Any:
    """The :class:`.zhou_metrics.ZhouResult` of the run in ``run_path``. The judges' calls are
    ``llm_calls`` rows in ``journal`` (default ``RUN/zhou_eval.sqlite``); with ``dry_run`` (an
    estimate) no similarity is computed and the judges are stand-ins."""
    from townsquare.api import UsageError
    from townsquare.api.commands import open_run

    from . import pair_similarity, similarity as run_similarity, tables, zhou_metrics
    from .zhou_judges import judge_prompts
    from .zhou_section import _NoSimilarity

    if nli != "llm" and nli != "none" and not nli.startswith("transformers:"):
        raise UsageError(f"--nli {nli!r}: expected llm, none or transformers:MODEL")
    prompts = judge_prompts(prompts_file)
    run = tables.open_run(run_path)
    try:
        def embedder() -> tuple[Any, str]:
            cache, name = run_similarity.run_embedder(run.manifest, str(run.path / "manifest.json"), plugin_options, plugins)
            return run_similarity.sync_embed(cache), name

        notes: list[str] = []
        scorer = _NoSimilarity() if dry_run is not None else \
            pair_similarity.make_similarity(similarity, embedder, bertscore_model, notes, num_layers=bertscore_layers)
        latest = open_run(str(run.path)).latest_checkpoint()
        result, work = zhou_metrics.measure(run.db, run.manifest, scorer, checkpoint=latest[1] if latest else None,
                                            populations=populations, pairs=pairs, seed=seed)
        result.notes += notes
    finally:
        run.close()
    if nli.startswith("transformers:") and dry_run is None:
        from .zhou_judges import TransformersNLIJudge

        asyncio.run(zhou_metrics.judge(result, work, TransformersNLIJudge(nli.split(":", 1)[1])))
        nli = "none"
    if nli == "llm" or quality:
        asyncio.run(_judge_with_llm(run_path, result, work, prompts, nli == "llm", quality, judge_spec, texts, seed,
                                    plugin_options, plugins, overrides, journal or Path(run_path) / CALLS_FILE, resume, dry_run))
    return result


async def _judge_with_llm(run_path: str, result: Any, work: Any, prompts: dict[str, str], with_nli: bool, with_quality: bool,
                          judge_spec: str | None, texts: int, seed: int, plugin_options: tuple[str, ...], plugins: Any,
                          overrides: tuple[str, ...], journal: Path, resume: str | None, dry_run: Any) -> None:
    from townsquare.api import UsageError
    from townsquare.api.commands import EvalLLMs, load_run

    from .zhou_judges import LLMNLIJudge, QualityJudge
    from .zhou_metrics import judge

    run_dir, scenario, plugins = load_run(run_path, plugins, plugin_options, overrides=list(overrides))
    judged = scenario if judge_spec is None else None
    evaluator = EvalLLMs(scenario, lambda more: load_run(run_path, plugins, overrides=[*overrides, *more])[1], run_dir.path,
                         journal=journal, resume=resume, dry_run=dry_run)
    if (judged or evaluator.scenario_for(judge_spec)).llm is None:
        raise UsageError(f"{run_path}: the run has no [llm] to judge with: give --judge PROVIDER[:MODEL], "
                         "or --nli none --no-quality for the numbers that need no judge")
    if evaluator.identity(judge_spec) == evaluator.identity(None):
        result.notes.append(f"the judge is {evaluator.identity(None)}, the model the agents ran on: it grades texts it wrote "
                            "(give --judge another model)")
    try:
        # the judge behind the run's middleware: its cache (in the run directory), budget and retries;
        # a name of its own per judge, so the cache never gives one judge's answers to another
        llm = evaluator.client(judge_spec, "judge" if judge_spec is None else f"judge:{judge_spec}")
        await judge(result, work, LLMNLIJudge(llm, prompts) if with_nli else None,
                    QualityJudge(llm, prompts) if with_quality else None, texts=texts, seed=seed)
    finally:
        result.llm_calls = evaluator.write_journal()
        await evaluator.aclose()


def estimate_lines(run_dir: str, **options: Any) -> list[str]:
    """The judges' calls, tokens and cost per stage, from a dry run (no similarity, no model)."""
    from townsquare.api.commands import DryRun

    dry = DryRun({"zhou.nli": 2, "zhou.quality": 30})
    evaluate_run(run_dir, dry_run=dry, **options)
    return dry.report(f"to judge {run_dir}", "prompt tokens ~ characters / 4; completion tokens assumed: NLI labels 2, grades 30 "
                      "per call; repairs not included. BS / ΔBS (BERTScore or the embedder) make no LLM call.")


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("zhou")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--similarity", type=click.Choice(["auto", "embedder", "bertscore"]), default="auto", show_default=True,
                  help="Persona-post similarity for BS / ΔBS: BERTScore (bert_score installed, its model on this machine) or the run's embedder's cosine.")
    @click.option("--bertscore-model", default=None, metavar="MODEL", help="BERTScore's model_type: a name or a local folder (default: bert_score's for English).")
    @click.option("--bertscore-layers", type=click.IntRange(min=1), default=None, metavar="N",
                  help="The layer BERTScore matches tokens at (needed for a local folder; bert_score knows it for named models).")
    @click.option("--nli", default="llm", show_default=True, metavar="llm|transformers:MODEL|none",
                  help="The NLI judge behind C.score / ΔC.")
    @click.option("--no-quality", is_flag=True, help="Skip the LLM judge's Info / Cons / Hum grades.")
    @click.option("--judge", "judge_spec", default=None, metavar="PROVIDER[:MODEL]", help="The LLM judge (default: the run's LLM).")
    @click.option("--pairs", type=click.IntRange(min=0), default=200, show_default=True,
                  help="(agent, post) pairs sampled per stage and group for BS and C.score (0: all).")
    @click.option("--texts", type=click.IntRange(min=0), default=60, show_default=True,
                  help="Posts and comments graded per stage (the paper grades 120 of each).")
    @click.option("--population", "populations", multiple=True, metavar="NAME",
                  help="The regular agents' population (repeatable; default: those with feed stages, else those that browsed).")
    @click.option("--seed", type=int, default=0, help="Seeds the samples.")
    @click.option("--prompts", "prompts_file", default=None, type=click.Path(dir_okay=False),
                  help="A TOML file replacing some of the judges' prompts (nli, quality).")
    @click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                  help="Override a key of the run's scenario for the judges (retries, plugins.llm_budget...).")
    @click.option("--out", type=click.Path(dir_okay=False), default=None,
                  help=f"JSON file to write (default RUN/{EVAL_FILE}); the judges' llm_calls go beside it (.sqlite).")
    @click.option("--estimate", is_flag=True, help="Print the judges' calls, tokens and cost per stage; call no model.")
    @common_options
    def zhou(run_dir: str, similarity: str, bertscore_model: str | None, bertscore_layers: int | None, nli: str, no_quality: bool,
             judge_spec: str | None, pairs: int, texts: int, populations: tuple[str, ...], seed: int, prompts_file: str | None,
             overrides: tuple[str, ...], out: str | None, estimate: bool, plugin_options: tuple[str, ...], **_: Any) -> None:
        """Zhou et al.'s metrics for RUN: ΔBS, C.score / ΔC, distinct-1/2, Info / Cons / Hum, knowledge adoption, per stage."""
        from townsquare.api import LLMFault, RunStopped
        from townsquare.api.commands import cached_answers, calls_line, check_spec, clear_earlier_answers, command_line, load_run, open_run

        from .zhou_text import format_result

        open_run(run_dir)
        if judge_spec is not None:
            check_spec(lambda more: load_run(run_dir, None, plugin_options, overrides=[*overrides, *more])[1], judge_spec, "--judge")
        options = dict(similarity=similarity, bertscore_model=bertscore_model, bertscore_layers=bertscore_layers, nli=nli,
                       quality=not no_quality, judge_spec=judge_spec, pairs=pairs, texts=texts, populations=populations, seed=seed,
                       prompts_file=prompts_file, plugin_options=plugin_options, overrides=overrides)
        if estimate:
            for line in estimate_lines(run_dir, **options):
                click.echo(line)
            return
        target = Path(out) if out else Path(run_dir) / EVAL_FILE
        journal = target.with_suffix(".sqlite")
        clear_earlier_answers(journal)
        known = cached_answers(Path(run_dir))
        resume = command_line(click.get_current_context())
        try:
            result = evaluate_run(run_dir, journal=journal, resume=resume, **options)
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}; the answers so far are in the run's "
                             f"response cache: resume with {resume}") from None
        target.write_text(json.dumps(result.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
        click.echo(format_result(result))
        calls = result.llm_calls
        click.echo(f"{calls_line(calls, cached_answers(Path(run_dir)) - known)}; recorded in {journal}")
        click.echo(f"written to {target}")
