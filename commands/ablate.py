"""``townsquare ablate SCENARIO --variant NAME="-p no:X --set k=v" ... --seeds N``.

Every variant x seed is one ordinary run, ``<out>/<variant>/seed-<S>``, played by a separate
``townsquare run`` process (at most ``jobs`` at once). The command is resumable: a run whose
manifest says ``finished`` is skipped, a stopped or killed one is resumed, and a folder left
without a manifest is started again.

Then, per metric (every ``metrics`` row plus the counts ``compare`` reads: ``rounds.active``,
``rounds.actions``, ``rounds.llm_calls``, ``posts.count``), each run is summarised by its mean
over rounds (``summary = "mean"``) or its last round's value (``"last"``), and the table gives
per variant the mean over seeds, the 95 % Student-t confidence interval, the difference to the
baseline variant (the first one unless named) and a two-sided t-test against it (see
:mod:`townsquare.lib.stats`): by default the paired test, each run paired with the baseline's run
of the same seed (common random numbers make those two correlated), or Welch's
unequal-variances test (``test = "welch"``: the variants as independent samples). Written as
``ablation.md``, ``ablation.csv`` and ``ablation.png`` in ``out``.
"""

from __future__ import annotations

import csv
import math
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import click

from townsquare.api import hookimpl
from townsquare.cli.options import common_options, log_json
from townsquare.cli.progress import AblateProgress, progress_mode
from townsquare.commands.compare import number_text, read_series, signed_text
from townsquare.commands.study_runs import Job, Variant, check_variants, end_rounds, run_jobs, summary_value
from townsquare.errors import UsageError
from townsquare.launch.scenario_files import read_scenario
from townsquare.lib.stats import NO_TEST, Interval, TTest, mean_interval, paired_test, welch_test

#: how a variant is tested against the baseline: runs paired by seed, or independent samples
TESTS = {"paired": "paired two-sided t-test, runs paired by seed", "welch": "Welch's two-sided t-test, unequal variances"}


def parse_variant(spec: str) -> Variant:
    """``NAME="-p no:X --set k=v"`` (an empty right side: the scenario as it is)."""
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or not name or any(ch in name for ch in "/\\ ") or name in (".", ".."):
        raise UsageError(f"--variant {spec!r}: expected NAME=\"-p no:PLUGIN --set key=value ...\" (NAME without spaces or slashes)")
    try:
        tokens = shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"--variant {name}: {exc}") from None
    variant = Variant(name)
    it = iter(tokens)
    for token in it:
        if token in ("-p", "--plugin", "--set"):
            value = next(it, None)
            if value is None:
                raise UsageError(f"--variant {name}: {token} needs a value")
            (variant.overrides if token == "--set" else variant.plugin_options).append(value)
        elif token.startswith("--set="):
            variant.overrides.append(token[6:])
        elif token.startswith("-p") and len(token) > 2 and not token.startswith("--"):
            variant.plugin_options.append(token[2:])
        else:
            raise UsageError(f"--variant {name}: unexpected {token!r} (a variant takes -p NAME, -p no:NAME and --set KEY=VALUE)")
    return variant


def plan(scenario: str | Path, variants: Sequence[Variant], seeds: int, out: Path, first_seed: int | None = None) -> list[Job]:
    if not variants:
        raise UsageError("give at least one --variant")
    names = [v.name for v in variants]
    if len(set(names)) < len(names):
        raise UsageError(f"--variant names repeat: {', '.join(names)}")
    if seeds < 2:
        raise UsageError("--seeds must be at least 2 (a confidence interval needs two runs)")
    base = int(read_scenario(scenario).get("seed", 0)) if first_seed is None else first_seed
    return [Job(v, base + i, out / v.name / f"seed-{base + i}") for v in variants for i in range(seeds)]


@dataclass
class Row:
    metric: str
    variant: str
    values: list[float]
    interval: Interval
    delta: float
    test: TTest | None  # None for the baseline itself
    #: the seed of each value's run
    seeds: list[int] = field(default_factory=list)


