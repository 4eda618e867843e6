"""The ``recsys`` plugin's commands (registered by :mod:`townsquare.platforms.recsys`):

- ``townsquare eval recommenders SOURCE``: every item recommender trained and scored on the
  same split (:mod:`.recommender_eval`); SOURCE is a MovieLens folder or a run directory;
- ``townsquare recbole RUN``: the run's interactions as RecBole atomic files (:mod:`.recbole`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import click

from townsquare.api import EmbeddingCache, UsageError


def _embedder(plugins: Any, scenario: Any = None) -> EmbeddingCache:
    from townsquare.api import BuildContext

    if scenario is not None:
        choice = scenario.embedder
        return EmbeddingCache(choice.spec.factory(choice.config, BuildContext(services=None, seed=0, base_dir=scenario.base_dir)))
    spec = plugins.registry.get("embedder", "hash", "eval recommenders")
    return EmbeddingCache(spec.factory(spec.config_model() if spec.config_model else None, BuildContext(services=None, seed=0)))


def movielens_interactions(folder: Path) -> tuple[list[Any], list[Any]]:
    from townsquare.lib.movielens import load_movielens_data

    from .recommender_eval import Interaction

    data = load_movielens_data(folder)
    if not data.ratings:
        raise UsageError(f"{folder}: no ratings to evaluate on")
    return data.items, [Interaction(r.user, r.item, float(r.timestamp), min(10.0, 2 * r.rating)) for r in data.ratings]


def run_interactions(run_dir: Any) -> tuple[list[Any], list[Any], dict[str, set[str]]]:
    """A run's simulated watches (in order), its personas' earlier ratings (before time 0) and
    their held-out later items (``future_items``)."""
    from .recommender_eval import Interaction

    db = sqlite3.connect(f"file:{run_dir.events_path}?mode=ro", uri=True)
    try:
        watches = db.execute("SELECT agent_id, target_post, seq, detail FROM actions WHERE kind = 'watch' AND ok = 1 ORDER BY seq").fetchall()
        personas = db.execute("SELECT agent_id, persona FROM agents").fetchall()
    finally:
        db.close()
    simulated = [Interaction(a, i, float(seq), json.loads(d or "{}").get("rating")) for a, i, seq, d in watches]
    earlier, future = [], {}
    for agent, text in personas:
        fields = json.loads(text).get("fields", {})
        history = [h for h in fields.get("history") or () if isinstance(h, dict) and "id" in h]
        earlier += [Interaction(agent, h["id"], -float(len(history) - n), 2 * h["rating"] if h.get("rating") is not None else None)
                    for n, h in enumerate(history)]
        if fields.get("future_items"):
            future[agent] = {str(i) for i in fields["future_items"]}
    return simulated, earlier, future


def evaluate_source(source: str, plugin_options: tuple[str, ...], *, how: str, test_fraction: float, k: int, seed: int,
                    wanted: tuple[str, ...]) -> dict[str, dict[str, dict[str, float]]]:
    from townsquare.lib.movielens import movielens_layout

    from .recommender_eval import Split, evaluate, item_recommenders, split

    from townsquare.lib.data_paths import data_path

    path = data_path(source)  # data:movielens-latest-small -> the installed dataset
    if (path / "manifest.json").is_file():
        from townsquare.api.commands import load_run

        from .catalogue import RecsysConfig, load_catalogue

        run_dir, scenario, plugins = load_run(str(path), extra_plugin_options=plugin_options)
        config = scenario.platform.config
        if not isinstance(config, RecsysConfig):
            raise UsageError(f"{path}: the run's platform is {scenario.platform.spec.name!r}, not recsys")
        items = load_catalogue(config, scenario.base_dir).items
        specs = item_recommenders(plugins, wanted)
        ran = scenario.recommender.spec.name
        if ran in specs:
            specs[ran] = (specs[ran][0], scenario.recommender.config)
        simulated, earlier, future = run_interactions(run_dir)
        embedder = _embedder(plugins, scenario)
        history = earlier if config.history_in_log else []
        out = {f"simulated feedback ({how})": asyncio.run(evaluate(specs, items, split(simulated, how, test_fraction), k=k, seed=seed,
                                                                   embedder=embedder, extra_train=history))}
        if future:
            seen = {(x.user, x.item) for x in [*history, *simulated]}
            held = {u: {i for i in items_ if (u, i) not in seen} for u, items_ in future.items()}
            data = Split([*history, *simulated], {u: i for u, i in held.items() if i})
            out["held-out real ratings (future_items)"] = asyncio.run(evaluate(specs, items, data, k=k, seed=seed, embedder=embedder))
        return out
    from townsquare.api.commands import load_plugins

    movielens_layout(path)
    items, interactions = movielens_interactions(path)
    plugins = load_plugins(plugin_options)
    specs = item_recommenders(plugins, wanted)
    result = asyncio.run(evaluate(specs, items, split(interactions, how, test_fraction), k=k, seed=seed, embedder=_embedder(plugins)))
    return {f"{path.name}: real ratings ({how})": result}


def register(cli: Any) -> None:
    from townsquare.api.commands import common_options, eval_group

    group = eval_group(cli)

    @group.command("recommenders")
    @click.argument("source")
    @click.option("--split", "how", type=click.Choice(["leave-last-out", "temporal", "global-temporal"]), default="leave-last-out", show_default=True)
    @click.option("--test-fraction", type=click.FloatRange(0.01, 0.99), default=0.2, show_default=True, help="temporal: each user's latest share held out; global-temporal: the latest share of all.")
    @click.option("--k", type=click.IntRange(min=1), default=10, show_default=True, help="List length.")
    @click.option("--recommender", "wanted", multiple=True, help="Only these (default: every item recommender).")
    @click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random recommender and of ties.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @common_options
    def recommenders(source: str, how: str, test_fraction: float, k: int, wanted: tuple[str, ...], seed: int, as_json: bool,
                     plugin_options: tuple[str, ...], **_: Any) -> None:
        """Recall@K, NDCG@K, coverage, Gini and popularity bias of every item recommender, on a
        MovieLens folder's ratings or a run's simulated watches (and its held-out real ratings)."""
        sections = evaluate_source(source, plugin_options, how=how, test_fraction=test_fraction, k=k, seed=seed,
                                   wanted=wanted)
        if as_json:
            click.echo(json.dumps({"k": k, "split": how, "sections": sections}))
            return
        from .recommender_eval import format_table

        click.echo(format_table(sections, k))

    @cli.command("recbole")
    @click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder for the atomic files (default: RUN/recbole).")
    @click.option("--name", default=None, help="Dataset name, the files' stem (default: the run's name).")
    @click.option("--impressions", is_flag=True, help="Also items shown but never watched, with label 0 (watches: label 1).")
    @click.option("--history", is_flag=True, help="Also the personas' earlier ratings (e.g. MovieLens users'), before the run.")
    @common_options
    def recbole(run_dir: str, out: str | None, name: str | None, impressions: bool, history: bool, plugin_options: tuple[str, ...],
                **_: Any) -> None:
        """The run's interactions as RecBole atomic files: NAME.inter, NAME.item, NAME.user."""
        from .recbole import export_recbole

        for path in export_recbole(run_dir, Path(out) if out else None, name, impressions=impressions, history=history,
                                   plugin_options=plugin_options):
            click.echo(str(path))
