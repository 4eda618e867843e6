"""What a command that plays rounds (run, resume, branch) prints: the run's start-up lines, its
progress, and its summary with the plugins' own lines (``townsquare_report_run``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import click

from townsquare.cli.options import loaded_plugins, log_json
from townsquare.cli.progress import RunProgress, progress_mode
from townsquare.errors import RunStopped
from townsquare.llm_modes import OUTCOMES, describe_modes, totals_of
from townsquare.secrets import redact_text


class RunLines(RunProgress):
    """A run's start-up lines (its directory, slot table and LLM) then its progress
    (:mod:`townsquare.cli.progress`: a bar on a terminal, a line per round otherwise, nothing
    with ``--quiet``)."""

    def __init__(self, quiet: bool, label: str = "rounds"):
        super().__init__(progress_mode(quiet=quiet, log_json=log_json()), label=label)

    def announce(self, scenario, run_dir) -> None:
        click.echo(run_banner(scenario, run_dir), err=True)
        self.ready(scenario.model.rounds)


def run_banner(scenario, run_dir) -> str:
    """What a run shows when it starts: its directory, its slot table (with the mode each
    declared answer runs in, from the manifest), its LLM and its structured-answer modes."""
    manifest = run_dir.read_manifest() if run_dir.manifest_path.is_file() else {}
    lines = [f"run directory: {run_dir.path}", format_slot_table(manifest.get("slot_table") or scenario.slot_table())]
    if scenario.llm is not None:
        lines.append(llm_banner(scenario))
        if manifest.get("llm", {}).get("modes"):
            lines.append(f"structured answers: {describe_modes(manifest['llm']['modes'])}")
    return "\n".join(lines)


def llm_banner(scenario) -> str:
    spec = scenario.llm.spec
    if spec.name == "scripted":
        return "LLM: scripted TEST model (canned answers, not a language model)"
    if spec.name == "oracle":
        return "LLM: oracle TEST model (rules that answer from the prompt alone, not a language model)"
    model = getattr(scenario.llm.config, "model", "") or ""
    line = f"LLM: {spec.name}{' ' + model if model else ''}"
    if scenario.llm_auto:
        line += ("  (chosen automatically: the scenario has no [llm] table; point the run at a real model with"
                 " --llm openai:MODEL and OPENAI_BASE_URL / OPENAI_API_KEY)")
    return line


def format_slot_table(rows: list[dict[str, str]]) -> str:
    """The slot table; an ``answers`` column (each declared structured purpose and the mode it
    runs in) when a component declares any."""
    headers = ("scope", "slot", "component", "plugin") + (("answers",) if any(r.get("answers") for r in rows) else ())
    widths = [max(len(h), *(len(r.get(h, "")) for r in rows)) for h in headers]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(r.get(h, "").ljust(w) for h, w in zip(headers, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def report_run(path: Path, summary) -> None:
    """The summary line of a finished or stopped run, then the plugins' own lines; a stopped
    run raises :class:`RunStopped` (already reported) for the exit status."""
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(summary.counts.items()))
    state = f"stopped: {redact_text(summary.stopped)}" if summary.stopped else "finished"
    click.echo(f"{state}: {path} — {summary.rounds_completed} rounds, {summary.actions} actions ({counts}), {summary.llm_calls} LLM calls", err=True)
    if summary.stopped:
        click.echo(f"continue with: townsquare resume {path}", err=True)
        stop = RunStopped(summary.stopped)
        stop.reported = True  # type: ignore[attr-defined]
        raise stop
    click.echo(f"tables for notebooks: townsquare export {path} --format csv --out {path}/export", err=True)
    answers = structured_summary(path)
    if answers is not None:
        click.echo(answers, err=True)
    plugins = loaded_plugins()
    if plugins is not None:  # the plugins' own lines (``townsquare_report_run``): groundedness, say
        for line in plugins.call_each("townsquare_report_run", run_dir=Path(path)):
            click.echo(redact_text(str(line)), err=True)


def structured_summary(path: Path) -> str | None:
    """The run's line about its structured answers (from the manifest's counts), or None."""
    try:
        manifest = json.loads((Path(path) / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary_line(manifest.get("structured_answers") or {})


def summary_line(table: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The run's last line about structured answers, e.g. ``structured answers: 212 constrained,
    0 parsed, 1 repaired, 0 fallback (plan 8 grammar; like 180 logprob; ...)``; None with none."""
    if not table:
        return None
    totals = totals_of(table)
    parts = []
    for purpose, entry in table.items():
        counts = ", ".join(f"{entry[o]} {o}" for o in OUTCOMES if entry[o])
        parts.append(f"{purpose} {'/'.join(entry['modes']) or 'no mode'}: {counts}")
    return (f"structured answers: {totals['constrained']} constrained, {totals['parsed']} parsed, "
            f"{totals['repaired']} repaired, {totals['fallback']} fallback ({'; '.join(parts)})")
