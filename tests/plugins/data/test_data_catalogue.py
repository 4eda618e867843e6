"""The built-in dataset catalogue: every entry well-formed and listed in docs/data.md; each
folder of ../shared/data accepted as it is; the paper examples run from installed data alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import ROOT, SHARED_DATA, run_cli as townsquare

SHARED = {
    "smallville-3": "generative_agents", "smallville-n25": "generative_agents", "recagent-profiles": "yulan-rec",
    "movielens-latest-small": "movielens", "personagym": "personagym", "some-ground-truth": "some",
    "hotpotqa-dev-simplified": "hotpotqa", "hotpotqa-dev-distractor-sample": "hotpotqa", "synthetic-persona-chat": "personachat",
}
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="../shared/data is absent")


@pytest.fixture
def home(data_home: Path) -> Path:
    return data_home


def test_every_entry_is_pinned_and_checksummed(home):
    from townsquare.plugins.data.catalogue import catalogue

    entries = catalogue()
    assert {"smallville-3", "smallville-n25", "recagent-profiles", "movielens-latest-small", "movielens-100k", "movielens-1m",
            "hotpotqa-dev-distractor", "personagym", "some-ground-truth"} <= set(entries)
    hexdigest = re.compile(r"^[0-9a-f]{64}$")
    for name, entry in entries.items():
        assert entry.title and entry.source.startswith("https://") and entry.licence, name
        by_hand = [r for r in entry.releases if r.layout]  # no checksum published: downloaded by hand, checked by layout
        assert entry.download_release() is not None or len(by_hand) == len(entry.releases), f"{name}: nothing to download"
        for release in by_hand:
            assert release.download.startswith("https://") and "none" in release.checksums and entry.terms, name
        for release in (r for r in entry.releases if not r.layout):
            assert release.checksums and (release.archive or release.files), name
            for item in [*release.files, *release.inputs, *([release.archive] if release.archive else [])]:
                assert hexdigest.match(item.sha256) and item.size > 0, (name, item)
            if release.url_base:  # pinned to a commit, never a branch
                assert re.search(r"/[0-9a-f]{40}/", release.url_base), name
            for entry_file in release.files:
                if entry_file.derive:
                    assert any(i.path == entry_file.input for i in release.inputs), (name, entry_file.path)
        if "movielens" in name:
            assert "GroupLens" in entry.terms and "research" in entry.terms


def test_docs_data_lists_every_pinned_url_and_checksum(home):
    """docs/data.md's table row by row against the catalogue: the SHA-256 (of the archive, the
    one file, or the manifest), the size and the pinned URL of every release."""
    from townsquare.plugins.data.catalogue import catalogue

    page = (ROOT / "docs" / "data.md").read_text()
    assert re.search(r"Recorded on \d{4}-\d{2}-\d{2}", page)
    rows = [line for line in page.splitlines() if line.startswith("| `") and re.search(r"`[0-9a-f]{64}`", line)]
    for name, entry in catalogue().items():
        mine = [row for row in rows if row.startswith(f"| `{name}` |")]
        checksummed = [r for r in entry.releases if not r.layout]
        assert len(mine) == len(checksummed), name
        for release in (r for r in entry.releases if r.layout):  # listed with where to download them
            assert f"| `{name}` |" in page and release.download in page, name
        for row, release in zip(mine, checksummed):
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            single = release.files[0].sha256 if release.archive is None and len(release.files) == 1 else None
            expected = release.archive.sha256 if release.archive else single or release.fingerprint
            assert re.findall(r"`([0-9a-f]{64})`", row) == [expected], name
            assert cells[5] == f"{release.size:,}", name
            url = release.archive.url if release.archive else release.url_base or next(
                (i.url for i in release.inputs if i.url), "none")
            assert url in cells[2], name
            assert all(i.sha256 in page for i in release.inputs), name


@needs_shared
@pytest.mark.shared_data
def test_each_shared_folder_is_accepted_as_it_is(home):
    from townsquare.lib.data_paths import installed_dataset

    for name, folder in SHARED.items():
        assert townsquare("data", "fetch", name, "--from", str(SHARED_DATA / folder)) == 0, name
        assert installed_dataset(name)["verified"] == "each file checked by its SHA-256"


SCRIPTED = ["--llm", "scripted", "-p", "townsquare.testing.scripted", "--quiet", "--set", "rounds=2"]


@pytest.mark.parametrize("example,names", [("smallville", "smallville-3"), ("valentines", "smallville-n25"),
                                           ("recagent", "movielens-latest-small recagent-profiles")])
def test_without_their_data_the_paper_examples_stop_with_the_fetch_command(home, tmp_path, capsys, example, names):
    assert townsquare("run", str(ROOT / "examples" / f"{example}.toml"), *SCRIPTED, "--out", str(tmp_path / example)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"get {'them' if ' ' in names else 'it'} with `townsquare data fetch {names}`" in lines[0]
    assert not (tmp_path / example).exists()


def test_no_example_points_outside_the_repository():
    for scenario in (ROOT / "examples").glob("*.toml"):
        assert "shared/data" not in scenario.read_text() and "../.." not in scenario.read_text(), scenario.name


@needs_shared
@pytest.mark.shared_data
def test_the_paper_examples_run_from_installed_data_only(home, tmp_path):
    assert townsquare("data", "fetch", "smallville-3", "--from", str(SHARED_DATA / "generative_agents")) == 0
    assert townsquare("data", "fetch", "recagent-profiles", "--from", str(SHARED_DATA / "yulan-rec")) == 0
    assert townsquare("data", "fetch", "movielens-latest-small", "--from", str(SHARED_DATA / "movielens")) == 0
    for example in ("smallville", "recagent"):
        assert townsquare("run", str(ROOT / "examples" / f"{example}.toml"), *SCRIPTED, "--out", str(tmp_path / example)) == 0
        manifest = (tmp_path / example / "manifest.json").read_text()
        assert "shared/data" not in manifest and "data:" in manifest
