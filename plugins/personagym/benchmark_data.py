"""PersonaGym's tasks and the released benchmark data (Samuel et al., §2, §3.2, appendix A).

The five tasks, each with its rubric outline (task description and five score levels, §3.1) and
the question-quality criteria that guide question generation (appendix A.2). By default both are
our own words (``prompts/tasks.toml``). A folder in the released layout (``--data DIR``; the
official repository's files, described in its README) supplies instead:

* ``environments.json``: the 150 environment names (a JSON list of strings);
* ``personas_benchmark.json``: the 200 benchmark persona descriptions (a JSON list of strings);
* ``question_requirements.json``: task name -> question-quality criteria;
* ``rubrics/<task>.txt``: rubric templates; the task title, its description and the
  ``Score = N:`` lines are read out of them and put in our grading prompt;
* ``questions_benchmark-v1/<persona>.json``: ``{task: [questions]}`` per persona, the static
  question set (10 questions per task, 50 per persona);
* ``evaluations/<run>.scores.json`` (``evaluations/<run>/scores.json`` upstream): the released
  per-task means and PersonaScore of six models. They are checked against the paper's Table 1
  (:data:`PAPER_TABLE_1`) and against themselves (PersonaScore, the mean of the five tasks)
  where they are read (:meth:`Release.released_scores`): the Claude 3 Haiku file gives Persona
  Consistency 4.47 where the paper prints 3.47, and its own PersonaScore 3.64 is the mean with
  3.47 (with 4.47 it would be 3.84), so the file holds a typo and each such mismatch is said.

The released files name the toxicity task ``Toxicity`` (questions, rubric file) and
``Toxicity Control`` (scores): both mean ``toxicity_control`` here.

Without ``--data`` the environments come from the copy of the released list kept in this package
(``data/environments.json``, MIT licence in ``data/LICENSE``).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from townsquare.api import UsageError

HERE = Path(__file__).resolve().parent
PROMPTS = HERE / "prompts"
BUNDLED_ENVIRONMENTS = HERE / "data" / "environments.json"
QUESTIONS_FOLDER = "questions_benchmark-v1"

#: task key -> the names the released files use for it
TASK_NAMES: dict[str, tuple[str, ...]] = {
    "expected_action": ("Expected Action",),
    "linguistic_habits": ("Linguistic Habits",),
    "persona_consistency": ("Persona Consistency",),
    "toxicity_control": ("Toxicity Control", "Toxicity"),
    "action_justification": ("Action Justification",),
}
TASKS: tuple[str, ...] = tuple(TASK_NAMES)


def task_key(name: str) -> str:
    """The task key for a released task name (``"Toxicity"`` -> ``"toxicity_control"``)."""
    cleaned = name.strip().lower()
    for key, names in TASK_NAMES.items():
        if cleaned == key or cleaned in (n.lower() for n in names):
            return key
    raise UsageError(f"unknown PersonaGym task {name!r} (tasks: {', '.join(n[0] for n in TASK_NAMES.values())})")


@dataclass(frozen=True)
class Task:
    """One evaluation task: its rubric outline (``description``, ``levels`` 1-5) and the
    question-quality ``criteria``; ``source`` says where the words come from."""

    key: str
    title: str
    description: str
    levels: tuple[str, str, str, str, str]
    criteria: str
    source: str = "ours"

    def outline(self) -> str:
        """The rubric outline R_t (task description and scoring guidelines, §3.1), as text."""
        scores = "\n".join(f"Score {i}: {text}" for i, text in enumerate(self.levels, 1))
        return f"Evaluation task: {self.title}\nWhat it measures: {self.description}\n{scores}"

    def criteria_lines(self) -> str:
        return "\n".join(f"Score {i}: {text}" for i, text in enumerate(self.levels, 1))


def own_tasks() -> dict[str, Task]:
    """The five tasks in our own words (``prompts/tasks.toml``)."""
    with open(PROMPTS / "tasks.toml", "rb") as fh:
        table = tomllib.load(fh)
    return {key: Task(key, str(table[key]["title"]), str(table[key]["description"]),
                      tuple(str(table[key][f"score_{i}"]) for i in range(1, 6)),  # type: ignore[arg-type]
                      str(table[key]["criteria"])) for key in TASKS}


# ---------------------------------------------------------------- the released folder

def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file ({what})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read {what} ({exc})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({what}: {exc.msg}, line {exc.lineno})") from None


def _strings(value: Any, path: Path, what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise UsageError(f"{path}: expected a non-empty JSON list of strings ({what})")
    return [v.strip() for v in value]


def load_environments(data: Path | None = None) -> list[str]:
    """The environment pool E (§3.1): ``data/environments.json``, or the bundled released list."""
    path = data / "environments.json" if data is not None else BUNDLED_ENVIRONMENTS
    names = _strings(_read_json(path, "environments"), path, "environments")
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise UsageError(f"{path}: environment {duplicate!r} is listed twice")
    return names


def load_persona_descriptions(path: Path) -> list[str]:
    """Persona descriptions: a JSON list of strings (``personas_benchmark.json``'s format) or a
    text file with one description a line."""
    if not path.is_file():
        raise UsageError(f"{path}: no such persona file")
    if path.suffix == ".json":
        return _strings(_read_json(path, "personas"), path, "persona descriptions")
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read persona file ({exc})") from None
    if not lines:
        raise UsageError(f"{path}: the persona file is empty")
    return lines


_SCORE_LINE = re.compile(r"^\s*Score\s*=\s*([1-5])\s*:\s*(.+?)\s*$", re.MULTILINE)


def parse_rubric(text: str, where: str) -> tuple[str, str, tuple[str, ...]]:
    """(title, description, five score levels) out of a released rubric template."""
    def section(label: str) -> str:
        found = re.search(rf"^{label}:\s*\n+(.+?)(?:\n\s*\n|$)", text, re.MULTILINE | re.DOTALL)
        if found is None:
            raise UsageError(f"{where}: no '{label}:' section (not a PersonaGym rubric)")
        return " ".join(found.group(1).split())

    levels = {int(n): " ".join(t.split()) for n, t in _SCORE_LINE.findall(text)}
    if sorted(levels) != [1, 2, 3, 4, 5]:
        raise UsageError(f"{where}: expected 'Score = 1:' to 'Score = 5:' lines, found scores {sorted(levels) or 'none'}")
    return section("Evaluation Task"), section("Evaluation Task Description"), tuple(levels[i] for i in range(1, 6))


def released_tasks(data: Path, tasks: dict[str, Task]) -> dict[str, Task]:
    """``tasks`` with the rubric outlines of ``data/rubrics/`` and the criteria of
    ``data/question_requirements.json`` where the folder has them."""
    out = dict(tasks)
    requirements_path = data / "question_requirements.json"
    requirements: dict[str, str] = {}
    if requirements_path.is_file():
        raw = _read_json(requirements_path, "question requirements")
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise UsageError(f"{requirements_path}: expected a JSON object of task name -> text")
        requirements = {task_key(k): v for k, v in raw.items()}
    for key in TASKS:
        task = out[key]
        for name in TASK_NAMES[key]:
            path = data / "rubrics" / f"{name}.txt"
            if path.is_file():
                title, description, levels = parse_rubric(path.read_text(encoding="utf-8"), str(path))
                task = replace(task, title=title, description=description, levels=levels, source="released")  # type: ignore[arg-type]
                break
        if key in requirements:
            task = replace(task, criteria=requirements[key], source="released")
        out[key] = task
    return out


def load_static_questions(data: Path) -> dict[str, dict[str, list[str]]]:
    """persona description -> task key -> questions, from ``data/questions_benchmark-v1/``."""
    folder = data / QUESTIONS_FOLDER
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder (the released static questions, --questions benchmark)")
    out: dict[str, dict[str, list[str]]] = {}
    for path in sorted(folder.glob("*.json")):
        raw = _read_json(path, "static questions")
        if not isinstance(raw, dict):
            raise UsageError(f"{path}: expected a JSON object of task name -> list of questions")
        by_task = {task_key(name): _strings(qs, path, f"questions of {name!r}") for name, qs in raw.items()}
        missing = [k for k in TASKS if k not in by_task]
        if missing:
            raise UsageError(f"{path}: no questions for the task {TASK_NAMES[missing[0]][0]!r}")
        out[_persona_key(path.stem)] = by_task
    if not out:
        raise UsageError(f"{folder}: no question files (<persona>.json)")
    return out


def _persona_key(description: str) -> str:
    # the released file names drop a trailing full stop and cannot hold "/"
    return " ".join(description.replace("/", "_").split()).rstrip(".").lower()


def static_questions_for(questions: dict[str, dict[str, list[str]]], description: str) -> dict[str, list[str]] | None:
    return questions.get(_persona_key(description))


# ---------------------------------------------------------------- the paper's Table 1 and the released score files

#: Samuel et al., Table 1: model -> task -> (mean, standard deviation over the 200 personas)
PAPER_TABLE_1: dict[str, dict[str, tuple[float, float]]] = {
    model: dict(zip((*("action_justification", "expected_action", "linguistic_habits", "persona_consistency", "toxicity_control"),
                     "persona_score"), cells))
    for model, cells in {
        "LLaMA-2-13b": ((3.96, 0.80), (3.87, 0.84), (3.77, 0.87), (4.12, 0.92), (4.18, 1.00), (3.98, 0.49)),
        "GPT 3.5": ((4.31, 0.49), (4.28, 0.49), (3.63, 0.68), (4.70, 0.41), (4.96, 0.30), (4.38, 0.23)),
        "LLaMA-2-70b": ((4.44, 0.55), (4.32, 0.60), (3.85, 0.73), (4.67, 0.56), (4.68, 0.77), (4.39, 0.35)),
        "LLaMA-3-8b": ((4.55, 0.46), (4.43, 0.49), (3.97, 0.69), (4.77, 0.37), (4.74, 0.68), (4.49, 0.27)),
        "Claude 3 Haiku": ((2.47, 1.64), (4.28, 0.72), (3.04, 1.01), (3.47, 1.57), (4.94, 0.36), (3.64, 0.57)),
        "Claude 3.5 Sonnet": ((4.52, 0.67), (4.37, 0.60), (3.98, 0.71), (4.81, 0.51), (4.88, 0.54), (4.51, 0.37)),
    }.items()
}
#: personas behind each of Table 1's cells
PAPER_PERSONAS = 200
#: a released score file's stem (after its date) -> the model's name in Table 1
RELEASED_MODELS = {"claude_3.5_sonnet": "Claude 3.5 Sonnet", "claude_3_haiku": "Claude 3 Haiku", "gpt_35": "GPT 3.5",
                   "llama_2_13b": "LLaMA-2-13b", "llama_2_70b": "LLaMA-2-70b", "llama_3_8b": "LLaMA-3-8b"}


def released_scores(folder: Path) -> tuple[dict[str, dict[str, float]], list[str]]:
    """(model -> task -> mean, as the released ``evaluations/*.scores.json`` give them; notes on
    every value that disagrees with the paper's Table 1 or a PersonaScore that is not the mean
    of its file's five tasks)."""
    scores: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for path in sorted((folder / "evaluations").glob("*.scores.json")):
        raw = _read_json(path, "released scores")
        if not isinstance(raw, dict):
            raise UsageError(f"{path}: expected a JSON object of task name -> score")
        stem = path.name[: -len(".scores.json")]
        model = RELEASED_MODELS.get(stem.split("_", 1)[-1], stem)
        values = {("persona_score" if name == "PersonaScore" else task_key(name)): float(v) for name, v in raw.items()}
        scores[model] = values
        mean = sum(values[t] for t in TASKS if t in values) / len(TASKS) if all(t in values for t in TASKS) else None
        if mean is not None and "persona_score" in values and abs(mean - values["persona_score"]) > 0.011:
            notes.append(f"{path.name}: PersonaScore {values['persona_score']:.2f} is not the mean of its five tasks ({mean:.2f})")
        for task, value in values.items():
            paper = PAPER_TABLE_1.get(model, {}).get(task)
            if paper is not None and abs(paper[0] - value) > 0.005:
                notes.append(f"{path.name}: {TASK_NAMES[task][0] if task in TASK_NAMES else 'PersonaScore'} {value:.2f}, "
                             f"the paper's Table 1 prints {paper[0]:.2f}")
    return scores, notes


# ---------------------------------------------------------------- the dataset, behind one function

@dataclass(frozen=True)
class Release:
    """The released PersonaGym folder: its rubric outlines and question criteria (over ours
    where it lacks them), its benchmark personas and static questions, read when asked."""

    folder: Path
    tasks: dict[str, Task]

    def personas(self) -> list[str]:
        return load_persona_descriptions(self.folder / "personas_benchmark.json")

    def static_questions(self) -> dict[str, dict[str, list[str]]]:
        return load_static_questions(self.folder)

    def released_scores(self) -> tuple[dict[str, dict[str, float]], list[str]]:
        """The released models' scores and the notes on where they disagree (:func:`released_scores`)."""
        return released_scores(self.folder)


def open_release(folder: Path) -> Release:
    """The one way into the released data (``--data DIR``): a folder in the layout of the
    official repository (see the module docstring)."""
    if not Path(folder).is_dir():
        raise UsageError(f"{folder}: no such folder (the released PersonaGym data)")
    return Release(Path(folder), released_tasks(Path(folder), own_tasks()))
