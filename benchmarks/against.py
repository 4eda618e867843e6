"""Side by side: a benchmark of this checkout against another commit, alternating, in one run.

A change to the hot path says what it cost by running the same measurement on both sides,
one after the other, in one process tree (so that both see the same machine: a shared machine's
load moves within minutes)::

    python benchmarks/engine.py --agents 1000 --against 2a6d005 [--pairs 3]

:class:`Reference` exports REF's tree into a temporary folder (``git archive``: no checkout of
the repository changes) and installs it into a temporary virtual environment (``pip install -e``;
pip's cache makes it quick after the first time), or reuses a folder given with ``--ref-env``; :func:`side_by_side` then runs the measurement (a
child process per run, each side with its own Python: this checkout's environment and REF's)
in alternating pairs, the order flipped every pair (this, REF; REF, this; ...) so that a drift
in the load weighs on both sides alike. It prints each pair, its ratio (this / REF, higher is
faster here), the median ratio and its spread, and the load average before each pair. The
temporary tree and environment are removed at the end.

The measurement is this checkout's benchmark file run by REF's interpreter, so both sides run
the same scenario and the same timing code; only the townsquare they import differs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import venv
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


class Reference:
    """REF's tree and an environment it is installed in, in a folder of their own: ``python``
    is its interpreter.

    ``folder``: where to keep the tree and the environment (kept afterwards, and reused when it
    already holds REF); None: a temporary folder, removed on exit."""

    def __init__(self, ref: str, folder: Path | None = None):
        self.ref = ref
        self.commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
        self.keep = folder is not None
        self.folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="townsquare-against-"))
        self.tree, self.env = self.folder / "tree", self.folder / "venv"
        self.python = self.env / "bin" / "python"

    def __enter__(self) -> "Reference":
        marker = self.folder / "installed"
        if self.keep and marker.is_file() and marker.read_text().strip() == self.commit:
            return self
        try:
            shutil.rmtree(self.tree, ignore_errors=True)
            self.tree.mkdir(parents=True)
            say(f"exporting {self.ref} ({self.commit[:9]}) into {self.tree}")
            export(self.commit, self.tree)
            say(f"installing it into {self.env} (pip install -e; cached wheels make this quick)")
            venv.create(self.env, with_pip=True, clear=True)
            subprocess.run([str(self.python), "-m", "pip", "install", "-q", "-e", str(self.tree)], check=True)
            marker.write_text(self.commit)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.keep:
            shutil.rmtree(self.folder, ignore_errors=True)


def export(commit: str, folder: Path) -> None:
    """The files of ``commit`` written into ``folder`` (``git archive``)."""
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", "--format=tar", commit], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
        tar.extractall(folder, filter="data")
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed ({archive.returncode})")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_json(python: Path | str, argv: list[str]) -> dict:
    """Run ``python argv`` and return the JSON object its last output line holds."""
    done = subprocess.run([str(python), *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{python} {' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def this_label() -> str:
    """This checkout's commit, ``+changes`` when the working tree differs from it."""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short=9", "HEAD") + ("+changes" if dirty else "")


def side_by_side(ref: Reference, pairs: int, argv: list[str], rate: Callable[[dict], float], title: str,
                 cpu_rate: Callable[[dict], float] | None = None) -> list[float]:
    """``pairs`` alternating pairs of ``python argv`` (this side, then REF's; flipped every
    pair); prints each pair and the summary; the ratios (this / REF). ``cpu_rate``: a second
    rate of each result (per CPU second), its ratio printed beside the first."""
    print(f"{title}: {this_label()} (this) against {ref.ref} ({ref.commit[:9]}, REF); {os.cpu_count()} cores, "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    cpu_head = f"  {'CPU this':>10}  {'CPU REF':>10}  {'CPU ratio':>9}" if cpu_rate else ""
    print(f"{'pair':>4}  {'order':<9}  {'this':>10}  {'REF':>10}  {'this/REF':>8}{cpu_head}  {'load':>5}  notes")
    ratios, cpu_ratios = [], []
    for k in range(pairs):
        load = os.getloadavg()[0]
        sides = [("this", sys.executable), ("REF", ref.python)]
        if k % 2:
            sides.reverse()
        results = {name: run_json(python, argv) for name, python in sides}
        ratio = rate(results["this"]) / rate(results["REF"])
        ratios.append(ratio)
        cpu_cells = ""
        if cpu_rate:
            cpu_ratios.append(cpu_rate(results["this"]) / cpu_rate(results["REF"]))
            cpu_cells = f"  {cpu_rate(results['this']):>10,.0f}  {cpu_rate(results['REF']):>10,.0f}  {cpu_ratios[-1]:>9.3f}"
        notes = "" if results["this"].get("work") == results["REF"].get("work") else \
            f"not the same work: {results['this'].get('work')} vs {results['REF'].get('work')}"
        print(f"{k + 1:>4}  {','.join(name for name, _ in sides):<9}  {rate(results['this']):>10,.0f}  "
              f"{rate(results['REF']):>10,.0f}  {ratio:>8.3f}{cpu_cells}  {load:>5.1f}  {notes}", flush=True)
    summary = f"this/REF over {pairs} pairs: median {statistics.median(ratios):.3f}, spread {min(ratios):.3f}-{max(ratios):.3f}"
    if cpu_rate:
        summary += (f"; per CPU second: median {statistics.median(cpu_ratios):.3f}, "
                    f"spread {min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}")
    print(f"{summary}; load average now {os.getloadavg()[0]:.1f}")
    return ratios
