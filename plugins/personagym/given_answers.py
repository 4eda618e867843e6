"""Answers produced elsewhere (``townsquare eval personagym --answers FILE``): a published
model's outputs graded here with the same score examples and judges as a design's answers.

``FILE`` is JSON Lines, one answer a line::

    {"persona": "A 34-year-old nurse from Lagos ...", "question": "...", "answer": "...", "task": "Expected Action"}

``task`` (a task key or a released task name: ``"Expected Action"``, ``"Toxicity"``...) may be
left out: the question is then looked up among the released static questions of its persona
(``--data DIR``, ``questions_benchmark-v1/``). Other keys are ignored; blank lines are skipped.
A row that cannot be read or matched is one line naming the file and line (exit 2), before any
call is made.

Several files (``--answers`` repeated) are graded on the same personas and questions: the first
file's (its personas in the order they first appear, each persona's questions task by task in
the file's order), every other file answering each of them (a missing answer is one line naming
the file and the first file's line it does not answer). With designs beside them (``eval
personagym DESIGN --answers FILE``) the designs' agents are built from the file's personas and
answer the same questions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from townsquare.api import UsageError
from townsquare.lib.files import read_json_lines

from .benchmark_data import TASK_NAMES, TASKS, static_questions_for, task_key


@dataclass(frozen=True)
class Given:
    """One answer of a file: its task, question and answer, and where it came from (``FILE:LINE``)."""

    task: str
    question: str
    answer: str
    where: str


@dataclass
class AnswerFile:
    """One ``--answers`` file, read and checked."""

    path: str
    label: str
    #: persona description -> its answers, in the file's order
    personas: dict[str, list[Given]]
    #: every question is one of the released benchmark-v1 questions of its persona
    released: bool


@dataclass
class GivenAnswers:
    """Every ``--answers`` file over the same personas and questions."""

    files: list[AnswerFile]
    #: the personas graded, in the first file's order
    descriptions: list[str]
    #: file label -> per persona, its answers in the cases' question order
    answers: dict[str, list[list[Given]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def released(self) -> bool:
        """Every question of every file is a released benchmark-v1 question."""
        return all(f.released for f in self.files)


def _text(text: str) -> str:
    return " ".join(text.split())


def _row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise UsageError(f'{where}: expected a JSON object with "persona", "question" and "answer"')
    for key in ("persona", "question"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise UsageError(f'{where}: no "{key}" (a non-empty string)')
    if not isinstance(row.get("answer"), str):
        raise UsageError(f'{where}: no "answer" (a string)')
    if "task" in row and not isinstance(row["task"], str):
        raise UsageError(f'{where}: "task" is not a string')
    return row


def question_index(bank: dict[str, dict[str, list[str]]], description: str) -> dict[str, list[str]] | None:
    """question -> the tasks it is released under, for one persona; None: no released questions."""
    released = static_questions_for(bank, description)
    if released is None:
        return None
    index: dict[str, list[str]] = {}
    for task, questions in released.items():
        for question in questions:
            index.setdefault(_text(question), []).append(task)
    return index


def _task_of(row: dict[str, Any], persona: str, question: str, index: dict[str, list[str]] | None, has_bank: bool,
             where: str) -> str:
    """The row's task: named, or looked up among its persona's released questions."""
    if "task" in row:
        try:
            return task_key(row["task"])
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None
    if not has_bank:
        raise UsageError(f'{where}: no "task", and no released questions to look it up in (name the task, or give '
                         f"--data DIR with the released questions_benchmark-v1/)")
    if index is None:
        raise UsageError(f'{where}: no "task", and the persona {persona[:60]!r} has no released questions (name the task)')
    tasks = index.get(question)
    if not tasks:
        raise UsageError(f'{where}: no "task", and the question {question[:60]!r} is not one of the released questions of '
                         f"its persona (name the task)")
    if len(set(tasks)) > 1:
        names = ", ".join(TASK_NAMES[t][0] for t in dict.fromkeys(tasks))
        raise UsageError(f'{where}: no "task", and the question is released under several tasks ({names}): name the task')
    return tasks[0]


def read_answers(path: str, label: str, bank: dict[str, dict[str, list[str]]] | None) -> AnswerFile:
    """One file, every row checked (module docstring); ``bank``: the released static questions
    (persona -> task -> questions), or None without ``--data``."""
    if not Path(path).is_file():
        raise UsageError(f"--answers {path}: no such file")
    personas: dict[str, list[Given]] = {}
    indexes: dict[str, dict[str, list[str]] | None] = {}
    lines: dict[tuple[str, str, str], str] = {}
    released = bank is not None
    for at, value in read_json_lines(path, "answers file"):
        row = _row(value, at)
        persona, question = _text(row["persona"]), _text(row["question"])
        if persona not in indexes:
            indexes[persona] = question_index(bank, persona) if bank is not None else None
        index = indexes[persona]
        task = _task_of(row, persona, question, index, bank is not None, at)
        earlier = lines.setdefault((persona, task, question), at)
        if earlier != at:
            raise UsageError(f"{at}: the same persona, task and question as {earlier}")
        released = released and index is not None and task in index.get(question, [])
        personas.setdefault(persona, []).append(Given(task, question, _text(row["answer"]), at))
    if not personas:
        raise UsageError(f"{path}: no answers (expected JSON Lines of persona, question, answer)")
    return AnswerFile(str(path), label, personas, released)


def combine(files: Sequence[AnswerFile], count: int, per_task: int) -> GivenAnswers:
    """The first ``count`` personas of the first file and their questions (each persona's first
    ``per_task`` questions of each task), answered by every file; one line for a file that
    leaves one unanswered."""
    first = files[0]
    out = GivenAnswers(list(files), list(first.personas)[:count])
    cut = 0
    for f in files:
        out.answers[f.label] = []
    for description in out.descriptions:
        rows = first.personas[description]
        ordered = [g for task in TASKS for g in [r for r in rows if r.task == task][:per_task]]
        cut += len(rows) - len(ordered)
        out.answers[first.label].append(ordered)
        for other in files[1:]:
            theirs = {(g.task, g.question): g for g in other.personas.get(description, [])}
            mine = []
            for g in ordered:
                found = theirs.get((g.task, g.question))
                if found is None:
                    raise UsageError(f"{other.path}: no answer to {g.where} (persona {description[:50]!r}, "
                                     f"question {g.question[:50]!r}): several answer files are graded on the same questions")
                mine.append(found)
            out.answers[other.label].append(mine)
    if cut:
        out.notes.append(f"--questions-per-task {per_task}: {cut} answer(s) of {first.path} beyond the first {per_task} "
                         "of a task left out")
    for other in files[1:]:
        extra = sum(len(rows) for rows in other.personas.values()) - sum(len(a) for a in out.answers[other.label])
        if extra:
            out.notes.append(f"{other.path}: {extra} answer(s) to questions {first.path} does not grade left out")
    return out


def answer_labels(paths: Sequence[str], named: Sequence[str]) -> list[str]:
    """A row label per file: ``--label`` (as many as files), else the file's stem."""
    if named and len(named) != len(paths):
        raise UsageError(f"--label: {len(named)} label(s) for {len(paths)} --answers file(s); give one per file, in order")
    return list(named) or [Path(p).stem for p in paths]
