"""RecAgent's profile module (Wang et al., "Profiling Module"): persona sources.

A RecAgent profile has an id, name, gender, age, traits, career, interests (item categories)
and behaviour features from {Watcher, Explorer, Critic, Chatter, Poster}; ``friends`` lists the
display names of the agents it is socially connected to (the platform ``recsys`` broadcasts
to them). Three sources, matching the paper's three strategies:

- ``recagent_csv`` (handcrafted profiles): RecAgent's profile CSV, ``user_1000.csv``
  (``id,name,gender,age,traits,status,interest,feature``) or the demo ``user.csv``
  (``id,name,age,traits,status,observations``: the observations become ``memories``), with
  a relationship file (``user_1,user_2,relationship[,closeness]``, keyed by id or by name) as
  the friend graph: ``friend_ids`` holds the profile ids (names repeat in ``user_1000.csv``),
  ``friends`` their names. Every relationship type counts as a connection unless ``relations``
  names the ones to keep. Rows are taken in file order.
- ``movielens_history`` (real-data alignment: "one can leverage the previously interacted
  items of the users in the dataset as the agent profiles"): one agent per MovieLens user of a
  folder in any layout (ml-latest-small, ml-100k, ml-1m). The user's ratings are split by
  time: the earlier ``history_fraction`` is the persona's ``history`` (``{"id", "title",
  "rating"}`` on the dataset's 1-5 scale, oldest first), the later ones ``future_items`` (ids,
  held out: ``townsquare eval recommenders`` scores recommenders on them). The interests are
  the ``top_genres`` most frequent genres of the history's ratings of at least ``min_rating``,
  ``favourites`` the titles rated highest. The history reaches every part of the agent: the
  profile shows its latest ratings, ``recagent_policy`` writes them into memory before the
  first step, the platform never offers those items again and (``history_in_log``) the
  recommender learns from them. Gender, age and occupation come from ``u.user`` (ml-100k) or
  ``users.dat`` (ml-1m, age as its group); ml-latest-small has none. ``history_limit`` keeps
  only the latest earlier ratings and the first later ones (all by default; a heavy rater's
  oldest ratings left out may be offered again).
- ``recagent_generated`` (GPT-based): the LLM completes profiles from a few seed profiles
  (the ``recagent_csv`` rows given by ``path``); every generated profile is checked field by
  field, and a malformed one is replaced by a cyclic copy of a seed, recorded as a
  parse failure.

All three share :class:`RecAgentProfilesConfig` (the kernel allows one config per plugin).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import BuildContext, Persona, PersonaSourceSpec, UsageError, hookimpl
from townsquare.lib.files import read_user_csv
from townsquare.lib.movielens import load_movielens_data
from townsquare.lib.persona_pool import cycle_personas

from .prompts import fill, load_prompts

log = structlog.get_logger("townsquare.plugins.recagent.profiles")

FEATURES = ("Watcher", "Explorer", "Critic", "Chatter", "Poster")


class RecAgentProfilesConfig(BaseModel):
    """Settings of the three RecAgent persona sources (paths relative to the scenario)."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = Field(None, description="recagent_csv / recagent_generated: the profile CSV; movielens_history: a MovieLens folder")
    relationships: str | None = Field(None, description="the relationship CSV (friend graph)")
    relations: list[str] | None = Field(None, description="relationship types kept as connections (default: all)")
    users: list[int] | None = Field(None, description="movielens_history: these MovieLens user ids (default: the first ones)")
    history_fraction: float = Field(0.5, gt=0, le=1, description="movielens_history: earlier share of ratings that forms the profile")
    top_genres: int = Field(3, ge=1, description="movielens_history: interests kept")
    favourites: int = Field(5, ge=0, description="movielens_history: highest-rated titles kept as favourites")
    history_limit: int | None = Field(None, ge=1, description="movielens_history: latest earlier ratings (and first later ones) a persona keeps (default: all)")
    min_rating: float = Field(3.5, ge=0, le=5, description="movielens_history: ratings at least this count as liked")
    prompts_file: str | None = None


def _resolve(path: str, base_dir: str) -> Path:
    return Path(path) if Path(path).is_absolute() else Path(base_dir) / path