def summarise(jobs: list[Job], baseline: str, summary: str = "mean", test: str = "paired") -> list[Row]:
    """One row per metric x variant, over the finished runs."""
    end_rounds(summary)
    if test not in TESTS:
        raise UsageError(f"--test {test}: choose one of {', '.join(TESTS)}")
    per_variant: dict[str, dict[str, dict[int, float]]] = {}
    order: list[str] = []
    for job in jobs:
        if job.variant.name not in order:
            order.append(job.variant.name)
        if job.status() != "finished":
            continue
        for metric, values in read_series(job.path).series.items():
            if values:
                per_variant.setdefault(job.variant.name, {}).setdefault(metric, {})[job.seed] = summary_value(values, summary)
    if baseline not in order:
        raise UsageError(f"--baseline {baseline}: no such variant (variants: {', '.join(order)})")
    metrics = sorted({m for by_metric in per_variant.values() for m in by_metric})
    rows = []
    for metric in metrics:
        base = per_variant.get(baseline, {}).get(metric, {})
        base_mean = mean_interval(list(base.values())).mean
        for name in order:
            runs = per_variant.get(name, {}).get(metric, {})
            values = list(runs.values())
            interval = mean_interval(values)
            rows.append(Row(metric, name, values, interval, interval.mean - base_mean,
                            None if name == baseline else against(runs, base, test), list(runs)))
    return rows


def against(runs: dict[int, float], base: dict[int, float], test: str) -> TTest:
    """A variant's runs (value by seed) tested against the baseline's: paired by seed (the
    seeds both have), or as independent samples (Welch)."""
    if test == "welch":
        return welch_test(list(runs.values()), list(base.values()))
    seeds = [seed for seed in runs if seed in base]
    return paired_test([runs[s] for s in seeds], [base[s] for s in seeds]) if seeds else NO_TEST


def markdown(rows: list[Row], baseline: str, summary: str, test: str = "paired", alpha: float = 0.05) -> str:
    """A paper-style table per metric."""
    lines = [f"Per run: the metric's {'mean over rounds' if summary == 'mean' else 'value at the last round'}. "
             f"Mean over seeds with its 95 % confidence interval (Student's t); Δ and p against the baseline "
             f"**{baseline}** ({TESTS[test]}); * p < {alpha:g}.", ""]
    for metric in dict.fromkeys(r.metric for r in rows):
        lines += [f"### {metric}", "", "| variant | n | mean | 95 % CI | Δ vs baseline | t | df | p |", "|---|---:|---:|---|---:|---:|---:|---:|"]
        for r in (r for r in rows if r.metric == metric):
            ci = "-" if math.isnan(r.interval.low) else f"[{number_text(r.interval.low)}, {number_text(r.interval.high)}]"
            if r.test is None:
                tail = "(baseline) | | | |"
            else:
                star = " *" if not math.isnan(r.test.p) and r.test.p < alpha else ""
                tail = f"{signed_text(r.delta)} | {number_text(r.test.t)} | {number_text(r.test.df)} | {_p(r.test.p)}{star} |"
            lines.append(f"| {r.variant} | {r.interval.n} | {number_text(r.interval.mean)} | {ci} | {tail}")
        lines.append("")
    return "\n".join(lines)


def write_csv(rows: list[Row], path: Path, baseline: str, test: str = "paired") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["metric", "variant", "n", "mean", "sd", "ci95_low", "ci95_high", "baseline", "delta", "test", "t", "df",
                         "p_value", "values", "seeds"])
        for r in rows:
            t = r.test or NO_TEST
            writer.writerow([r.metric, r.variant, r.interval.n, r.interval.mean, r.interval.sd, r.interval.low, r.interval.high,
                             baseline, r.delta, "" if r.test is None else test, t.t, t.df, t.p, " ".join(repr(v) for v in r.values),
                             " ".join(map(str, r.seeds))])
    return path


