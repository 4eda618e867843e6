"""The machinery ``townsquare ablate`` and ``townsquare sweep`` share: variants of a scenario
(``--set`` lines and ``-p`` options), one ordinary run per variant x seed in its own folder,
played by separate ``townsquare run`` processes (``workers`` at once) and resumable (a run whose
manifest says ``finished`` is skipped, a stopped or killed one resumed, a folder left without a
manifest started again), and a run's value of a metric from its series."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import structlog

from townsquare.errors import UsageError

log = structlog.get_logger("townsquare.commands.study_runs")

SUMMARIES = ("mean", "last")


@dataclass
class Variant:
    name: str
    overrides: list[str] = field(default_factory=list)
    plugin_options: list[str] = field(default_factory=list)

    def args(self) -> list[str]:
        return [*(a for o in self.overrides for a in ("--set", o)), *(a for p in self.plugin_options for a in ("-p", p))]


@dataclass
class Job:
    variant: Variant
    seed: int
    path: Path

    def status(self) -> str | None:
        try:
            return json.loads((self.path / "manifest.json").read_text(encoding="utf-8")).get("status")
        except (OSError, ValueError):
            return None


def check_variants(scenario: str | Path, variants: Sequence[Variant], common: Sequence[str] = (), what: str = "--variant") -> None:
    """Resolve the scenario as each variant changes it, so a misspelt key or plugin stops the
    command (one line naming the variant, ``what`` says as what) before any run starts."""
    from townsquare.plugin_manager import make_plugin_manager, parse_plugin_options
    from townsquare.launch.scenario_files import load_scenario

    for variant in variants:
        enable, disable = parse_plugin_options([*common, *variant.plugin_options])
        try:
            load_scenario(scenario, list(variant.overrides), make_plugin_manager(enable=enable, disable=disable))
        except UsageError as exc:
            raise UsageError(f"{what} {variant.name}: {exc}") from None


def run_jobs(scenario: str | Path, jobs: list[Job], *, workers: int, common: Sequence[str] = (), env: dict[str, str] | None = None,
             on_done: Callable[[Job, str], None] | None = None) -> list[tuple[Job, str]]:
    """Play the jobs not finished yet (``workers`` processes at once); returns (job, outcome)."""

    def play(job: Job) -> tuple[Job, str]:
        status = job.status()
        if status == "finished":
            outcome = "skipped (finished)"
        else:
            if status is None and job.path.exists():
                shutil.rmtree(job.path)  # killed before its manifest: nothing to keep
            if status is None:
                job.path.parent.mkdir(parents=True, exist_ok=True)
                command = ["run", str(scenario), "--out", str(job.path), "--seed", str(job.seed), "--quiet", *job.variant.args()]
            else:
                command = ["resume", str(job.path), "--quiet"]
            done = subprocess.run([sys.executable, "-m", "townsquare.cli", *command, *common], capture_output=True, text=True,
                                  env={**os.environ, **(env or {})})
            last = (done.stderr.strip().splitlines() or [""])[-1]
            outcome = "finished" if done.returncode == 0 and job.status() == "finished" else f"failed ({done.returncode}): {last}"
            log.info("study.run", variant=job.variant.name, seed=job.seed, outcome=outcome)
        if on_done is not None:
            on_done(job, outcome)
        return job, outcome

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(play, jobs))


def summary_value(values: dict[int, float], summary: str) -> float:
    """A run's value of a metric from its series (round -> value): ``last`` (the last round's),
    ``mean`` (over rounds) or ``end:K`` (the mean of the last K rounds)."""
    rounds = sorted(values)
    if summary == "last":
        return values[rounds[-1]]
    if summary.startswith("end:"):
        rounds = rounds[-end_rounds(summary):]
    return sum(values[r] for r in rounds) / len(rounds)


def end_rounds(summary: str) -> int:
    """K of ``end:K``; a one-line error for anything but ``mean``, ``last`` and ``end:K`` (K ≥ 1)."""
    if summary in SUMMARIES:
        return 0
    head, _, count = summary.partition(":")
    if head != "end" or not count.isdigit() or int(count) < 1:
        raise UsageError(f"--summary {summary}: choose mean, last or end:K (the mean of the last K rounds)")
    return int(count)