def _read_csv(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    return read_user_csv(path, required, "profile file")


def _split(value: str | None, sep: str = ",") -> list[str]:
    return [part.strip() for part in (value or "").split(sep) if part.strip()]


def profile_persona(fields: dict[str, Any]) -> Persona:
    """A persona from RecAgent profile fields, with first-person sentences for prompts."""
    name = fields["name"]
    sentences = []
    age = f"{fields['age']} years old" if fields.get("age") else (f"aged {fields['age_group']}" if fields.get("age_group") else "")
    who = ", ".join(str(x) for x in (age, fields.get("gender"), fields.get("career")) if x)
    if who:
        sentences.append(f"I am {name}, {who}.")
    if fields.get("traits"):
        sentences.append(f"People describe me as {', '.join(fields['traits'])}.")
    if fields.get("interests"):
        sentences.append(f"I enjoy {', '.join(fields['interests'])}.")
    if fields.get("favourites"):
        sentences.append(f"My favourite movies include {', '.join(fields['favourites'])}.")
    return Persona(name=name, sentences=sentences, fields={k: v for k, v in fields.items() if k != "name"})


def read_profiles(path: Path) -> list[dict[str, Any]]:
    """RecAgent profile rows as field dicts (either CSV format)."""
    rows = _read_csv(path, ("id", "name", "age", "traits", "status"))
    profiles = []
    for n, row in enumerate(rows, start=2):
        if not (row.get("name") or "").strip():
            raise UsageError(f"{path}: line {n}: empty name")
        age = (row.get("age") or "").strip()
        if age and not age.isdigit():
            raise UsageError(f"{path}: line {n}: age {age!r} is not a whole number")
        features = [f for f in _split(row.get("feature"), ";") if f]
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise UsageError(f"{path}: line {n}: unknown feature {unknown[0]!r} (known: {', '.join(FEATURES)})")
        fields: dict[str, Any] = {
            "name": row["name"].strip(), "id": row["id"].strip(), "gender": (row.get("gender") or "").strip(),
            "age": int(age) if age else None, "traits": _split(row.get("traits")), "career": (row.get("status") or "").strip(),
            "interests": _split(row.get("interest")), "features": features,
        }
        if row.get("observations"):
            fields["memories"] = [s.strip() + "." for s in row["observations"].split(".") if s.strip()]
        profiles.append(fields)
    return profiles


def read_friends(path: Path, profiles: list[dict[str, Any]], relations: list[str] | None) -> dict[str, list[str]]:
    """profile id -> ids of the profiles connected to it (both directions), in file order.
    Endpoints are profile ids (``user_1000.csv``) or names (the demo ``user.csv``)."""
    rows = _read_csv(path, ("user_1", "user_2", "relationship"))
    ids = {p["id"] for p in profiles}
    by_name: dict[str, str] = {}
    for p in profiles:
        by_name.setdefault(p["name"], p["id"])
    friends: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        kind = (row["relationship"] or "").strip()
        if relations is not None and kind not in relations:
            continue
        a, b = (row[k].strip() if row[k].strip() in ids else by_name.get(row[k].strip()) for k in ("user_1", "user_2"))
        if a is not None and b is not None and a != b:
            for x, y in ((a, b), (b, a)):
                if y not in friends[x]:
                    friends[x].append(y)
    return dict(friends)


class CsvProfiles:
    def __init__(self, config: RecAgentProfilesConfig, base_dir: str):
        if not config.path:
            raise UsageError("personas.path: recagent_csv needs the profile CSV")
        self.profiles = read_profiles(_resolve(config.path, base_dir))
        friends = read_friends(_resolve(config.relationships, base_dir), self.profiles, config.relations) if config.relationships else {}
        names = {p["id"]: p["name"] for p in self.profiles}
        for profile in self.profiles:
            profile["friend_ids"] = friends.get(profile["id"], [])
            profile["friends"] = [names[i] for i in profile["friend_ids"]]

    def load(self, count: int, rng: Any) -> list[Persona]:
        return cycle_personas([profile_persona(p) for p in self.profiles], count)

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


class MovieLensProfiles:
    def __init__(self, config: RecAgentProfilesConfig, base_dir: str):
        if not config.path:
            raise UsageError("personas.path: movielens_history needs a MovieLens folder")
        self.config = config
        self.data = load_movielens_data(_resolve(config.path, base_dir))
        self.items = {item.id: item for item in self.data.items}
        self.histories = self.data.histories()
        missing = [u for u in config.users or () if str(u) not in self.histories]
        if missing:
            raise UsageError(f"personas.users: MovieLens user {missing[0]} has no ratings")

    def profile(self, user: str) -> dict[str, Any]:
        history = self.histories[user]
        cut = max(1, round(len(history) * self.config.history_fraction))
        earlier = [(self.items[r.item], r.rating, r.timestamp) for r in history[:cut]]
        return history_profile(user, earlier, [r.item for r in history[cut:]], self.config, self.data.users.get(user, {}))

    def load(self, count: int, rng: Any) -> list[Persona]:
        users = [str(u) for u in self.config.users] if self.config.users else sorted(self.histories, key=_numeric)[:count]
        return cycle_personas([profile_persona(self.profile(u)) for u in users], count)

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def history_profile(user: str, earlier: list[tuple[Any, float | None, int]], later: list[str], config: RecAgentProfilesConfig,
                    demographics: dict[str, Any] | None = None) -> dict[str, Any]:
    """The profile fields of a user known by earlier ratings (``(item, rating 1-5, time)``, oldest
    first): interests, favourites, history; ``later`` item ids are held out (``future_items``)."""
    genres: Counter = Counter()
    for item, rating, _ in earlier:
        if rating is None or rating >= config.min_rating:
            genres.update(item.genres)
    interests = [f"{g.lower()} movies" for g, _ in sorted(genres.items(), key=lambda kv: (-kv[1], kv[0]))[: config.top_genres]]
    rated = [(item, rating, time) for item, rating, time in earlier if rating is not None]
    best = sorted(rated, key=lambda r: (-r[1], -r[2]))[: config.favourites]
    demographics = demographics or {}
    if config.history_limit is not None:
        earlier, later = earlier[-config.history_limit:], later[: config.history_limit]
    return {
        "name": f"MovieLens user {user}", "id": user, "gender": demographics.get("gender", ""),
        "age": demographics.get("age"), "age_group": demographics.get("age_group", ""),
        "traits": [], "career": demographics.get("occupation", ""),
        "interests": interests, "favourites": [item.title for item, _, _ in best], "features": [], "friends": [],
        "history": [{"id": item.id, "title": item.title, "rating": rating, **({"timestamp": int(time)} if time else {})}
                    for item, rating, time in earlier],
        "future_items": list(later),
    }


def _numeric(value: str) -> tuple[int, str]:
    return (int(value), value) if value.isdigit() else (1 << 62, value)


GENERATED_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "gender": {"type": "string"}, "age": {"type": "integer"},
                   "traits": {"type": "array"}, "career": {"type": "string"}, "interests": {"type": "array"},
                   "features": {"type": "array"}},
    "required": ["name", "gender", "age", "traits", "career", "interests", "features"],
}


