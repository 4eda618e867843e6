"""MovieLens in its three common layouts, read into one shape: the item catalogue and the
ratings that the recommender-system platform, its persona sources, its studies and the
recommender evaluation all read (exported by :mod:`townsquare.api`).

- ``ml-latest-small`` (and the other "latest" releases): ``movies.csv`` (movieId, title, genres
  separated by ``|``), ``ratings.csv`` (userId, movieId, rating 0.5-5, timestamp); no
  demographics.
- ``ml-100k``: ``u.item`` (``|``-separated, Latin-1: id, title, release date, video date, IMDb
  URL, then 19 genre flags in the order of ``u.genre``), ``u.data`` (tab-separated: user, item,
  rating 1-5, timestamp), ``u.user`` (``|``: id, age, gender, occupation, zip code).
- ``ml-1m``: ``movies.dat`` (``::``-separated, Latin-1: id, title, genres separated by ``|``),
  ``ratings.dat`` (user, movie, rating 1-5, timestamp), ``users.dat`` (id, gender, age group,
  occupation code, zip code; the codes as the dataset's README lists them).
- ``recbole``: RecBole's atomic files, as the ``recbole`` wheel carries ML-100K under
  ``recbole/dataset_example/ml-100k/``: ``NAME.inter``, ``NAME.item`` and ``NAME.user``,
  tab-separated UTF-8 with a header of ``field:type`` names (``user_id``, ``item_id``,
  ``rating``, ``timestamp``; ``movie_title``, ``release_year``, ``class`` with the genres
  separated by blanks; ``age``, ``gender``, ``occupation``). A title gets its release year
  back in brackets, as the other layouts write it ("Toy Story (1995)").

:func:`load_movielens_data` tells the layouts apart by their files. Bad input stops with one
line naming the file and the line.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from townsquare.errors import UsageError
from .files import read_user_csv
from .items import Item

NO_GENRE = "(no genres listed)"
#: ml-100k's genre flags, in the order of its ``u.genre`` file
GENRES_100K = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
               "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
#: ml-1m's occupation codes (its README)
OCCUPATIONS_1M = ("other", "academic/educator", "artist", "clerical/admin", "college/grad student", "customer service",
                  "doctor/health care", "executive/managerial", "farmer", "homemaker", "K-12 student", "lawyer",
                  "programmer", "retired", "sales/marketing", "scientist", "self-employed", "technician/engineer",
                  "tradesman/craftsman", "unemployed", "writer")
#: ml-1m's age groups: the code is the group's lowest age ("1" is "under 18")
AGE_GROUPS_1M = {"1": "under 18", "18": "18-24", "25": "25-34", "35": "35-44", "45": "45-49", "50": "50-55", "56": "56+"}


@dataclass(frozen=True)
class Rating:
    user: str
    item: str
    rating: float
    timestamp: int


@dataclass
class MovieLens:
    """A MovieLens folder read into items, ratings (in file order) and user demographics."""

    layout: str
    folder: Path
    items: list[Item]
    ratings: list[Rating] = field(default_factory=list)
    #: user id -> {"gender", "age", "age_group", "occupation"} where the layout has them
    users: dict[str, dict[str, object]] = field(default_factory=dict)

    def histories(self) -> dict[str, list[Rating]]:
        """Each user's ratings of catalogue items, ordered by time (then file order)."""
        known = {item.id for item in self.items}
        out: dict[str, list[Rating]] = defaultdict(list)
        for n, rating in sorted(enumerate(self.ratings), key=lambda p: (p[1].user, p[1].timestamp, p[0])):
            if rating.item in known:
                out[rating.user].append(rating)
        return dict(out)

    def rating_counts(self) -> Counter:
        return Counter(r.item for r in self.ratings)


LAYOUTS = {"ml-latest-small": ("movies.csv", "ratings.csv"), "ml-100k": ("u.item", "u.data"), "ml-1m": ("movies.dat", "ratings.dat")}


def movielens_layout(folder: str | Path) -> str:
    """Which MovieLens layout ``folder`` holds (by its item file); a clear error if none."""
    folder = Path(folder)
    for name, (items, _) in LAYOUTS.items():
        if (folder / items).is_file():
            return name
    if _atomic_stem(folder) is not None:
        return "recbole"
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such MovieLens folder")
    raise UsageError(f"{folder}: not a MovieLens folder (expected movies.csv, u.item, movies.dat or RecBole's NAME.item)")


