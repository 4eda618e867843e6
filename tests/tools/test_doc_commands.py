"""The shell blocks of README.md and docs/study.md run as written.

Each ```bash block's command lines (a line ending in ``\\`` goes on) run in order in a scratch
folder of their own that holds the repository's ``examples/``, through the venv's
``townsquare`` (``.venv/bin/townsquare`` and a bare ``townsquare`` alike). A run that needs a
model gets the oracle test model (``--llm oracle``): the docs' runs use the offline model, which
a test cannot wait for. What a block needs from an earlier one (a run to branch, to report on)
is made first (:data:`SETUP`). The lines and blocks that cannot run here are listed with the
reason (:data:`CANNOT_RUN_BLOCKS`, :data:`CANNOT_RUN_LINES`); every other line must exit 0.
"""

from __future__ import annotations

import csv
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

DOCS = ("README.md", "docs/study.md")
TOWNSQUARE = str(Path(sys.executable).parent / "townsquare")

#: (file, block) -> why the whole block does not run here
CANNOT_RUN_BLOCKS = {
    ("README.md", 0): "the main job: it compiles llama.cpp and plays 12 rounds on SmolLM2 (10+ minutes); .ci/run runs it verbatim",
    ("README.md", 1): "the test suite itself, which this test is part of; .ci/run runs it verbatim",
    ("docs/study.md", 2): "15 runs of 48 rounds (43 s on 2 idle cores); tests/commands/test_ablate.py runs the command on a small scenario",
}
#: a line that matches -> why it does not run here
CANNOT_RUN_LINES = (
    (re.compile(r"^OPENAI_"), "needs a model server and its key"),
    (re.compile(r"\bpip install\b"), "installs packages (the README's set-up, which .ci/run runs)"),
    (re.compile(r"\bdata fetch\b"), "downloads from the dataset's source; tests/plugins/data fetch from a local file server"),
    (re.compile(r"\bresume\b"), "continues a run stopped by its budget; tests/core test resume after every kind of stop"),
)
#: (file, block) -> the commands that make what the block starts from
SETUP = {
    ("README.md", 2): ["townsquare run examples/quickstart.toml --set rounds=2"],
    ("docs/study.md", 1): ["townsquare run examples/baseline.toml --out runs/base --set engine.keep_checkpoints=0"],
}
#: scenarios whose runs need a model
WITH_A_MODEL = ("examples/quickstart.toml",)


def blocks(doc: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / doc).read_text(encoding="utf-8"), re.S)


def command_lines(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", block)
    lines = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()  # a trailing comment
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def why_not(line: str) -> str | None:
    return next((reason for pattern, reason in CANNOT_RUN_LINES if pattern.search(line)), None)


def argv(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[0] in ("townsquare", ".venv/bin/townsquare"), f"not a townsquare command: {line}"
    words[0] = TOWNSQUARE
    if words[1] == "run" and words[2] in WITH_A_MODEL:
        words += ["--llm", "oracle"]
    return words


def run(line: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(argv(line), cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stderr[-3000:]}"
    return done


CASES = [(doc, i) for doc in DOCS for i in range(len(blocks(doc)))]


@pytest.mark.parametrize("doc,index", CASES, ids=[f"{d}#{i}" for d, i in CASES])
def test_each_shell_block_runs_as_written(doc, index, tmp_path):
    if (doc, index) in CANNOT_RUN_BLOCKS:
        pytest.skip(CANNOT_RUN_BLOCKS[(doc, index)])
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for line in SETUP.get((doc, index), []):
        run(line, tmp_path)
    ran = 0
    for line in command_lines(blocks(doc)[index]):
        if why_not(line) is None:
            run(line, tmp_path)
            ran += 1
    assert ran, f"{doc} block {index}: no line ran"
    if (doc, index) == ("docs/study.md", 1):  # the counterfactual feeds differ from each other
        with open(tmp_path / "runs" / "feeds" / "compare.csv", newline="") as fh:
            deltas = [float(row["delta"]) for row in csv.DictReader(fh) if row["delta"] not in ("", "nan")]
        assert any(abs(d) > 1e-9 for d in deltas)


def test_every_line_that_cannot_run_says_why():
    """Each doc line is run or skipped with a reason; a new line needs no edit here unless it cannot run."""
    for doc, index in CASES:
        for line in command_lines(blocks(doc)[index]):
            if (doc, index) not in CANNOT_RUN_BLOCKS and why_not(line) is None:
                assert line.split()[0] in ("townsquare", ".venv/bin/townsquare"), f"{doc} block {index}: {line}"


def example_commands() -> list[tuple[str, list[str]]]:
    """(example, the --set overrides) of every ``townsquare run|estimate`` line in the examples'
    comments (a line ending in ``\\`` goes on in the next comment line)."""
    found = []
    for path in sorted((ROOT / "examples").glob("*.toml")):
        comment = "\n".join(line.lstrip("#").strip() for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#"))
        for line in re.sub(r"\\\n\s*", " ", comment).splitlines():
            match = re.search(r"townsquare (?:run|estimate) (examples/\S+\.toml)(.*)", line)
            if match:
                words = shlex.split(re.sub(r"\s+#.*$", "", match.group(2)))
                found.append((match.group(1), [w for i, w in enumerate(words) if i and words[i - 1] == "--set"]))
    return found


def test_the_examples_own_command_lines_resolve(make_plugins):
    """Every ``townsquare run`` line an example's comments show resolves as written (a dataset
    that is not installed here is the one accepted refusal): social_media's "Smaller" line
    shortens its stages with its rounds."""
    from townsquare.errors import ScenarioError
    from townsquare.launch.scenario_files import load_scenario

    plugins = make_plugins()
    lines = example_commands()
    assert any("rounds=49" in overrides for _, overrides in lines)
    for example, overrides in lines:
        try:
            load_scenario(ROOT / example, overrides, plugins)
        except ScenarioError as exc:
            if "are not installed" not in str(exc) and "is not installed" not in str(exc):
                raise
