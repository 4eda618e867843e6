"""The task harness: each query through the agent's tool loop, then extraction or judging.

Every LLM call goes through the clients it is given, which the command builds from the run's
provider and middleware (cache, budget, retries, accounting). Each query's calls are
attributed to an agent id of their own (``some/<TASK>/<query id>`` for the agent,
``some-judge[<judge spec>]/...`` for the judges), so the response cache, keyed by agent and by how often
that agent asked the same thing, answers a repeated evaluation exactly: a killed evaluation
resumes where it stopped and a finished one replays without a provider call.

Each task's agent is offered the task's own tools, as in the released code (:data:`.tasks.TASKS`).
An answer produced elsewhere (``--answers``, :mod:`.given_answers`) skips the agent and is
scored alike (:meth:`Harness.grade`).
An LLM call that fails after the retries ends that query (``status = "llm_failure"``) and the
evaluation goes on; a stop (a budget) ends the evaluation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import LLMClient, LLMFault
from townsquare.lib.prompt_files import fill_prompt

from .corpus import Corpus
from .scoring import LONGEST_ANSWER, Result, completed_anyway, extract_label, judge_score, normalised
from .tasks import TASKS, Query, is_correct
from .tool_loop import Transcript, protocol_text, run_tools
from .tools import Embed, ToolSettings, Toolbox, openai_tools

log = structlog.get_logger("townsquare.plugins.some")

#: choice tasks whose released extraction script (``eval_scripts/<T>_extraction.py``) counts an
#: answer over :data:`.scoring.LONGEST_ANSWER` characters as ``错误`` (error) without reading it;
#: MID's and UEA's scripts extract every answer
LONG_CHOICE_IS_ERROR = frozenset({"UBP", "UCS", "MCR"})


class HarnessSettings(BaseModel):
    """How the agent is run."""

    model_config = ConfigDict(extra="forbid")

    #: replies an agent may spend on one query (tool calls plus the answer; the released MAX_LLM_CALL_PER_RUN)
    max_steps: int = Field(20, gt=0)
    #: completion tokens per reply
    max_tokens: int = Field(512, gt=0)
    temperature: float = Field(0.0, ge=0, le=2)
    #: queries worked on at once
    concurrency: int = Field(4, gt=0)
    #: hold each reply to the step schema where the backend can (grammar, strict JSON schema);
    #: False: the schema is in the prompt only, and the model's own call-writing errors count
    constrained_tool_calls: bool = True
    tools: ToolSettings = Field(default_factory=ToolSettings)


@dataclass
class Harness:
    #: the agent's LLM (None when every answer is given: :meth:`grade`)
    agent: LLMClient | None
    judges: Sequence[LLMClient]
    embed: Embed | None
    prompts: dict[str, str]
    settings: HarnessSettings
    #: called with each finished result (progress, incremental writing)
    on_result: Callable[[Result], None] | None = None
    #: a name per judge (its spec), in the cache's agent ids: one judge never gets another's answers
    judge_names: Sequence[str] = ()

    async def evaluate(self, queries: list[Query], corpus_of: Callable[[str], Corpus],
                       given: Sequence[Any] | None = None) -> list[Result]:
        """Every query, at most ``settings.concurrency`` at a time; results in query order.
        ``given``: an answer produced elsewhere per query (:meth:`grade`), in their order."""
        gate = asyncio.Semaphore(self.settings.concurrency)

        async def one(k: int, query: Query) -> Result:
            async with gate:
                result = await (self.grade(query, given[k]) if given is not None else self.evaluate_one(query, corpus_of(query.task)))
            if self.on_result is not None:
                self.on_result(result)
            return result

        return list(await asyncio.gather(*(one(k, q) for k, q in enumerate(queries))))

    def _judges(self, task: Any, query: Query) -> list[LLMClient]:
        names = list(self.judge_names) or [str(i) for i in range(len(self.judges))]
        return [judge.for_agent(f"some-judge[{name}]/{task.short}/{query.id}") for name, judge in zip(names, self.judges)]

    async def grade(self, query: Query, given: Any) -> Result:
        """An answer produced elsewhere (:class:`.given_answers.GivenAnswer`), scored as
        :meth:`evaluate_one` scores the agent's: no tool call is known; the released scripts'
        failure mark is an unanswered query (``llm_failure``)."""
        status, error = ("llm_failure", "no answer: the released results file marks a failed query") if given.failed else ("answered", "")
        transcript = Transcript(status=status, answer=given.answer, error=error, calls=[])
        result = Result(task=query.task, id=query.id, query=query.text, label=query.label, status=status, answer=given.answer,
                        error=error)  # its steps and tool calls are unknown here: 0
        return await self._scored(TASKS[query.task], query, transcript, self._judges(TASKS[query.task], query), result)

    async def evaluate_one(self, query: Query, corpus: Corpus) -> Result:
        task = TASKS[query.task]
        assert self.agent is not None, "an agent answers the queries that have no given answer"
        agent = self.agent.for_agent(f"some/{task.short}/{query.id}")
        judges = self._judges(task, query)
        summarize = self._summarizer(agent)
        toolbox = Toolbox(corpus, self.embed, summarize, self.settings.tools, offered=task.tools)
        system = fill_prompt(self.prompts[f"system_{task.name}"], behavior=query.behavior or "interact with") \
            + "\n\n" + protocol_text(openai_tools(task.tools))
        try:
            transcript = await run_tools(agent, toolbox, system, query.text, max_steps=self.settings.max_steps,
                                         max_tokens=self.settings.max_tokens, temperature=self.settings.temperature,
                                         constrained=self.settings.constrained_tool_calls)
        except LLMFault as exc:
            log.warning("some.query_failed", task=task.short, query=query.id, error=exc.describe())
            transcript = Transcript(status="llm_failure", error=exc.describe(), calls=[])
        result = Result(task=task.name, id=query.id, query=query.text, label=query.label, status=transcript.status,
                        answer=transcript.answer, steps=len(transcript.calls) + (1 if transcript.status == "answered" else 0),
                        tool_calls=transcript.calls, repairs=transcript.repairs, error=transcript.error)
        return await self._scored(task, query, transcript, judges, result)

    async def _scored(self, task: Any, query: Query, transcript: Transcript, judges: list[LLMClient], result: Result) -> Result:
        try:
            await self._score(task, query, transcript, judges, result)
        except LLMFault as exc:  # the judge, not the agent, failed: the query is scored as unfinished
            log.warning("some.judge_failed", task=task.short, query=query.id, error=exc.describe())
            result.judge_failures += 1
            result.error = result.error or f"judge: {exc.describe()}"
        return result

    async def _score(self, task: Any, query: Query, transcript: Transcript, judges: list[LLMClient], result: Result) -> None:
        if task.kind == "choice":
            # the released UBP, UCS and MCR extraction scripts mark an answer over 5,000 characters an error unread
            too_long = task.short in LONG_CHOICE_IS_ERROR and len(transcript.answer) > LONGEST_ANSWER
            result.extracted = await extract_label(judges[0], task, query.text, transcript.answer, self.prompts) \
                if transcript.answered and not too_long else "error"
            result.correct = is_correct(task, result.extracted, query.label)
            result.completed = transcript.answered and result.extracted != "error"
            return
        result.completed = transcript.answered
        if not transcript.answered or len(transcript.answer) > LONGEST_ANSWER:
            result.score, result.completed = 0.0, False
            return
        per_judge = []
        for judge in judges:
            scores = await judge_score(judge, task, query.text, query.label, transcript.answer, self.prompts)
            if scores is None:
                result.judge_failures += 1
                per_judge.append(0.0)
            else:
                result.criteria = {k: result.criteria.get(k, 0.0) + v / len(judges) for k, v in scores.items()}
                per_judge.append(normalised(scores))
        result.score = sum(per_judge) / len(per_judge)
        if result.score == 0:  # a wrong answer may still have done the task: the first judge says
            result.completed = await completed_anyway(judges[0], task, query.text, query.label, transcript.answer, self.prompts)

    def _summarizer(self, agent: LLMClient) -> Callable[[str], Awaitable[str]]:
        """PostSummarization's LLM: the agent's own backbone (Xue et al., appendix)."""
        template = self.prompts["summarize_cluster"]

        async def summarize(posts: str) -> str:
            return await agent.text(fill_prompt(template, posts=posts), purpose="some.tool.summarize",
                                    max_tokens=self.settings.max_tokens, temperature=self.settings.temperature)

        return summarize
