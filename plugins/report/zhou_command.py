"""``townsquare eval zhou RUN``: Zhou et al.'s automatic evaluation of a run (§4.2; Tables 1, 2
and 15; fig. 6), computed by :mod:`.zhou_metrics`.

Per stage and action: persona-post similarity of acted-on vs browsed-only posts and ΔBS
(``--similarity``: ``auto`` = BERTScore when ``bert_score`` is installed, else the run's
embedder's cosine), C.score and ΔC (``--nli``: ``llm`` = an LLM judge, ``transformers:MODEL``
= a Hugging Face NLI model, ``none``); per stage for posts and comments: distinct-1/2 and the
LLM judge's Info / Cons / Hum (1-3; ``--no-quality`` skips them); the knowledge-adoption rate;
the regular agents' follower distribution. The LLM judge is the run's own LLM, or ``--judge
PROVIDER[:MODEL]``, behind the run's middleware (its response cache in the run directory,
budget, retries), so an evaluation replays from the cache. Writes ``RUN/zhou_eval.json`` (or
``--out``), which ``townsquare report`` shows, and prints the tables. Nothing in the run's
tables changes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from townsquare.api import hookimpl

EVAL_FILE = "zhou_eval.json"


def evaluate_run(run_path: str, *, similarity: str = "auto", bertscore_model: str | None = None, nli: str = "llm",
                 quality: bool = True, judge_spec: str | None = None, pairs: int = 200, texts: int = 60,
                 populations: tuple[str, ...] = (), seed: int = 0, prompts_file: str | None = None,
                 plugin_options: tuple[str, ...] = (), plugins: Any = None) -> Any:
    """The :class:`.zhou_metrics.ZhouResult` of the run in ``run_path``."""
    from townsquare.api import UsageError
    from townsquare.api.commands import open_run

    from . import pair_similarity, similarity as run_similarity, tables, zhou_metrics
    from .zhou_judges import judge_prompts

    if nli != "llm" and nli != "none" and not nli.startswith("transformers:"):
        raise UsageError(f"--nli {nli!r}: expected llm, none or transformers:MODEL")
    prompts = judge_prompts(prompts_file)
    run = tables.open_run(run_path)
    try:
        def embedder() -> tuple[Any, str]:
            cache, name = run_similarity.run_embedder(run.manifest, str(run.path / "manifest.json"), plugin_options, plugins)
            return run_similarity.sync_embed(cache), name

        notes: list[str] = []
        scorer = pair_similarity.make_similarity(similarity, embedder, bertscore_model, notes)
        latest = open_run(str(run.path)).latest_checkpoint()
        result, work = zhou_metrics.measure(run.db, run.manifest, scorer, checkpoint=latest[1] if latest else None,
                                            populations=populations, pairs=pairs, seed=seed)
        result.notes += notes
    finally:
        run.close()
    if nli.startswith("transformers:"):
        from .zhou_judges import TransformersNLIJudge

        asyncio.run(zhou_metrics.judge(result, work, TransformersNLIJudge(nli.split(":", 1)[1])))
        nli = "none"
    if nli == "llm" or quality:
        asyncio.run(_judge_with_llm(run_path, result, work, prompts, nli == "llm", quality, judge_spec, texts, seed,
                                    plugin_options, plugins))
    return result


async def _judge_with_llm(run_path: str, result: Any, work: Any, prompts: dict[str, str], with_nli: bool, with_quality: bool,
                          judge_spec: str | None, texts: int, seed: int, plugin_options: tuple[str, ...], plugins: Any) -> None:
    from townsquare.api import BuildContext, Services, UsageError
    from townsquare.api.commands import Simulation, llm_overrides, load_run

    from .zhou_judges import LLMNLIJudge, QualityJudge
    from .zhou_metrics import judge

    run_dir, scenario, plugins = load_run(run_path, plugins, plugin_options, overrides=llm_overrides(judge_spec))
    if scenario.llm is None:
        raise UsageError(f"{run_path}: the run has no [llm] to judge with: give --judge PROVIDER[:MODEL], "
                         "or --nli none --no-quality for the numbers that need no judge")
    simulation = Simulation(scenario, plugins, run_dir)
    ctx = BuildContext(services=Services(platform=None, embedder=None, run_dir=str(run_dir.path)),  # type: ignore[arg-type]
                       seed=scenario.model.seed, base_dir=scenario.base_dir, scenario=scenario.model)
    try:
        # the judge's provider behind the run's middleware: its cache (in the run directory), budget and retries
        llm = simulation.build_llm(ctx).for_agent("judge")
        await judge(result, work, LLMNLIJudge(llm, prompts) if with_nli else None,
                    QualityJudge(llm, prompts) if with_quality else None, texts=texts, seed=seed)
    finally:
        await simulation.aclose()


@hookimpl
def townsquare_register_commands(cli):
    from townsquare.api.commands import common_options, eval_group

    @eval_group(cli).command("zhou")
    @click.argument("run_dir", metavar="RUN")
    @click.option("--similarity", type=click.Choice(["auto", "embedder", "bertscore"]), default="auto", show_default=True,
                  help="Persona-post similarity for BS / ΔBS: BERTScore (bert_score installed) or the run's embedder's cosine.")
    @click.option("--bertscore-model", default=None, metavar="MODEL", help="BERTScore's model_type (default: bert_score's for English).")
    @click.option("--nli", default="llm", show_default=True, metavar="llm|transformers:MODEL|none",
                  help="The NLI judge behind C.score / ΔC.")
    @click.option("--no-quality", is_flag=True, help="Skip the LLM judge's Info / Cons / Hum grades.")
    @click.option("--judge", "judge_spec", default=None, metavar="PROVIDER[:MODEL]", help="The LLM judge (default: the run's LLM).")
    @click.option("--pairs", type=click.IntRange(min=0), default=200, show_default=True,
                  help="(agent, post) pairs sampled per stage and group for BS and C.score (0: all).")
    @click.option("--texts", type=click.IntRange(min=0), default=60, show_default=True,
                  help="Posts and comments graded per stage (the paper grades 120 of each).")
    @click.option("--population", "populations", multiple=True, metavar="NAME",
                  help="The regular agents' population (repeatable; default: those with feed stages, else all).")
    @click.option("--seed", type=int, default=0, help="Seeds the samples.")
    @click.option("--prompts", "prompts_file", default=None, type=click.Path(dir_okay=False),
                  help="A TOML file replacing some of the judges' prompts (nli, quality, quality_repair).")
    @click.option("--out", type=click.Path(dir_okay=False), default=None, help=f"JSON file to write (default RUN/{EVAL_FILE}).")
    @common_options
    def zhou(run_dir: str, similarity: str, bertscore_model: str | None, nli: str, no_quality: bool, judge_spec: str | None,
             pairs: int, texts: int, populations: tuple[str, ...], seed: int, prompts_file: str | None, out: str | None,
             plugin_options: tuple[str, ...], **_: Any) -> None:
        """Zhou et al.'s metrics for RUN: ΔBS, C.score / ΔC, distinct-1/2, Info / Cons / Hum, knowledge adoption, per stage."""
        from townsquare.api import LLMFault, RunStopped

        from .zhou_text import format_result

        try:
            result = evaluate_run(run_dir, similarity=similarity, bertscore_model=bertscore_model, nli=nli, quality=not no_quality,
                                  judge_spec=judge_spec, pairs=pairs, texts=texts, populations=populations, seed=seed,
                                  prompts_file=prompts_file, plugin_options=plugin_options)
        except LLMFault as exc:  # retries are the middleware's; what is left stops the evaluation cleanly
            raise RunStopped(f"evaluation stopped: LLM call failed: {exc.describe()}") from None
        target = Path(out) if out else Path(run_dir) / EVAL_FILE
        target.write_text(json.dumps(result.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
        click.echo(format_result(result))
        click.echo(f"written to {target}")