def check_generated(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("not an object")
    name = str(value["name"]).strip()
    age = int(value["age"])
    features = [str(f).strip().capitalize() for f in value["features"]]
    if not name or not 10 <= age <= 100 or any(f not in FEATURES for f in features):
        raise ValueError("name empty, age outside 10-100 or unknown feature")
    return {"name": name, "gender": str(value["gender"]).strip(), "age": age, "traits": [str(t) for t in value["traits"]],
            "career": str(value["career"]).strip(), "interests": [str(i) for i in value["interests"]], "features": features}


class GeneratedProfiles:
    """The LLM continues a profile table from seed rows (asked once per new profile)."""

    def __init__(self, config: RecAgentProfilesConfig, ctx: BuildContext):
        if not config.path:
            raise UsageError("personas.path: recagent_generated needs a profile CSV of seeds")
        self.seeds = read_profiles(_resolve(config.path, ctx.base_dir))
        self.prompt = load_prompts("policy", {"generate_profile": frozenset({"seeds", "taken"})}, config.prompts_file,
                                   ctx.base_dir)["generate_profile"]
        self.ctx = ctx

    async def load(self, count: int, rng: Any) -> list[Persona]:
        llm = self.ctx.services.llm if self.ctx.services is not None else None
        if llm is None:
            raise UsageError("personas: recagent_generated needs an LLM: add an [llm] table")
        table = "\n".join(f"{p['name']} | {p['gender']} | {p['age']} | {', '.join(p['traits'])} | {p['career']} | "
                          f"{', '.join(p['interests'])} | {';'.join(p['features'])}" for p in self.seeds)
        made: list[dict[str, Any]] = []
        for i in range(count):
            taken = ", ".join([p["name"] for p in self.seeds] + [p["name"] for p in made]) or "none"
            profile = await llm.json(fill(self.prompt, seeds=table, taken=taken), GENERATED_SCHEMA,
                                     purpose="recagent.profile", default=None, validate=check_generated)
            if profile is None or profile["name"] in {p["name"] for p in made}:
                seed = self.seeds[i % len(self.seeds)]
                profile = {**seed, "name": f"{seed['name']} #{i + 2}"}
            made.append({**profile, "id": f"g{i + 1}", "friends": []})
        return [profile_persona(p) for p in made]

    def get_state(self) -> dict[str, Any]:
        return {}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


def _config(config: RecAgentProfilesConfig | None) -> RecAgentProfilesConfig:
    return config or RecAgentProfilesConfig()


@hookimpl
def townsquare_register_persona_sources():
    return [
        PersonaSourceSpec("recagent_csv", lambda c, ctx: CsvProfiles(_config(c), ctx.base_dir), config_model=RecAgentProfilesConfig,
                          description="RecAgent profile CSV with the relationship file as friend graph"),
        PersonaSourceSpec("movielens_history", lambda c, ctx: MovieLensProfiles(_config(c), ctx.base_dir), config_model=RecAgentProfilesConfig,
                          description="profiles aligned with MovieLens users' earlier ratings"),
        PersonaSourceSpec("recagent_generated", lambda c, ctx: GeneratedProfiles(_config(c), ctx), config_model=RecAgentProfilesConfig,
                          needs_llm=True, description="the LLM continues a profile table from seed profiles"),
    ]
