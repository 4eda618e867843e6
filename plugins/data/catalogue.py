"""The datasets ``townsquare data`` knows: one TOML file per dataset in ``catalogue/``.

An entry says what the dataset is (``title``), where it comes from (``source``), its licence and
what a user must accept (``terms``, shown before a download and asked for), where a copy keeps
its files (``roots``: folders tried in turn under ``--from PATH``), and one or more
``[[releases]]``. The first release that can be downloaded is what ``fetch NAME`` gets; ``fetch
NAME --from PATH`` accepts any release whose checks pass. A release is verified one of two ways:

* ``archive`` (``url``, ``sha256``, ``size``, ``format`` zip / tar / file, ``root``: the folder,
  or for ``file`` the file name, the dataset is): one SHA-256 for the whole download, then the
  ``required`` files must be in ``root``;
* ``files``: a per-file manifest (``path``, ``sha256``, ``size``; ``upstream``: where the file
  sits under ``url_base`` when that differs from ``path``). A file with ``derive`` is made from
  ``inputs`` (downloaded or found in a copy, verified, not installed) by a recipe of
  :mod:`.derive` and must come out with its recorded SHA-256.

A dataset whose publisher records no checksum and serves no stable URL (a trace a user
downloads by hand: Twitter15/16, MADOC) has a ``layout`` release instead: the file patterns
its copy must have (``tree/*.txt``: at least one match each), and ``download``, where a person
gets it. Such a release is import only (``--from``, :mod:`.layout_copy`); the marker says so
and records every file's SHA-256, so ``verify`` still finds a changed file later.

Every checksum is recorded from a published record or computed from a copy whose bytes are
the published file's; ``checksums`` says which (docs/data.md lists them all).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from townsquare.api import UsageError
from townsquare.lib.data_paths import data_home

HERE = Path(__file__).resolve().parent / "catalogue"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class FileEntry:
    """One file of a manifest (or an input a file is derived from)."""

    path: str
    sha256: str
    size: int
    upstream: str | None = None
    url: str | None = None
    derive: str | None = None
    input: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def download_url(self, url_base: str | None) -> str | None:
        if self.url:
            return self.url
        return url_base + quote(self.upstream or self.path) if url_base else None


@dataclass(frozen=True)
class Archive:
    url: str
    sha256: str
    size: int
    format: str  # zip | tar | file
    root: str


@dataclass(frozen=True)
class Release:
    version: str
    checksums: str
    archive: Archive | None = None
    url_base: str | None = None
    files: tuple[FileEntry, ...] = ()
    inputs: tuple[FileEntry, ...] = ()
    required: tuple[str, ...] = ()
    #: a release known by its layout only: file patterns, and where a person downloads it
    layout: tuple[str, ...] = ()
    download: str | None = None

    @property
    def downloadable(self) -> bool:
        if self.layout:
            return False
        if self.archive is not None:
            return True
        wanted = [*self.inputs, *(f for f in self.files if f.derive is None)]
        return bool(self.files) and all(f.download_url(self.url_base) for f in wanted)

    @property
    def verified_by(self) -> str:
        if self.layout:
            return f"no checksum published: checked by its layout ({', '.join(self.layout)}), every file's SHA-256 recorded"
        if self.archive is not None:
            return f"from {self.archive.url.rsplit('/', 1)[-1]}, checked by its SHA-256"
        return "each file checked by its SHA-256"

    @property
    def fingerprint(self) -> str:
        """One SHA-256 for the release: the archive's, or the manifest's (sha256 of its
        ``"SHA256  PATH"`` lines, sorted by path, as ``sha256sum`` prints them)."""
        if self.archive is not None:
            return self.archive.sha256
        return manifest_digest({f.path: f.sha256 for f in self.files})

    @property
    def size(self) -> int:
        if self.archive is not None:
            return self.archive.size
        return sum(f.size for f in self.files)

    def download_size(self) -> int:
        if self.archive is not None:
            return self.archive.size
        return sum(f.size for f in (*self.inputs, *self.files) if f.derive is None)


@dataclass(frozen=True)
class Dataset:
    name: str
    title: str
    source: str
    licence: str
    licence_url: str
    releases: tuple[Release, ...]
    terms: str = ""
    roots: tuple[str, ...] = ("",)

    def download_release(self) -> Release | None:
        return next((r for r in self.releases if r.downloadable), None)


def manifest_digest(files: dict[str, str]) -> str:
    lines = "".join(f"{sha}  {path}\n" for path, sha in sorted(files.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def _file(raw: dict[str, Any]) -> FileEntry:
    known = {"path", "sha256", "size", "upstream", "url", "derive", "input"}
    return FileEntry(path=raw["path"], sha256=raw["sha256"].lower(), size=int(raw["size"]), upstream=raw.get("upstream"),
                     url=raw.get("url"), derive=raw.get("derive"), input=raw.get("input"),
                     options={k: v for k, v in raw.items() if k not in known})


def _release(raw: dict[str, Any]) -> Release:
    archive = raw.get("archive")
    return Release(
        version=raw["version"], checksums=raw["checksums"],
        archive=Archive(archive["url"], archive["sha256"].lower(), int(archive["size"]), archive["format"], archive["root"]) if archive else None,
        url_base=raw.get("url_base"), files=tuple(_file(f) for f in raw.get("files", [])),
        inputs=tuple(_file(f) for f in raw.get("inputs", [])), required=tuple(raw.get("required", [])),
        layout=tuple(raw.get("layout", [])), download=raw.get("download"),
    )


def read_entry(path: Path) -> Dataset:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    return Dataset(name=path.stem, title=raw["title"], source=raw["source"], licence=raw["licence"],
                   licence_url=raw.get("licence_url", raw["source"]), terms=raw.get("terms", ""),
                   roots=tuple(raw.get("roots", [""])), releases=tuple(_release(r) for r in raw["releases"]))


#: the folder under the data home where a user adds entries of their own (same format)
USER_FOLDER = "catalogue"


@lru_cache(maxsize=8)
def _read_folder(folder: Path, stamp: tuple[tuple[str, float], ...]) -> dict[str, Dataset]:
    entries = {}
    for name, _ in stamp:
        path = folder / name
        if path.stem == USER_FOLDER or not NAME_PATTERN.match(path.stem):
            raise UsageError(f"{path}: {path.stem!r} cannot name a dataset (lower-case letters, digits, '.', '_', '-'; not {USER_FOLDER!r})")
        try:
            entries[path.stem] = read_entry(path)
        except (KeyError, TypeError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
            raise UsageError(f"{path}: not a dataset entry ({type(exc).__name__}: {exc})") from None
    return entries


def _entries_in(folder: Path) -> dict[str, Dataset]:
    if not folder.is_dir():
        return {}
    stamp = tuple((p.name, p.stat().st_mtime) for p in sorted(folder.glob("*.toml"), key=lambda p: p.stem))
    return _read_folder(folder, stamp)


def catalogue() -> dict[str, Dataset]:
    """Every dataset entry by name: the built-in ones, then the user's own in
    ``<data home>/catalogue/`` (which may not reuse a built-in name)."""
    built_in = _entries_in(HERE)
    own = _entries_in(data_home() / USER_FOLDER)
    clash = sorted(set(built_in) & set(own))
    if clash:
        raise UsageError(f"{data_home() / USER_FOLDER / (clash[0] + '.toml')}: {clash[0]!r} is a built-in dataset; give yours another name")
    return {**built_in, **own}


def dataset(name: str) -> Dataset:
    known = catalogue()
    if name not in known:
        raise UsageError(f"no dataset named {name!r} (datasets: {', '.join(known)}; see: townsquare data list)")
    return known[name]
