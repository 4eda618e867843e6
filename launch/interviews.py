"""Interviews: ask a run's agent a question at a round (``townsquare interview RUN AGENT
"question"``, :mod:`townsquare.commands.interview`; the notebook's ``Run.interview``; the
dashboard's interview box).

The run is rebuilt from its manifest (with the plugins it ran with), every component's state
is restored from the checkpoint after the round asked about (default: the newest), and the
agent's persona is the one in the run's ``agents`` table (a branch may have edited it). The
agent then answers with its own slots:

- its persona: ``persona.context`` rendered with the question as the query when the slot is
  filled (Zhou et al.'s dynamic persona retrieval), else the whole persona text;
- its memory: the top ``k`` records for the question from its memory chain
  (:func:`townsquare.memory.agent_memory`: action memory, Park's stream, RecAgent's tiers alike);
- its LLM: the run's provider and middleware.

Interviews spend the run's money, so they go through its budget, a cache and a journal of their
own, in ``RUN/interviews/`` (the run's own tables stay what the run did: a replay still equals
it, and a live run keeps its database to itself):

- **journal**: every call is a row of ``llm_calls`` in ``RUN/interviews/events.sqlite`` (status,
  tokens, cost, errors), and the run's response cache middleware keeps the paid answers in
  ``RUN/interviews/llm_cache.sqlite``;
- **cache**: a question asked before of the same agent at the same round, on the same model
  (the same prompt), is answered from ``RUN/interviews.jsonl`` without a call (``cached``, a
  ``cached`` row in the journal, cost 0);
- **budget**: the run's ``[plugins.llm_budget]`` limits count the run's spending (as of its
  newest checkpoint) plus every interview's; a question past a limit is refused with the
  budget's message (:class:`~townsquare.errors.RunStopped`, exit status 3), and nothing is
  asked.

One interview at a time per run directory (``RUN/interviews/.lock``: a second process is
told who holds it). Each answer is appended to ``<run>/interviews.jsonl`` with the question,
round, agent, model, the prompt it was asked with and the time; ``--all`` also writes the
answers as CSV.
"""

from __future__ import annotations

import asyncio
import csv
import json
import sqlite3
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Sequence

import structlog

from townsquare.components import Agent
from townsquare.errors import RunStopped, UsageError
from townsquare.llm import LLMCallRecord, Message
from townsquare.memory import agent_memory
from townsquare.persona import Persona
from townsquare.rundir import RunDir
from townsquare.launch.run_lock import locked, open_run
from townsquare.launch.runner import load_run
from townsquare.world import World

log = structlog.get_logger("townsquare.launch.interviews")

INTERVIEWS_FILE = "interviews.jsonl"
#: the interviews' own run directory inside the run's: their journal, cache and lock
JOURNAL_DIR = "interviews"

#: The interview prompt (our own words): who the agent is, what it remembers, the question.
SYSTEM = "You are {name}, a user of a social media platform. Stay in character.\n\nAbout you:\n{persona}"
USER = ("It is {now}. Things you remember, most relevant first:\n{memories}\n\n"
        "An interviewer asks you: {question}\n"
        "Answer in the first person, in one to three sentences, from what you know and remember.")
NO_MEMORIES = "(nothing comes to mind)"


