"""Runs of one scenario over several seeds (the replicates ``validate --seeds N`` and ``calibrate``
score): seed ``s, s + 1, ...`` from the scenario's own, each in ``OUT/seed-S``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable

import click

from townsquare.api import UsageError


def replicate_seeds(scenario: str | Path, seeds: int, overrides: Iterable[str] = (), plugin_options: Iterable[str] = ()) -> list[int]:
    from townsquare.api.commands import load_plugins, load_scenario

    if seeds < 1:
        raise UsageError(f"--seeds {seeds}: at least 1")
    first = load_scenario(scenario, list(overrides), load_plugins(plugin_options)).model.seed
    return [first + k for k in range(seeds)]


def run_replicates(scenario: str | Path, seeds: int, out: Path, *, overrides: Iterable[str] = (),
                   plugin_options: Iterable[str] = (), reuse: bool = False) -> list[Path]:
    """Run ``scenario`` ``seeds`` times into ``out/seed-S``; the run directories. ``out`` must
    not hold runs already (score those directly), unless ``reuse``: then a finished run of the
    same scenario file, seed and overrides there is kept."""
    from townsquare.api.commands import open_run, start_run

    overrides, plugin_options = list(overrides), list(plugin_options)
    runs = []
    for seed in replicate_seeds(scenario, seeds, overrides, plugin_options):
        target = out / f"seed-{seed}"
        if reuse and _finished(target, scenario, seed, overrides):
            click.echo(f"seed {seed}: {target} (finished before: reused)", err=True)
            runs.append(target)
            continue
        if target.exists() and any(target.iterdir()):
            raise UsageError(f"{target}: exists already: remove it, choose another --out, or score the runs there "
                             f"(townsquare validate {out}/seed-* --against ...)")
        click.echo(f"seed {seed}: running {scenario} into {target}", err=True)
        run_dir, summary = start_run(scenario, overrides=overrides, seed=seed, out=target, plugin_options=plugin_options)
        click.echo(f"seed {seed}: {summary.rounds_completed} rounds, {summary.actions} actions", err=True)
        runs.append(open_run(str(run_dir.path)).path)
    sys.stderr.flush()
    return runs



def _finished(target: Path, scenario: str | Path, seed: int, overrides: list[str]) -> bool:
    import json

    try:
        manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (manifest.get("status") == "finished" and manifest.get("seed") == seed and manifest.get("overrides") == overrides
            and Path(str(manifest.get("source"))).resolve() == Path(scenario).resolve())
