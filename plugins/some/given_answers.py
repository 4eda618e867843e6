"""Answers produced elsewhere (``townsquare eval some --answers FILE``): an agent's answers to
SoMe's queries, made by another framework or by the released test scripts, graded here by the
same scorers and judges as the agent's (:meth:`.harness.Harness.grade`): label extraction and
accuracy, the judge's criteria, TCR.

Two formats, by the file's name:

* **JSON Lines** (any name but ``*.json``), one answer a line: ``{"task": "UBP", "id":
  "like:5288580817:0", "answer": "..."}``; ``task`` a task's abbreviation or SoMe folder name,
  ``id`` the query's id as ``results.json`` gives it (SMQ: its question text works too). Other
  keys are ignored; blank lines are skipped.
* **a results file of the released test scripts** (``*.json``, written as
  ``results/<task>/<model>.json``): the task is its folder's name; each answer's id is its key
  path, joined by ``:``, which is the id here (``{action: {uid: {index: answer}}}`` for UBP,
  ``{uid: {index: answer}}`` for MCR, UCS and UEA, ``{key: answer}`` for MID, RED and SES, the
  question for SMQ). The scripts' marks for a query that failed five times (``""``, ``"Error"``,
  ``"运行错误"``) are unanswered queries (status ``llm_failure``): not completed, scored 0.

A row or key that cannot be read or matched to a query is one line naming the file and line
(or key), exit 2, before any call.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from townsquare.api import UsageError
from townsquare.lib.files import read_json_lines

from .corpus import read_json
from .tasks import TASKS, Query, TaskType, task_type

#: what the released test scripts write for a query whose five attempts all failed
RELEASED_FAILURES = ("", "Error", "运行错误")


@dataclass(frozen=True)
class GivenAnswer:
    """One answer of a file: its task (SoMe's folder name), query id, answer, and where it is."""

    task: str
    id: str
    answer: str
    where: str
    #: the released scripts' failure mark: the agent gave no answer
    failed: bool = False


def _task(name: Any, where: str) -> TaskType:
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f'{where}: no "task" (an abbreviation such as UBP, or SoMe\'s folder name)')
    try:
        return task_type(name)
    except UsageError as exc:
        raise UsageError(f"{where}: {str(exc).removeprefix('--tasks: ')}") from None


def _read_lines(path: Path) -> list[GivenAnswer]:
    out = []
    for where, row in read_json_lines(path, "answers file"):
        if not isinstance(row, dict):
            raise UsageError(f'{where}: expected a JSON object with "task", "id" and "answer"')
        task = _task(row.get("task"), where)
        if not isinstance(row.get("id"), (str, int)) or isinstance(row.get("id"), bool) or not str(row["id"]).strip():
            raise UsageError(f'{where}: no "id" (the query\'s id, as results.json gives it)')
        if not isinstance(row.get("answer"), str):
            raise UsageError(f'{where}: no "answer" (a string)')
        out.append(GivenAnswer(task.name, str(row["id"]), row["answer"], where))
    return out


def _read_released(path: Path) -> list[GivenAnswer]:
    """A released results file: ``{key: answer}`` nested as its task's ground truth is."""
    task = _task(path.parent.name, f"{path}: a released results file lives in its task's folder (results/<task>/<model>.json); "
                                   f"its folder {path.parent.name!r}")
    data = read_json(path)
    depth = {"UBP": 3, "MCR": 2, "UCS": 2, "UEA": 2}.get(task.short, 1)
    out: list[GivenAnswer] = []

    def walk(value: Any, keys: list[str]) -> None:
        where = f"{path}: {' > '.join(keys) or 'the top'}"
        if len(keys) < depth:
            if not isinstance(value, dict):
                raise UsageError(f"{where}: expected a JSON object (the released {task.short} results nest {depth} level(s) of keys)")
            for key, inner in value.items():
                walk(inner, [*keys, str(key)])
            return
        if not isinstance(value, str):
            raise UsageError(f"{where}: expected the answer, a string")
        failed = value.strip() in RELEASED_FAILURES
        out.append(GivenAnswer(task.name, ":".join(keys), "" if failed else value, where, failed))

    walk(data, [])
    return out


def read_answers(paths: Sequence[str]) -> list[GivenAnswer]:
    """Every ``--answers`` file, read and checked (module docstring); one line for a second
    answer to the same query."""
    out: list[GivenAnswer] = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"--answers {name}: no such file")
        found = _read_released(path) if path.suffix == ".json" else _read_lines(path)
        if not found:
            raise UsageError(f"{name}: no answers")
        out += found
    seen: dict[tuple[str, str], str] = {}
    for given in out:
        earlier = seen.setdefault((given.task, given.id), given.where)
        if earlier != given.where:
            raise UsageError(f"{given.where}: a second answer to {TASKS[given.task].short} query {given.id!r} (the first: {earlier})")
    return out


def match(queries: Sequence[Query], given: Sequence[GivenAnswer], source: str) -> tuple[list[tuple[Query, GivenAnswer]], list[str]]:
    """Each answer with its query (by task and id; SMQ's by its question too), in the queries'
    order, and notes on the queries left unanswered; one line for an answer no query has."""
    by_id = {(q.task, q.id): q for q in queries}
    by_text = {(q.task, q.text): q for q in queries if TASKS[q.task].short == "SMQ"}
    answered: dict[int, GivenAnswer] = {}
    for g in given:
        query = by_id.get((g.task, g.id)) or by_text.get((g.task, g.id))
        if query is None:
            raise UsageError(f"{g.where}: no {TASKS[g.task].short} query {g.id[:80]!r} in {source} (ids as results.json gives them)")
        if id(query) in answered:
            raise UsageError(f"{g.where}: a second answer to {TASKS[g.task].short} query {query.id!r} (the first: {answered[id(query)].where})")
        answered[id(query)] = g
    pairs = [(q, answered[id(q)]) for q in queries if id(q) in answered]
    notes = []
    for task in dict.fromkeys(q.task for q in queries):
        total = sum(1 for q in queries if q.task == task)
        graded = sum(1 for q, _ in pairs if q.task == task)
        if graded < total:
            notes.append(f"{TASKS[task].short}: {graded} of its {total} queries answered in the --answers file(s); only those are graded")
    return pairs, notes