@dataclass
class Answer:
    agent_id: str
    population: str
    round: int
    question: str
    answer: str
    model: str
    provider: str
    prompt: str
    asked_at: str
    #: answered from an earlier interview's answer to the same prompt (no call, no cost)
    cached: bool = field(default=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def interview(run_path: str | Path, question: str, *, agents: Sequence[str] = (), population: str | None = None,
              all_agents: bool = False, round: int | None = None, memories: int = 8, max_tokens: int = 200) -> list[Answer]:
    """Ask ``question`` to the agents named (or every agent, or every agent of ``population``)
    at ``round``; the answers are appended to ``<run>/interviews.jsonl`` and returned. A spent
    budget raises :class:`~townsquare.errors.RunStopped`; the answers given before it are kept."""
    if not question.strip():
        raise UsageError("the question is empty")
    if memories < 0 or max_tokens <= 0:
        raise UsageError(f"memories = {memories}, max_tokens = {max_tokens}: memories is 0 or more, max_tokens 1 or more")
    run = open_run(run_path)
    run_dir, scenario, plugins = load_run(run_path)
    saved = _checkpoint(run, round)
    _choose(_recorded_agents(run), list(agents), population, all_agents)  # a refusal leaves nothing behind
    journal = RunDir(run.path / JOURNAL_DIR)
    (journal.path / "checkpoints").mkdir(parents=True, exist_ok=True)
    answers: list[Answer] = []
    with locked(journal):
        try:
            asyncio.run(_ask(run, journal, scenario, plugins, saved, question, list(agents), population, all_agents, memories,
                             max_tokens, answers))
        except RunStopped as exc:  # the budget's message names the journal folder: the run is what to resume
            # of its kind: a spent budget stays a RunStopped, an LLM outage an LLMFatal
            raise type(exc)(f"interview refused: {exc.reason.replace(str(journal.path), str(run.path))}") from None
        finally:
            _keep(run, answers)
    return answers


def _recorded_agents(run: RunDir) -> list[SimpleNamespace]:
    """The run's agents as its ``agents`` table lists them (ids and populations), read before
    anything is built or made, so a wrong name is refused at once."""
    if not run.events_path.is_file():
        raise UsageError(f"{run.path}: no events.sqlite (the run never started): nobody to interview")
    db = sqlite3.connect(f"file:{run.events_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT agent_id, population FROM agents ORDER BY rowid").fetchall()
    finally:
        db.close()
    return [SimpleNamespace(id=agent_id, population=population) for agent_id, population in rows]


def _keep(run: RunDir, answers: list[Answer]) -> None:
    if not answers:
        return
    with open(run.path / INTERVIEWS_FILE, "a", encoding="utf-8") as fh:
        for answer in answers:
            fh.write(json.dumps(answer.to_dict(), ensure_ascii=False) + "\n")


def write_csv(answers: Sequence[Answer], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["agent_id", "population", "round", "question", "answer", "model", "provider",
                                                "asked_at", "cached"])
        writer.writeheader()
        for answer in answers:
            writer.writerow({k: v for k, v in answer.to_dict().items() if k != "prompt"})
    return path


def _checkpoint(run: RunDir, round: int | None) -> tuple[int, dict[str, Any]] | None:
    if round is None:
        return run.latest_checkpoint()
    if round < 0:
        return None  # before the first round: the agents as built
    state = run.checkpoint_at(round)
    if state is None:
        kept = ", ".join(str(r) for r, _ in run.checkpoints()) or "none"
        raise UsageError(f"--round {round}: {run.path} keeps no checkpoint after that round (kept: {kept}; "
                         "run with --set engine.keep_checkpoints=0 to keep all)")
    return round, state


async def _ask(run: RunDir, journal: RunDir, scenario: Any, plugins: Any, saved: tuple[int, dict[str, Any]] | None, question: str,
               wanted: list[str], population: str | None, all_agents: bool, k: int, max_tokens: int, answers: list[Answer]) -> None:
    # an interview is no run: its world's calls go to the interviews' journal, no hook hears them,
    # and its rows carry the round asked about
    round, state = saved if saved is not None else (-1, None)
    world = await World.open(scenario, journal, state=state, round=round)
    try:
        if world.services.llm is None:
            raise UsageError(f"{run.path}: the run has no LLM to answer with; interview a run made with one "
                             "(townsquare run SCENARIO --llm PROVIDER[:MODEL])")
        _spent_so_far(run, journal, world)
        _restore_personas(run, world.agents)
        chosen = _choose(world.agents, wanted, population, all_agents)
        earlier = _earlier_answers(run)
        try:
            for agent in chosen:
                answers.append(await _answer(world, agent, round, question, k, max_tokens, earlier))
        finally:
            world.write_calls()
    finally:
        await world.aclose()


def _spent_so_far(run: RunDir, journal: RunDir, world: World) -> None:
    """The LLM middleware as the run left it (its newest checkpoint: what the budget had
    counted), then every earlier interview's calls shown to the accounting's observers (the
    budget counts them as it counts the run's)."""
    newest = run.latest_checkpoint()
    saved = newest[1].get("llm", {}) if newest is not None else {}
    for middleware in world.llm_middleware:
        key = type(middleware).__name__
        if key in saved and hasattr(middleware, "set_state"):
            middleware.set_state(saved[key])
    observers = getattr(world.accounting, "observers", [])
    if not observers or not journal.events_path.is_file():
        return
    db = sqlite3.connect(f"file:{journal.events_path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT round, agent_id, purpose, provider, model, status, prompt_tokens, completion_tokens, "
                          "latency_ms, cost FROM llm_calls").fetchall()
    except sqlite3.Error:
        rows = []
    finally:
        db.close()
    for row in rows:
        record = LLMCallRecord(round=row[0], agent_id=row[1], purpose=row[2], provider=row[3], model=row[4], status=row[5],
                               prompt_tokens=row[6] or 0, completion_tokens=row[7] or 0, latency_ms=row[8] or 0.0, cost=row[9] or 0.0)
        for observer in observers:
            observer(record)


def _earlier_answers(run: RunDir) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """Earlier interviews' answers by (agent, provider, model, prompt): the interview cache."""
    found: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    path = run.path / INTERVIEWS_FILE
    if not path.is_file():
        return found
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
                found.setdefault((entry["agent_id"], entry["provider"], entry["model"], entry["prompt"]), entry)
            except (ValueError, KeyError, TypeError):
                continue  # a line cut off by a kill: not an answer
    return found


def _choose(agents: Sequence[Any], wanted: list[str], population: str | None, all_agents: bool) -> list[Any]:
    by_id = {a.id: a for a in agents}
    populations = sorted({a.population for a in agents})
    if population is not None and population not in populations:
        raise UsageError(f"--population {population}: no such population (populations: {', '.join(populations)})")
    if all_agents:
        return [a for a in agents if population is None or a.population == population]
    if not wanted:
        raise UsageError("name an agent to interview, or --all")
    for agent_id in wanted:
        if agent_id not in by_id:
            raise UsageError(f"no agent {agent_id!r} in the run (agents: {', '.join(list(by_id)[:5])}...)")
    return [by_id[a] for a in wanted]


def _restore_personas(run: RunDir, agents: list[Agent]) -> None:
    """The personas the run ended with (a branch may have edited one)."""
    if not run.events_path.is_file():
        return
    db = sqlite3.connect(f"file:{run.events_path}?mode=ro", uri=True)
    try:
        stored = dict(db.execute("SELECT agent_id, persona FROM agents").fetchall())
    finally:
        db.close()
    for agent in agents:
        if agent.id in stored:
            agent.persona = Persona.from_dict(json.loads(stored[agent.id]))


async def _answer(world: World, agent: Agent, round: int, question: str, k: int, max_tokens: int,
                  earlier: dict[tuple[str, str, str, str], dict[str, Any]]) -> Answer:
    ctx = world.context(agent, round + 1)  # the state after ``round``: the next round's start
    now, llm = ctx.now, ctx.llm
    context = agent.components.get("persona.context")
    persona = await context.render(ctx, question) if context is not None else agent.persona.text
    recalled = await agent_memory(agent).recall(ctx, question, k)
    lines = [f"- {record.text}" for record in recalled if record.text.strip()]
    system = SYSTEM.format(name=agent.persona.name, persona=persona)
    user = USER.format(now=now.strftime("%A %d %B %Y, %H:%M"), memories="\n".join(lines) or NO_MEMORIES, question=question)
    provider = world.provider
    model, name = str(getattr(provider, "model", "")), str(getattr(provider, "name", ""))
    prompt = f"{system}\n\n{user}"
    before = earlier.get((agent.id, name, model, prompt))
    if before is not None:
        world.journal.record(LLMCallRecord(round=round, agent_id=agent.id, purpose="interview", provider=name, model=model,
                                           status="cached"))
        log.info("interview.cached", agent=agent.id, round=round)
        text, cached = str(before["answer"]), True
    else:
        text = (await llm.text([Message("system", system), Message("user", user)], purpose="interview", max_tokens=max_tokens)).strip()
        cached = False
        log.info("interview.answered", agent=agent.id, round=round, memories=len(lines))
    answer = Answer(agent_id=agent.id, population=agent.population, round=round, question=question, answer=text,
                    model=model, provider=name, prompt=prompt, cached=cached,
                    asked_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if not cached:
        earlier[(agent.id, name, model, prompt)] = answer.to_dict()
    return answer