def load_movielens_data(folder: str | Path, ratings: bool = True) -> MovieLens:
    """The items (and, with ``ratings``, the ratings and users) of a MovieLens folder of any layout."""
    folder = Path(folder)
    layout = movielens_layout(folder)
    if layout == "ml-latest-small":
        data = MovieLens(layout, folder, _latest_items(folder / "movies.csv"))
        if ratings and (folder / "ratings.csv").is_file():
            data.ratings = list(_latest_ratings(folder / "ratings.csv"))
    elif layout == "ml-100k":
        data = MovieLens(layout, folder, _items_100k(folder / "u.item"))
        if ratings and (folder / "u.data").is_file():
            data.ratings = list(_ratings(folder / "u.data", "\t"))
            if (folder / "u.user").is_file():
                data.users = _users_100k(folder / "u.user")
    elif layout == "ml-1m":
        data = MovieLens(layout, folder, _items_1m(folder / "movies.dat"))
        if ratings and (folder / "ratings.dat").is_file():
            data.ratings = list(_ratings(folder / "ratings.dat", "::"))
            if (folder / "users.dat").is_file():
                data.users = _users_1m(folder / "users.dat")
    else:
        stem = folder / str(_atomic_stem(folder))
        data = MovieLens(layout, folder, _atomic_items(stem.with_suffix(".item")))
        if ratings and stem.with_suffix(".inter").is_file():
            data.ratings = list(_atomic_ratings(stem.with_suffix(".inter")))
            if stem.with_suffix(".user").is_file():
                data.users = _atomic_users(stem.with_suffix(".user"))
    if not data.items:
        raise UsageError(f"{folder}: the catalogue has no items")
    return data


def genres_of(value: str) -> tuple[str, ...]:
    return tuple(g.strip() for g in value.split("|") if g.strip() and g.strip() != NO_GENRE)


# ---------------------------------------------------------------------- the "latest" CSV layout


def _latest_items(path: Path) -> list[Item]:
    items = []
    for n, row in enumerate(read_user_csv(path, ("movieId", "title", "genres"), "catalogue file"), start=2):
        if not row["movieId"] or not (row["title"] or "").strip():
            raise UsageError(f"{path}: line {n}: empty movieId or title")
        items.append(Item(id=row["movieId"].strip(), title=row["title"].strip(), genres=genres_of(row["genres"] or "")))
    return items


def _latest_ratings(path: Path) -> Iterator[Rating]:
    for n, row in enumerate(read_user_csv(path, ("userId", "movieId", "rating"), "ratings file"), start=2):
        yield _rating(path, n, row["userId"], row["movieId"], row["rating"], row.get("timestamp") or "0")


# ---------------------------------------------------------------------- ml-100k and ml-1m


def _lines(path: Path, encoding: str = "latin-1") -> Iterator[tuple[int, str]]:
    """Non-blank lines of a text file (Latin-1, as GroupLens writes them), numbered from 1."""
    try:
        with open(path, encoding=encoding) as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    yield n, line.rstrip("\r\n")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such MovieLens file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not {encoding} text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


def _fields(path: Path, n: int, line: str, sep: str, count: int) -> list[str]:
    parts = line.split(sep)
    if len(parts) < count:
        raise UsageError(f"{path}: line {n}: expected {count} fields separated by {sep!r}, found {len(parts)}")
    return parts


def _items_100k(path: Path) -> list[Item]:
    items = []
    for n, line in _lines(path):
        parts = _fields(path, n, line, "|", 5 + len(GENRES_100K))
        flags = parts[5:5 + len(GENRES_100K)]
        if any(f not in ("0", "1") for f in flags):
            raise UsageError(f"{path}: line {n}: genre flags must be 0 or 1")
        genres = tuple(g for g, f in zip(GENRES_100K, flags) if f == "1" and g != "unknown")
        if not parts[0].strip() or not parts[1].strip():
            raise UsageError(f"{path}: line {n}: empty movie id or title")
        items.append(Item(id=parts[0].strip(), title=parts[1].strip(), genres=genres))
    return items


def _items_1m(path: Path) -> list[Item]:
    items = []
    for n, line in _lines(path):
        movie, title, genres = _fields(path, n, line, "::", 3)[:3]
        if not movie.strip() or not title.strip():
            raise UsageError(f"{path}: line {n}: empty movie id or title")
        items.append(Item(id=movie.strip(), title=title.strip(), genres=genres_of(genres)))
    return items


