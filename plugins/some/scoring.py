"""SoMe's scoring (Xue et al., "Evaluation Metrics" and appendix "Details of Evaluation").

* Choice tasks (MID, UBP, UEA, UCS, MCR): an LLM pulls the final label out of the agent's
  answer (the appendix's extraction prompts; ``error`` when there is none); accuracy is eq. 1,
  ACC = P(ŷ = y), over every query of the task, so an unfinished query counts as wrong.
* Judged tasks (RED, SES, SMQ): an LLM judge rates the answer against the reference, 0–5 per
  criterion (RED: accuracy, completeness, relevance; SES: accuracy, completeness; SMQ:
  accuracy); the score is the mean over criteria and queries, normalised to 0–100 (× 20).
  With several judges the per-query score is their mean. A query without an answer scores 0
  without asking a judge; a judge reply that cannot be read after one repair counts as 0 and
  is counted in ``judge_failures`` (our choice: the paper does not say).
* TCR, the task completion rate: the share of queries the agent completed (the released
  ``eval_scripts/*_compute_TCR.py``): a choice task's query is completed when a label could be
  extracted from the answer (the extraction's ``error`` is not completed); a judged task's
  query is completed unless its answer scored 0 and a judge, asked whether the answer did the
  task at all (:func:`completed_anyway`, the ``complete_<task>`` prompts), says it did not. An
  answer longer than :data:`LONGEST_ANSWER` characters scores 0 without a judge and is not
  completed (the released scoring: "llama may trap in infinite loop"). A query the agent did
  not finish (step limit, unreadable reply, failed LLM call) has no answer: not completed.
  Where the released scripts contradict themselves (RED's TCR counts the zero-score answers
  the checker calls summaries as failures; SES's reads RED's files), the rule above, SMQ's,
  is applied to all three; docs/some.md lists it.

An answer that is exactly a label (``yes``, ``是``, ``half-true``...) is taken as it is; any
other goes to the extraction LLM (:meth:`townsquare.api.LLMClient.choose`: one repair
request, then ``error``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from townsquare.api import LLMClient, Message
from townsquare.lib.prompt_files import fill_prompt

from .tasks import SOME_LABELS, TaskType

_SCORE = r"\**\s*[:：=]?\s*\**\s*([0-5](?:\.\d+)?)"

#: answers longer than this score 0 unjudged and are not completed (the released scoring scripts)
LONGEST_ANSWER = 5000
#: the completion check's labels
COMPLETION = ("complete", "incomplete")


async def extract_label(judge: LLMClient, task: TaskType, question: str, answer: str, prompts: dict[str, str]) -> str:
    """The label the answer settles on, or ``error``."""
    direct = plain_label(answer, task.labels)
    if direct is not None:
        return direct
    if not answer.strip():
        return "error"
    template = {"MID": "extract_verdict", "UEA": "extract_emotion"}.get(task.short, "extract_yes_no")
    prompt = fill_prompt(prompts[template], question=question, answer=answer)
    return await judge.choose(prompt, [*task.labels, "error"], purpose=f"some.extract.{task.short.lower()}", default="error",
                              temperature=0.0)


def plain_label(answer: str, labels: Sequence[str]) -> str | None:
    """``answer`` when it is nothing but one of ``labels`` (or SoMe's Chinese form of one)."""
    text = re.sub(r"[\s\"'“”「」*.。!！,，:：]+", " ", answer).strip().lower()
    text = SOME_LABELS.get(text, text)
    return text if text in labels else None


def parse_scores(reply: str, criteria: Sequence[str]) -> dict[str, float] | None:
    """``Accuracy: 4, Completeness: 3`` as ``{accuracy: 4.0, completeness: 3.0}``; a lone number
    when there is one criterion; None when a criterion is missing."""
    scores = {}
    for name in criteria:
        match = re.search(rf"{name}{_SCORE}", reply, re.IGNORECASE)
        if match is None:
            break
        scores[name] = float(match.group(1))
    else:
        return scores
    if len(criteria) == 1:
        alone = re.fullmatch(r"\s*\**\s*([0-5](?:\.\d+)?)\s*\**\s*(?:/\s*5)?\s*\.?\s*", reply)
        if alone:
            return {criteria[0]: float(alone.group(1))}
    return None


def normalised(scores: dict[str, float]) -> float:
    """The mean of 0–5 criterion scores on SoMe's 0–100 scale."""
    return 20.0 * sum(scores.values()) / len(scores)


async def judge_score(judge: LLMClient, task: TaskType, question: str, reference: str, answer: str,
                      prompts: dict[str, str], max_tokens: int = 48) -> dict[str, float] | None:
    """One judge's criterion scores (one repair request), or None."""
    prompt = fill_prompt(prompts[f"score_{task.name}"], question=question, reference=reference, answer=answer)
    messages = (Message("user", prompt),)
    purpose = f"some.score.{task.short.lower()}"
    form = ", ".join(f"{c.capitalize()}: <0-5>" for c in task.criteria)
    reply = await judge.text(messages, purpose=purpose, max_tokens=max_tokens, temperature=0.0)
    scores = parse_scores(reply, task.criteria)
    if scores is None:
        repair = (*messages, Message("assistant", reply), Message("user", f"Reply in exactly this form: {form}"))
        reply = await judge.text(repair, purpose=f"{purpose}.repair", max_tokens=max_tokens, temperature=0.0)
        scores = parse_scores(reply, task.criteria)
        if scores is None:
            judge.report_parse_failure(purpose, reply)
    return scores


async def completed_anyway(judge: LLMClient, task: TaskType, question: str, reference: str, answer: str,
                           prompts: dict[str, str]) -> bool:
    """Whether an answer that scored 0 still did the task (released ``*_compute_TCR.py``)."""
    prompt = fill_prompt(prompts[f"complete_{task.name}"], question=question, reference=reference, answer=answer)
    found = await judge.choose(prompt, COMPLETION, purpose=f"some.complete.{task.short.lower()}", default="incomplete", temperature=0.0)
    return found == "complete"


@dataclass
class Result:
    """One query's outcome."""

    task: str
    id: str
    query: str
    label: str
    status: str
    answer: str = ""
    completed: bool = False
    extracted: str | None = None
    correct: bool | None = None
    criteria: dict[str, float] = field(default_factory=dict)
    score: float | None = None  # 0-100
    judge_failures: int = 0
    steps: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    repairs: int = 0
    error: str = ""


@dataclass
class TaskSummary:
    task: str
    short: str
    kind: str
    queries: int
    accuracy: float | None  # 0-100, choice tasks
    score: float | None  # 0-100, judged tasks
    tcr: float  # 0-100
    mean_tool_calls: float
    tool_errors: int
    repairs: int
    unparsable: int
    llm_failures: int
    judge_failures: int

    @property
    def metric(self) -> float:
        return self.accuracy if self.accuracy is not None else (self.score or 0.0)


def summarise(task: TaskType, results: list[Result]) -> TaskSummary:
    """A task's row of SoMe's tables 3 and 4 (ACC or score, TCR), with the counts behind them."""
    n = len(results)
    share = (lambda k: 100.0 * k / n) if n else (lambda k: 0.0)
    accuracy = share(sum(1 for r in results if r.correct)) if task.kind == "choice" else None
    score = (sum(r.score or 0.0 for r in results) / n if n else 0.0) if task.kind == "score" else None
    return TaskSummary(
        task=task.name, short=task.short, kind=task.kind, queries=n, accuracy=accuracy, score=score,
        tcr=share(sum(1 for r in results if r.completed)),
        mean_tool_calls=sum(len(r.tool_calls) for r in results) / n if n else 0.0,
        tool_errors=sum(1 for r in results for c in r.tool_calls if not c["ok"]),
        repairs=sum(r.repairs for r in results), unparsable=sum(1 for r in results if r.status == "unparsable"),
        llm_failures=sum(1 for r in results if r.status == "llm_failure"), judge_failures=sum(r.judge_failures for r in results),
    )


def format_table(summaries: list[TaskSummary]) -> str:
    """The per-task table the command prints."""
    head = f"{'task':<5} {'queries':>7} {'ACC':>6} {'score':>6} {'TCR':>6} {'tools/q':>7} {'tool err':>8} {'repairs':>7} {'failed':>6}"
    lines = [head]
    cell = lambda v: f"{v:>6.1f}" if v is not None else f"{'-':>6}"  # noqa: E731
    for s in summaries:
        lines.append(f"{s.short:<5} {s.queries:>7} {cell(s.accuracy)} {cell(s.score)} {s.tcr:>6.1f} {s.mean_tool_calls:>7.1f} "
                     f"{s.tool_errors:>8} {s.repairs:>7} {s.unparsable + s.llm_failures:>6}")
    if summaries:
        lines.append(f"{'avg':<5} {sum(s.queries for s in summaries):>7} {'':>6} {'':>6} "
                     f"{sum(s.tcr for s in summaries) / len(summaries):>6.1f}   mean of ACC/score: "
                     f"{sum(s.metric for s in summaries) / len(summaries):.1f}")
    return "\n".join(lines)
