"""``townsquare interview RUN AGENT "question"``: ask an agent a question at a round.

The run is rebuilt from its manifest in a scratch directory (the run directory itself is only
read), every component's state is restored from the checkpoint after the round asked about
(default: the newest), and the agent's persona is the one in the run's ``agents`` table (a
branch may have edited it). The agent then answers with its own slots:

- its persona: ``persona.context`` rendered with the question as the query when the slot is
  filled (Zhou et al.'s dynamic persona retrieval), else the whole persona text;
- its memory: the top ``k`` records for the question from its memory chain
  (:func:`townsquare.memory.agent_memory`: action memory, Park's stream, RecAgent's tiers alike);
- its LLM: the run's provider and middleware (the run's response cache is copied into the
  scratch directory, so a question asked before is answered from it).

Nothing of the run changes: the calls are not added to ``events.sqlite``. Each answer is
appended to ``<run>/interviews.jsonl`` with the question, round, agent, model, the prompt it was
asked with and the time; ``--all`` also writes the answers as CSV.
"""

from __future__ import annotations

import asyncio
import csv
import json
import shutil
import sqlite3
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

import structlog

from .branch import CACHE_FILE, copy_sqlite
from .components import Agent, StepContext
from .engine import Simulation
from .errors import UsageError
from .llm import Message
from .memory import agent_memory
from .persona import Persona
from .rundir import RunDir
from .runner import load_run

log = structlog.get_logger("townsquare.interview")

INTERVIEWS_FILE = "interviews.jsonl"

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def interview(run_path: str | Path, question: str, *, agents: Sequence[str] = (), population: str | None = None,
              all_agents: bool = False, round: int | None = None, memories: int = 8, max_tokens: int = 200) -> list[Answer]:
    """Ask ``question`` to the agents named (or every agent, or every agent of ``population``)
    at ``round``; the answers are appended to ``<run>/interviews.jsonl`` and returned."""
    if not question.strip():
        raise UsageError("the question is empty")
    run = RunDir.open(run_path)
    run_dir, scenario, plugins = load_run(run_path)
    saved = _checkpoint(run, round)
    answers = asyncio.run(_ask(run, scenario, plugins, saved, question, list(agents), population, all_agents, memories, max_tokens))
    with open(run.path / INTERVIEWS_FILE, "a", encoding="utf-8") as fh:
        for answer in answers:
            fh.write(json.dumps(answer.to_dict(), ensure_ascii=False) + "\n")
    return answers


def write_csv(answers: Sequence[Answer], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["agent_id", "population", "round", "question", "answer", "model", "provider", "asked_at"])
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


async def _ask(run: RunDir, scenario: Any, plugins: Any, saved: tuple[int, dict[str, Any]] | None, question: str,
               wanted: list[str], population: str | None, all_agents: bool, k: int, max_tokens: int) -> list[Answer]:
    scratch = Path(tempfile.mkdtemp(prefix="townsquare-interview-"))
    try:
        cache = run.path / CACHE_FILE
        if cache.is_file():
            copy_sqlite(cache, scratch / cache.name)
        (scratch / "checkpoints").mkdir()
        simulation = Simulation(scenario, plugins, RunDir(scratch))
        try:
            await simulation.build()
            if simulation.services.llm is None:
                raise UsageError(f"{run.path}: the run has no LLM to answer with (add an [llm] table, or --set llm.name=...)")
            round = -1
            if saved is not None:
                round, state = saved
                simulation.set_state(state)
            _restore_personas(run, simulation.agents)
            chosen = _choose(simulation.agents, wanted, population, all_agents)
            return [await _answer(simulation, agent, round, question, k, max_tokens) for agent in chosen]
        finally:
            await simulation.aclose()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _choose(agents: list[Agent], wanted: list[str], population: str | None, all_agents: bool) -> list[Agent]:
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


async def _answer(simulation: Simulation, agent: Agent, round: int, question: str, k: int, max_tokens: int) -> Answer:
    clock = simulation.model.clock
    now = clock.start + timedelta(minutes=(round + 1) * clock.minutes_per_round)
    llm = simulation.services.llm.for_agent(agent.id)
    ctx = StepContext(agent=agent, round=round + 1, now=now, minutes_per_round=clock.minutes_per_round,
                      services=simulation.services, llm=llm, start=clock.start)
    context = agent.components.get("persona.context")
    persona = await context.render(ctx, question) if context is not None else agent.persona.text
    recalled = await agent_memory(agent).recall(ctx, question, k)
    lines = [f"- {record.text}" for record in recalled if record.text.strip()]
    system = SYSTEM.format(name=agent.persona.name, persona=persona)
    user = USER.format(now=now.strftime("%A %d %B %Y, %H:%M"), memories="\n".join(lines) or NO_MEMORIES, question=question)
    text = await llm.text([Message("system", system), Message("user", user)], purpose="interview", max_tokens=max_tokens)
    provider = simulation.provider
    log.info("interview.answered", agent=agent.id, round=round, memories=len(lines))
    return Answer(agent_id=agent.id, population=agent.population, round=round, question=question, answer=text.strip(),
                  model=str(getattr(provider, "model", "")), provider=str(getattr(provider, "name", "")),
                  prompt=f"{system}\n\n{user}", asked_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