def _ratings(path: Path, sep: str) -> Iterator[Rating]:
    for n, line in _lines(path):
        user, item, rating, timestamp = _fields(path, n, line.strip() if sep == "\t" else line, sep, 4)[:4]
        yield _rating(path, n, user, item, rating, timestamp)


def _rating(path: Path, n: int, user: str, item: str, rating: str, timestamp: str) -> Rating:
    try:
        return Rating(user.strip(), item.strip(), float(rating), int(float(timestamp)))
    except ValueError:
        raise UsageError(f"{path}: line {n}: rating and timestamp must be numbers") from None


def _users_100k(path: Path) -> dict[str, dict[str, object]]:
    users = {}
    for n, line in _lines(path):
        user, age, gender, occupation = _fields(path, n, line, "|", 5)[:4]
        if not age.strip().isdigit():
            raise UsageError(f"{path}: line {n}: age {age!r} is not a whole number")
        users[user.strip()] = {"age": int(age), "gender": _gender(gender), "occupation": occupation.strip()}
    return users


def _users_1m(path: Path) -> dict[str, dict[str, object]]:
    users = {}
    for n, line in _lines(path):
        user, gender, age, occupation = _fields(path, n, line, "::", 5)[:4]
        if age.strip() not in AGE_GROUPS_1M or not occupation.strip().isdigit() or int(occupation) >= len(OCCUPATIONS_1M):
            raise UsageError(f"{path}: line {n}: unknown age group {age!r} or occupation code {occupation!r}")
        users[user.strip()] = {"age_group": AGE_GROUPS_1M[age.strip()], "gender": _gender(gender),
                               "occupation": OCCUPATIONS_1M[int(occupation)]}
    return users


# ---------------------------------------------------------------------- RecBole's atomic files


def _atomic_stem(folder: Path) -> str | None:
    """NAME when ``folder`` holds exactly one ``NAME.item`` (RecBole's atomic files), else None."""
    found = sorted(folder.glob("*.item")) if folder.is_dir() else []
    return found[0].stem if len(found) == 1 else None


def _atomic_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows of an atomic file as {field: value}, by the names of its ``field:type`` header."""
    lines = _lines(path, "utf-8")
    header = next(lines, None)
    if header is None:
        raise UsageError(f"{path}: empty RecBole atomic file")
    names = [column.split(":", 1)[0].strip() for column in header[1].split("\t")]
    missing = [r for r in required if r not in names]
    if missing:
        raise UsageError(f"{path}: line 1: no {missing[0]!r} column (the header names {', '.join(names)})")
    for n, line in lines:
        values = line.split("\t")
        if len(values) != len(names):
            raise UsageError(f"{path}: line {n}: expected {len(names)} tab-separated fields, found {len(values)}")
        yield n, dict(zip(names, values))


def _atomic_items(path: Path) -> list[Item]:
    items = []
    for n, row in _atomic_rows(path, ("item_id",)):
        title = (row.get("movie_title") or row.get("title") or "").strip()
        if not row["item_id"].strip() or not title:
            raise UsageError(f"{path}: line {n}: empty item id or title")
        year = (row.get("release_year") or "").strip()
        genres = tuple(g for g in (row.get("class") or row.get("genre") or "").split() if g != "unknown")
        items.append(Item(id=row["item_id"].strip(), title=f"{title} ({year})" if year else title, genres=genres))
    return items


def _atomic_ratings(path: Path) -> Iterator[Rating]:
    for n, row in _atomic_rows(path, ("user_id", "item_id", "rating", "timestamp")):
        yield _rating(path, n, row["user_id"], row["item_id"], row["rating"], row["timestamp"])


def _atomic_users(path: Path) -> dict[str, dict[str, object]]:
    users = {}
    for n, row in _atomic_rows(path, ("user_id", "age", "gender", "occupation")):
        if not row["age"].strip().isdigit():
            raise UsageError(f"{path}: line {n}: age {row['age']!r} is not a whole number")
        users[row["user_id"].strip()] = {"age": int(row["age"]), "gender": _gender(row["gender"]), "occupation": row["occupation"].strip()}
    return users


def _gender(code: str) -> str:
    return {"M": "male", "F": "female"}.get(code.strip().upper(), code.strip())
