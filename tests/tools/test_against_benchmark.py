"""benchmarks/against.py: alternating pairs, their ratios (wall and per CPU second), a note when
the two sides did not do the same work, and REF's files exported without a checkout."""

from __future__ import annotations

import importlib.util
import stat
import subprocess
import sys
from types import SimpleNamespace

import pytest

from helpers import ROOT

spec = importlib.util.spec_from_file_location("against_benchmark", ROOT / "benchmarks" / "against.py")
against = importlib.util.module_from_spec(spec)
spec.loader.exec_module(against)

MEASURE = """
import json, sys
side = "REF" if "--ref" in sys.argv else "this"
with open(sys.argv[1], "a") as log:
    log.write(side + "\\n")
rates = {"this": (300.0, 150.0), "REF": (200.0, 100.0)}[side]
work = {"calls": 7 if side == "this" else int(sys.argv[2])}
print("a line before the result")
print(json.dumps({"rate": rates[0], "cpu_rate": rates[1], "work": work}))
"""


@pytest.fixture
def sides(tmp_path):
    """A measurement script and a REF interpreter (this Python with ``--ref`` appended)."""
    script = tmp_path / "measure.py"
    script.write_text(MEASURE)
    ref_python = tmp_path / "ref-python"
    ref_python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@" --ref\n')
    ref_python.chmod(ref_python.stat().st_mode | stat.S_IXUSR)
    ref = SimpleNamespace(ref="REFNAME", commit="0" * 40, python=ref_python)
    return script, ref, tmp_path / "order.log"


def test_pairs_alternate_and_the_ratios_are_this_over_ref(sides, capsys):
    script, ref, log = sides
    ratios = against.side_by_side(ref, 3, [str(script), str(log), "7"], lambda r: r["rate"], "title",
                                  cpu_rate=lambda r: r["cpu_rate"])
    assert log.read_text().split() == ["this", "REF", "REF", "this", "this", "REF"]
    assert ratios == [1.5, 1.5, 1.5]
    out = capsys.readouterr().out
    assert "median 1.500, spread 1.500-1.500; per CPU second: median 1.500" in out
    assert "not the same work" not in out


def test_a_pair_that_did_different_work_says_so(sides, capsys):
    script, ref, log = sides
    against.side_by_side(ref, 1, [str(script), str(log), "8"], lambda r: r["rate"], "title")
    out = capsys.readouterr().out
    assert "not the same work: {'calls': 7} vs {'calls': 8}" in out
    assert "CPU" not in out


def test_a_side_that_fails_stops_the_comparison_with_its_error(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import sys\nsys.exit('no such policy')\n")
    with pytest.raises(SystemExit, match="no such policy"):
        against.run_json(sys.executable, [str(script)])


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the project's git repository")
def test_ref_is_exported_without_touching_the_checkout(tmp_path):
    before = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True).stdout
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    against.export(commit, tmp_path)
    shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:pyproject.toml"], capture_output=True, text=True, check=True).stdout
    assert (tmp_path / "pyproject.toml").read_text() == shown
    assert (tmp_path / "benchmarks" / "against.py").is_file()
    assert subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"], capture_output=True, text=True).stdout == before