def plot(rows: list[Row], path: Path, max_metrics: int = 12) -> Path:
    """Per metric: each variant's mean with its 95 % interval."""
    from townsquare.commands.study_plots import figure, save

    metrics = list(dict.fromkeys(r.metric for r in rows))[:max_metrics]
    cols = min(3, max(1, len(metrics)))
    n_rows = math.ceil(len(metrics) / cols)
    fig, axes = figure(n_rows, cols, width=4.2 * cols, height=2.8 * n_rows)
    for ax, metric in zip(axes, metrics):
        mine = [r for r in rows if r.metric == metric]
        means = [r.interval.mean for r in mine]
        errors = [[0 if math.isnan(r.interval.low) else r.interval.mean - r.interval.low for r in mine],
                  [0 if math.isnan(r.interval.high) else r.interval.high - r.interval.mean for r in mine]]
        ax.bar(range(len(mine)), means, yerr=errors, capsize=3, color="#669bbc")
        ax.set_xticks(range(len(mine)), [r.variant for r in mine], rotation=20, fontsize=7)
        ax.set_title(metric, fontsize=9)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    return save(fig, path)


def _p(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


@hookimpl
def townsquare_register_commands(cli: click.Group) -> None:
    @cli.command("ablate")
    @click.argument("scenario", type=click.Path(dir_okay=False, exists=True))
    @click.option("--variant", "variant_specs", multiple=True, required=True, metavar='NAME="-p no:X --set k=v"',
                  help="A variant of the scenario (repeat; an empty right side runs the scenario as it is).")
    @click.option("--seeds", type=int, default=5, show_default=True, help="Runs per variant (seeds from the scenario's seed on).")
    @click.option("--first-seed", type=int, default=None, help="First seed (default: the scenario's seed).")
    @click.option("--baseline", default=None, help="The variant the others are tested against (default: the first).")
    @click.option("--summary", type=click.Choice(["mean", "last"]), default="mean", show_default=True,
                  help="A run's value of a metric: its mean over rounds, or its last round's value.")
    @click.option("--test", "test", type=click.Choice(["paired", "welch"]), default="paired", show_default=True,
                  help="Against the baseline: a paired t-test of same-seed runs (common random numbers), or Welch's (independent samples).")
    @click.option("--metric", "metrics", multiple=True, metavar="NAME", help="Only these metrics in the table (default: all).")
    @click.option("--jobs", type=click.IntRange(min=1), default=None, help="Runs at once (default: the CPU count).")
    @click.option("--out", type=click.Path(file_okay=False), default=None, help="Folder of the runs and tables (default runs/ablate-<scenario>).")
    @common_options
    def ablate(scenario: str, variant_specs, seeds: int, first_seed: int | None, baseline: str | None, summary: str, test: str,
               metrics, jobs: int | None, out: str | None, plugin_options, **_: Any) -> None:
        """Run every variant x seed (resumable), then tabulate mean, 95 % CI and a t-test vs the baseline."""
        variants = [parse_variant(spec) for spec in variant_specs]
        names = [variant.name for variant in variants]
        if baseline is not None and baseline not in names:
            raise UsageError(f"--baseline {baseline}: no such variant (variants: {', '.join(names)})")
        folder = Path(out) if out else Path("runs") / f"ablate-{Path(scenario).stem}"
        planned = plan(scenario, variants, seeds, folder, first_seed)
        common = [a for p in plugin_options for a in ("-p", p)]
        check_variants(scenario, variants, plugin_options)
        runs = {variant.name: sum(1 for job in planned if job.variant.name == variant.name) for variant in variants}
        with AblateProgress(progress_mode(log_json=log_json()), runs) as progress:
            run_jobs(scenario, planned, workers=jobs or os.cpu_count() or 1, common=common,
                     on_done=lambda job, outcome: progress.done(job.variant.name, job.seed, outcome))
        rows = summarise(planned, baseline or variants[0].name, summary, test)
        if metrics:
            rows = [r for r in rows if r.metric in metrics]
        text = markdown(rows, baseline or variants[0].name, summary, test)
        click.echo(text)
        (folder / "ablation.md").write_text(text, encoding="utf-8")
        click.echo(f"tables: {folder / 'ablation.md'}, {write_csv(rows, folder / 'ablation.csv', baseline or variants[0].name, test)}", err=True)
        click.echo(f"plot: {plot(rows, folder / 'ablation.png')}", err=True)
        failed = [job for job in planned if job.status() != "finished"]
        if failed:
            raise UsageError(f"{len(failed)} of {len(planned)} runs did not finish (first: {failed[0].path}); run the same command again to resume them")
