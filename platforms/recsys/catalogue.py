"""The recommender-system platform's item catalogue and its loaders. Not a plugin.

- ``movielens``: a MovieLens folder in any of its layouts (ml-latest-small, ml-100k, ml-1m;
  see :mod:`.movielens`); with its ratings file beside it, each movie's rating count becomes
  its popularity prior.
- ``recagent``: RecAgent's ``item.csv`` (id, title, genre separated by ``|``, description).
- ``synthetic``: a small catalogue the project writes itself, for tests and offline demos.

Bad input stops with one line naming the file and the field.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from townsquare.api import UsageError
from townsquare.lib.files import read_user_csv
from townsquare.lib.items import Item
from townsquare.lib.movielens import genres_of, load_movielens_data

#: words that follow a category in a profile's interests ("sci-fi movies")
_CATEGORY_TAIL = re.compile(r"\s+(movies?|films?|videos?|shows?)$")
SYNTHETIC_GENRES = ("Action", "Comedy", "Drama", "Sci-Fi", "Romance", "Thriller", "Animation", "Documentary")
_SYNTHETIC_WORDS = ("Silent", "Harbor", "Crimson", "Orbit", "Garden", "Echo", "Winter", "Signal", "Paper", "Comet")


def category_key(text: str) -> str:
    """A category as compared: lower case, no trailing "movies", hyphens and spaces alike."""
    text = _CATEGORY_TAIL.sub("", text.strip().lower())
    return text.replace("-", "").replace(" ", "").replace("'", "")


class Catalogue:
    """Items in catalogue order, with search by keyword or category."""

    def __init__(self, items: Sequence[Item], origin: str = "catalogue"):
        if not items:
            raise UsageError(f"{origin}: the catalogue has no items")
        self.items = list(items)
        self.origin = origin
        self.by_id = {item.id: item for item in self.items}
        self.position = {item.id: i for i, item in enumerate(self.items)}
        self.genres = sorted({g for item in self.items for g in item.genres})
        self._genre_keys = {category_key(g): g for g in self.genres}

    def __len__(self) -> int:
        return len(self.items)

    def get(self, item_id: str) -> Item | None:
        return self.by_id.get(item_id)

    def genre_of(self, category: str) -> str | None:
        """The catalogue genre a category names ("sci-fi movies" -> "Sci-Fi"), or None."""
        return self._genre_keys.get(category_key(category))

    def search(self, query: str) -> list[Item]:
        """Items of the category ``query`` names, else items whose title contains it (else
        every word of it), most popular first, then catalogue order."""
        genre = self.genre_of(query)
        if genre is not None:
            found = [item for item in self.items if genre in item.genres]
        else:
            needle = query.strip().strip("<>\"'").lower()
            found = [item for item in self.items if needle and needle in item.title.lower()]
            if not found:
                words = [w for w in re.findall(r"\w+", needle) if len(w) > 2]
                found = [item for item in self.items if words and all(w in item.title.lower() for w in words)]
        return sorted(found, key=lambda item: (-item.prior_count, self.position[item.id]))

    def find_title(self, text: str) -> Item | None:
        """The item whose title ``text`` names (exact, case-insensitive, year optional)."""
        wanted = _plain_title(text)
        for item in self.items:
            if _plain_title(item.title) == wanted:
                return item
        return None


def _plain_title(text: str) -> str:
    text = text.strip().strip("<>\"'").lower()
    return re.sub(r"\s*\(\d{4}\)\s*$", "", text)


def _rows(path: Path, required: Iterable[str]) -> list[dict[str, str]]:
    return read_user_csv(path, required, "catalogue file")


def load_movielens(folder: str | Path, max_items: int | None = None) -> Catalogue:
    """The movies of a MovieLens folder (any layout); its ratings, when present, give priors."""
    data = load_movielens_data(folder)
    counts = data.rating_counts()
    items = [replace(item, prior_count=counts.get(item.id, 0)) for item in data.items]
    return Catalogue(items[:max_items] if max_items else items, str(folder))


def load_recagent_items(path: str | Path, max_items: int | None = None) -> Catalogue:
    """RecAgent's ``item.csv``: id, title, genre, description."""
    path = Path(path)
    items = [Item(id=row["id"], title=row["title"].strip(), genres=genres_of(row["genre"] or ""),
                  description=" ".join((row.get("description") or "").split()))
             for row in _rows(path, ("id", "title", "genre"))]
    return Catalogue(items[:max_items] if max_items else items, str(path))


def synthetic_catalogue(count: int = 40) -> Catalogue:
    """``count`` made-up movies, genres in rotation (one or two each), popularity decreasing."""
    items = []
    for i in range(count):
        first = SYNTHETIC_GENRES[i % len(SYNTHETIC_GENRES)]
        second = SYNTHETIC_GENRES[(i * 3 + 1) % len(SYNTHETIC_GENRES)]
        genres = (first,) if i % 3 == 0 or second == first else (first, second)
        title = f"{_SYNTHETIC_WORDS[i % len(_SYNTHETIC_WORDS)]} {_SYNTHETIC_WORDS[(i // len(_SYNTHETIC_WORDS) + 3) % len(_SYNTHETIC_WORDS)]} {i + 1}"
        kinds = " and ".join(g.lower() for g in genres)
        description = f"{'An' if kinds[0] in 'aeiou' else 'A'} {kinds} film."
        items.append(Item(id=f"m{i + 1}", title=title, genres=genres, description=description, prior_count=count - i))
    return Catalogue(items, "synthetic catalogue")


class RecsysConfig(BaseModel):
    """``[platform]`` settings of ``recsys``."""

    model_config = ConfigDict(extra="forbid")

    catalogue: Literal["movielens", "recagent", "synthetic"] = "synthetic"
    path: str | None = Field(None, description="movielens: a MovieLens folder (ml-latest-small, ml-100k, ml-1m); recagent: item.csv")
    max_items: int | None = Field(None, gt=0, description="keep the first N items (small runs)")
    synthetic_items: int = Field(40, gt=0)
    page_size: int = Field(5, gt=0, description="items per page (5 in the paper)")
    reshow: bool = Field(False, description="false: an item once shown to a user (page or search) is never recommended to them again, as in the reference code")
    exclude_seen: bool = Field(True, description="never recommend an item the user watched in the run or rated before it (persona history)")
    history_in_log: bool = Field(True, description="personas' earlier ratings (field history) enter the interaction log the recommender learns from")


def load_catalogue(config: RecsysConfig, base_dir: str = ".") -> Catalogue:
    if config.catalogue == "synthetic":
        return synthetic_catalogue(config.synthetic_items)
    if not config.path:
        raise UsageError(f"platform.path: catalogue {config.catalogue!r} needs a path")
    path = Path(config.path) if Path(config.path).is_absolute() else Path(base_dir) / config.path
    if config.catalogue == "movielens":
        return load_movielens(path, config.max_items)
    return load_recagent_items(path, config.max_items)
