"""A ``recsys`` run's interactions as RecBole atomic files (``townsquare recbole RUN``). Not a
plugin.

RecAgent's simulator can "easily incorporate external recommendation library (e.g., RecBole)"
(Wang et al., "Recommendation Algorithm"); these files let any RecBole model train on what the
agents did. RecBole's atomic files are tab-separated, with a header of ``name:type`` fields
(``token``, ``token_seq`` with space-separated tokens, ``float``):

- ``NAME.inter``: ``user_id:token  item_id:token  rating:float  timestamp:float``, one row per
  watch in the run, in order (rating 1-10 as the agent gave it, timestamp the simulated time in
  Unix seconds); with ``impressions``, a ``label:float`` column (1 for a watch) and one row
  with label 0 for each item shown on a page but never watched by that user (as the
  reference code's interaction file: 1 watched, 0 recommended and not chosen); with
  ``history``, the personas' earlier ratings too (doubled to 1-10), each at its real time (a
  MovieLens rating's own timestamp, the persona history's ``timestamp``), or, for a history
  without times, one second apart just before the run's first action;
- ``NAME.item``: ``item_id:token  title:token_seq  genre:token_seq``, the whole catalogue;
- ``NAME.user``: ``user_id:token  name:token_seq  age:float  gender:token  career:token_seq
  interest:token_seq``, one row per agent.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

from townsquare.api import UsageError


def clean(value: Any) -> str:
    """A value with no tab or line break (they would split a RecBole row)."""
    return " ".join(str(value).split()) if value is not None else ""


def tokens(values: Iterable[Any]) -> str:
    """A token sequence: each value one token (inner blanks become ``_``)."""
    return " ".join(re.sub(r"\s+", "_", str(v).strip()) for v in values if str(v).strip())


def write_atomic(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\t".join(header) + "\n")
        for row in rows:
            fh.write("\t".join(clean(v) for v in row) + "\n")
    return path


def seconds(iso: str | None) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp() if iso else 0.0
    except ValueError:
        return 0.0


def export_recbole(run: str, out: Path | None = None, name: str | None = None, *, impressions: bool = False,
                   history: bool = False, plugin_options: Sequence[str] = ()) -> list[Path]:
    """Write ``NAME.inter``, ``NAME.item`` and ``NAME.user`` for the run; returns their paths."""
    from townsquare.api.commands import load_run

    from .catalogue import RecsysConfig, load_catalogue

    run_dir, scenario, _ = load_run(run, extra_plugin_options=plugin_options)
    if not isinstance(scenario.platform.config, RecsysConfig):
        raise UsageError(f"{run}: the run's platform is {scenario.platform.spec.name!r}: RecBole files need a recsys run")
    catalogue = load_catalogue(scenario.platform.config, scenario.base_dir)
    name = name or scenario.model.name
    out = out or run_dir.path / "recbole"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create the folder: {exc.strerror}") from None
    db = sqlite3.connect(f"file:{run_dir.events_path}?mode=ro", uri=True)
    try:
        actions = db.execute("SELECT agent_id, kind, target_post, post_ids, created_at, detail FROM actions "
                             "WHERE ok = 1 AND kind IN ('watch', 'recommend', 'next_page') ORDER BY seq").fetchall()
        agents = db.execute("SELECT agent_id, name, persona FROM agents ORDER BY idx").fetchall()
    finally:
        db.close()
    start = min((seconds(a[4]) for a in actions), default=0.0)
    inter: list[list[Any]] = []
    if history:
        for agent, _, persona in agents:
            earlier = [h for h in json.loads(persona).get("fields", {}).get("history") or () if isinstance(h, dict) and "id" in h]
            for n, h in enumerate(earlier):
                rating = min(10.0, 2 * float(h["rating"])) if h.get("rating") is not None else ""
                when = float(h["timestamp"]) if h.get("timestamp") else start - (len(earlier) - n)
                inter.append([agent, h["id"], rating, when, 1])
    watched = {(a, t) for a, kind, t, *_ in actions if kind == "watch"}
    shown: dict[tuple[str, str], float] = {}
    for agent, kind, target, post_ids, created, detail in actions:
        if kind == "watch":
            inter.append([agent, target, json.loads(detail or "{}").get("rating", ""), seconds(created), 1])
        elif impressions:
            for item in json.loads(post_ids or "[]"):
                if (agent, item) not in watched:
                    shown.setdefault((agent, item), seconds(created))
    inter += [[agent, item, "", when, 0] for (agent, item), when in shown.items()]
    header = ["user_id:token", "item_id:token", "rating:float", "timestamp:float"] + (["label:float"] if impressions else [])
    paths = [write_atomic(out / f"{name}.inter", header, (row if impressions else row[:4] for row in inter))]
    paths.append(write_atomic(out / f"{name}.item", ["item_id:token", "title:token_seq", "genre:token_seq"],
                              ([item.id, item.title, tokens(item.genres)] for item in catalogue.items)))
    users = []
    for agent, display, persona in agents:
        fields = json.loads(persona).get("fields", {})
        users.append([agent, display, fields.get("age") or "", fields.get("gender") or "", fields.get("career") or "",
                      tokens(fields.get("interests") or ())])
    paths.append(write_atomic(out / f"{name}.user", ["user_id:token", "name:token_seq", "age:float", "gender:token",
                                                     "career:token_seq", "interest:token_seq"], users))
    return paths
