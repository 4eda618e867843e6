"""Record the prompts at each decision point of a study's pathway from an oracle run: the
fixtures ``townsquare eval pathways`` asks a model (``plugins/pathways/prompts/<study>.json``).

    python tools/pathway_prompts.py                  # every study
    python tools/pathway_prompts.py --study party    # one (party, cocoon, conformity)

Each study's scenario is run with the oracle test model at its default dispositions
(``townsquare.testing.oracle``), every request it is sent is kept, and the decision points are
chosen from them by what the prompt holds, read as the oracle reads it:

- party (``examples/valentines.toml``; ``townsquare data fetch smallville-n25`` first):
  ``llm.news_importance``: the importance prompts whose memory holds news of the party (the
  scenario's topic pattern, ``valentine|party``) with a date or a clock time: the invitation as
  it is seeded, told, heard and reflected on; planning notes are left out (the oracle rates
  those one higher);
  ``llm.relay_fidelity``: the dialogue turns where the news the speaker would pass on, read as the
  oracle reads the prompt (its first news the dialogue has not had, ``news_to_tell``), is
  someone else's (``own_news``: not its own plans, not its status line) and is the party with a
  day, a time and a place (``reference``: the news, the event and its details).
- conformity (``examples/conformity.toml``, seeds 1-3): ``llm.conformity_weight``: the rating
  prompts with a last score whose memory shows others' opinions of the movie with a mean at
  least one point away from it (``reference``: own, recalled, as the oracle reads them).
- cocoon (``examples/cocoon.toml`` with RecAgent agents, 20 agents, 8 rounds):
  ``llm.follow_page``: the pages whose first item meets none of the profile's interests while
  another does, with no title heard of listed (``reference``: the first item's number and those
  that meet the interests).

Prompts are deduplicated and at most ``--per-disposition`` are kept, spread evenly over the run.
The prompts change when the designs' prompt files change: run this again and commit its output
(``tests/plugins/pathways`` checks that every shipped prompt is its template filled in).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from statistics import mean
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
OUT = ROOT / "plugins" / "pathways" / "prompts"
ORACLE = "townsquare.testing.oracle"


class Recorder:
    """A provider that passes requests to the oracle and keeps (request, answer, round)."""

    def __init__(self, inner: Any, current_round: Callable[[], int]):
        self.inner, self.current_round = inner, current_round
        self.name, self.model = inner.name, inner.model
        self.seen: list[tuple[Any, str, int]] = []

    def describe(self) -> dict:
        return self.inner.describe()

    async def complete(self, request: Any) -> Any:
        response = await self.inner.complete(request)
        self.seen.append((request, response.text, self.current_round()))
        return response


def record(scenario: str | Path, overrides: list[str], seed: int | None = None) -> list[tuple[Any, str, int]]:
    """Every request of an oracle run of ``scenario`` with its answer and round."""
    from townsquare.plugin_manager import make_plugin_manager
    from townsquare.launch.runner import start_run
    from townsquare.testing.oracle import OracleLLM

    rounds = {"now": 0}
    recorder = Recorder(OracleLLM(), lambda: rounds["now"])
    with tempfile.TemporaryDirectory(prefix="pathway-prompts-") as tmp:
        start_run(scenario, overrides=["llm.name=oracle", *overrides], seed=seed, out=Path(tmp) / "run",
                  plugins=make_plugin_manager(enable=[ORACLE]), llm_provider=recorder,
                  progress=lambda done, _: rounds.update(now=done + 1))
    return recorder.seen


def point(disposition: str, request: Any, answer: str, round_: int, reference: dict[str, Any]) -> dict[str, Any]:
    return {"disposition": disposition, "purpose": request.purpose, "agent": request.agent_id or "", "round": round_,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "labels": list(request.labels) if request.labels else None, "json_schema": request.json_schema,
            "answer_prefixes": list(request.answer_prefixes) if request.answer_prefixes else None,
            "max_tokens": request.max_tokens, "temperature": request.temperature, "reference": reference,
            "oracle_answer": answer}


def spread(items: list[dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """At most ``most`` of ``items``, evenly spaced (keeping their order)."""
    if len(items) <= most:
        return items
    return [items[round(i * (len(items) - 1) / (most - 1))] for i in range(most)] if most > 1 else items[:1]


def unique(found: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for key, item in found:
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


# --------------------------------------------------------------------------- party


#: what the party's news is about (examples/valentines.toml's ``plugins.town_metrics.topics.party.pattern``)
PARTY = re.compile(r"valentine|party", re.I)


def relay_reference(news: str) -> dict[str, str] | None:
    """What a relay of ``news`` could keep (the event, its day, time and place), None when the
    news is not the party with all three."""
    from townsquare.testing.oracle.park import CLOCK, DATE, event_clause, without_details

    what, _ = event_clause(news, "")
    date, time = DATE.search(news), CLOCK.search(news)
    place = re.search(r"\b(?:at|in)\s+(?:the\s+)?([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*)", what)
    if not (date and time and place and PARTY.search(news)):
        return None
    return {"news": news, "event": without_details(what).rstrip("."), "day": date.group(0), "time": time.group(0),
            "place": place.group(1)}


def party_points(seen: list[tuple[Any, str, int]], most: int) -> list[dict[str, Any]]:
    from townsquare.testing.oracle.park import CLOCK, DATE, news_in, news_to_tell, own_news
    from townsquare.testing.oracle.prompt_view import PromptView

    importance, relays = [], []
    for request, answer, round_ in seen:
        text = "\n\n".join(m.content for m in request.messages)
        if request.purpose == "importance":
            match = re.search(r"Memory \((\w+)\): (.*)", text, re.S)
            memory = match.group(2).split("\n\n")[0] if match else ""
            if memory and not (memory.startswith("For ") and "'s planning:" in memory) and \
                    any((DATE.search(s) or CLOCK.search(s)) and PARTY.search(s) for s in news_in(memory)):
                importance.append((memory, point("llm.news_importance", request, answer, round_, {"memory": memory})))
        elif request.purpose == "dialogue.turn":
            # a relay: the news this turn passes on, as the oracle reads the prompt, is someone
            # else's (not the speaker's own plans or its status line) and holds the party's details
            me, news = news_to_tell(PromptView.of(request))
            reference = relay_reference(news) if news is not None and not own_news(news, me) else None
            if reference is not None:
                relays.append((text, point("llm.relay_fidelity", request, answer, round_, reference)))
    return spread(unique(importance), most) + spread(unique(relays), most)


# --------------------------------------------------------------------------- conformity


def conformity_points(seen: list[tuple[Any, str, int]], most: int) -> list[dict[str, Any]]:
    from townsquare.testing.oracle.prompt_view import PromptView
    from townsquare.testing.oracle.recagent import heard_opinions, norm, section_lines

    found = []
    for request, answer, round_ in seen:
        if request.purpose != "recagent.conformity":
            continue
        view = PromptView.of(request)
        title = re.search(r"about the movie <([^<>]+)>", view.text)
        last = re.search(r"last time:\s*(\d+)/10", view.text)
        if not title or not last:
            continue
        held = [x for t, v in heard_opinions(section_lines(view, "What you remember about it")).items()
                if norm(t) == norm(title.group(1)) for x in v]
        own = float(last.group(1))
        if held and abs(mean(held) - own) >= 1:
            found.append((view.text, point("llm.conformity_weight", request, answer, round_,
                                           {"title": title.group(1), "own": own, "recalled": round(mean(held), 6), "voices": len(held)})))
    return spread(unique(found), most)


# --------------------------------------------------------------------------- cocoon


def cocoon_points(seen: list[tuple[Any, str, int]], most: int) -> list[dict[str, Any]]:
    from townsquare.testing.oracle.prompt_view import PromptView
    from townsquare.testing.oracle.recagent import LISTED, TITLE, genres_of, interests, norm

    found = []
    for request, answer, round_ in seen:
        if request.purpose != "recagent.page" or not request.labels:
            continue
        view = PromptView.of(request)
        listed = [(int(m.group(1)), norm(m.group(2)), genres_of(m.group(3)))
                  for m in (LISTED.match(line) for line in view.text.splitlines()) if m]
        heard = {norm(t) for t in TITLE.findall(view.section("Movies you have heard about but not watched"))}
        likes = interests(view)
        if not listed or not likes or any(title in heard for _, title, _ in listed):
            continue
        top, _, genres = listed[0]
        meeting = [n for n, _, g in listed[1:] if g & likes]
        if not genres & likes and meeting and f"watch {top}" in request.labels:
            found.append((view.text, point("llm.follow_page", request, answer, round_, {"top": top, "interests": meeting})))
    return spread(unique(found), most)


STUDIES: dict[str, tuple[Path, list[str], list[int | None], Callable[..., list[dict[str, Any]]]]] = {
    "party": (EXAMPLES / "valentines.toml", [], [None], party_points),
    "conformity": (EXAMPLES / "conformity.toml", [], [1, 2, 3], conformity_points),
    "cocoon": (EXAMPLES / "cocoon.toml", ["populations.0.slots.policy=recagent_policy", "populations.0.count=20", "rounds=8"],
               [None], cocoon_points),
}


def make(study: str, most: int, scenario: str | Path | None = None, overrides: list[str] = ()) -> dict[str, Any]:
    default, base, seeds, choose = STUDIES[study]
    scenario = scenario or default
    seen = [item for seed in seeds for item in record(scenario, [*base, *overrides], seed)]
    prompts = choose(seen, most)
    where = Path(scenario).resolve()
    source = str(where.relative_to(ROOT)) if where.is_relative_to(ROOT) else where.name
    return {"study": study, "source": source, "overrides": [*base, *overrides],
            "seeds": [s for s in seeds if s is not None] or "the scenario's",
            "made_by": f"python tools/pathway_prompts.py --study {study}", "oracle": "default dispositions",
            "requests_seen": len(seen), "prompts": prompts}


def write(data: dict[str, Any], path: Path) -> None:
    """One prompt a line: a regenerated fixture's diff shows which prompts changed."""
    head = json.dumps({k: v for k, v in data.items() if k != "prompts"}, ensure_ascii=False)[:-1]
    lines = ",\n".join(json.dumps(p, ensure_ascii=False) for p in data["prompts"])
    path.write_text(f'{head}, "prompts": [\n{lines}\n]}}\n', encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=sorted(STUDIES), action="append", help="a study (repeat; default: all)")
    parser.add_argument("--per-disposition", type=int, default=40, help="prompts kept per disposition (default 40)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder of the fixtures (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    from townsquare.lib import logs

    logs.configure(json_lines=False, level="error")
    args.out.mkdir(parents=True, exist_ok=True)
    for study in args.study or sorted(STUDIES):
        data = make(study, args.per_disposition)
        counts: dict[str, int] = {}
        for p in data["prompts"]:
            counts[p["disposition"]] = counts.get(p["disposition"], 0) + 1
        write(data, args.out / f"{study}.json")
        print(f"{study}: {data['requests_seen']:,} requests seen; kept " + ", ".join(f"{n} for {d}" for d, n in counts.items())
              + f" -> {args.out / (study + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
