"""``townsquare data fetch NAME``: a release from its pinned URLs into a staging folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from .catalogue import Dataset, Release
from .checksums import DataError
from .http_download import download
from .installer import drop_empty_partial, partial_dir
from .release_files import input_of, install_archive, write_derived


def fetch_release(dataset: Dataset, release: Release, folder: Path, progress: Callable[[int], None]) -> str:
    """Download ``release`` of ``dataset`` and lay it out in ``folder``; returns where from.
    A failure keeps what was downloaded (the next fetch resumes it), nothing else."""
    try:
        return _fetch(dataset, release, folder, progress)
    finally:
        drop_empty_partial(dataset.name)


def _fetch(dataset: Dataset, release: Release, folder: Path, progress: Callable[[int], None]) -> str:
    partial = partial_dir(dataset.name)
    if release.archive is not None:
        spec = release.archive
        part = download(spec.url, partial / f"{spec.sha256}.part", spec.sha256, spec.size, progress)
        install_archive(dataset.name, release, part, folder)
        return spec.url
    for entry in release.files:
        if entry.derive is not None:
            continue
        url = entry.download_url(release.url_base)
        if url is None:
            raise DataError(f"{dataset.name}: {entry.path} has no URL to download it from")
        part = download(url, partial / f"{entry.sha256}.part", entry.sha256, entry.size, progress)
        target = folder / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
    for entry in release.files:
        if entry.derive is None:
            continue
        source = input_of(release, entry)
        url = source.download_url(release.url_base)
        if url is None:
            raise DataError(f"{dataset.name}: input {source.path} has no URL to download it from")
        part = download(url, partial / f"{source.sha256}.part", source.sha256, source.size, progress)
        write_derived(entry, part, folder, url)
    return release.url_base or release.files[0].download_url(None) or dataset.source
