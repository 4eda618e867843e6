"""``townsquare data``: fetch from a local HTTP server (as awkward as real hosts), verify,
resume cut downloads, import local copies, and the one-line missing-data error; no internet.

The datasets here are toy entries written into the data home's own catalogue
(``$TOWNSQUARE_DATA/catalogue/NAME.toml``), pointing at :class:`FileServer` on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path

import pytest

from file_server import FileServer
from helpers import run_cli as townsquare

BIG = random.Random(1).randbytes(300_000)  # large enough to be cut mid-body several times
TOY = {
    "personas/Ann Lee/scratch.json": b'{"name": "Ann Lee", "age": 30}',
    "README": b"A toy dataset for the data command's tests.\n",
    "ratings.bin": BIG,
}
RECORDS = [{"_id": str(i), "question": f"q{i}?", "answer": f"a{i}", "note": "caf\u00e9"} for i in range(12)]
FULL = json.dumps(RECORDS, indent=2).encode()
HEAD = json.dumps(RECORDS[:5], ensure_ascii=False).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def zipped(files: dict[str, bytes], root: str = "toy") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(f"{root}/{path}" if root else path, data)
    return buffer.getvalue()


def error_line(capsys) -> str:
    """The one error line a failed command printed last (progress lines may come before it)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:] and "Traceback" not in "".join(lines), lines
    return lines[-1]


@pytest.fixture
def home(data_home: Path) -> Path:
    (data_home / "catalogue").mkdir(parents=True)
    return data_home


@pytest.fixture
def server():
    with FileServer() as running:
        yield running


def archive_entry(home: Path, url: str, archive: bytes, name: str = "toy-archive", terms: str = "") -> None:
    (home / "catalogue" / f"{name}.toml").write_text(f"""
title = "A toy archive"
source = "{url}"
licence = "CC0"
terms = {json.dumps(terms)}
roots = ["", "toy"]

[[releases]]
version = "v1"
archive = {{ url = "{url}/toy.zip", sha256 = "{sha(archive)}", size = {len(archive)}, format = "zip", root = "toy" }}
checksums = "computed by the test"
required = ["README", "ratings.bin"]
""")


def files_entry(home: Path, url: str, name: str = "toy-files") -> None:
    lines = "\n".join(f'  {{ path = "{p}", sha256 = "{sha(d)}", size = {len(d)}, upstream = "data/{p}" }},' for p, d in TOY.items())
    (home / "catalogue" / f"{name}.toml").write_text(f"""
title = "Toy files"
source = "{url}"
licence = "CC0"
roots = ["", "copy"]

[[releases]]
version = "abc1234"
url_base = "{url}/repo/"
checksums = "computed by the test"
inputs = [
  {{ path = "full.json", sha256 = "{sha(FULL)}", size = {len(FULL)}, url = "{url}/full.json" }},
]
files = [
{lines}
  {{ path = "head.json", sha256 = "{sha(HEAD)}", size = {len(HEAD)}, derive = "json_head", input = "full.json", count = 5 }},
]
""")


def serve_files(server: FileServer) -> None:
    server.files.update({f"/repo/data/{p}": d for p, d in TOY.items()})
    server.files["/full.json"] = FULL


def leftovers(home: Path) -> list[str]:
    return sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if "catalogue" not in p.parts)


# --------------------------------------------------------------------------- downloads


def test_fetch_downloads_the_pinned_archive_verifies_and_installs_it(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 0
    folder = home / "toy-archive"
    assert capsys.readouterr().out.strip() == str(folder)
    assert (folder / "ratings.bin").read_bytes() == BIG and (folder / "personas" / "Ann Lee" / "scratch.json").is_file()
    marker = json.loads((folder / ".townsquare-dataset.json").read_text())
    assert marker["version"] == "v1" and marker["fingerprint"] == sha(archive) and marker["files"]["ratings.bin"] == sha(BIG)
    assert leftovers(home) == sorted(["toy-archive", *(f"toy-archive/{p}" for p in [".townsquare-dataset.json", "README", "ratings.bin",
                                                                                      "personas", "personas/Ann Lee", "personas/Ann Lee/scratch.json"])])
    assert townsquare("data", "list", "--json") == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)["datasets"]}
    assert listed["toy-archive"]["installed"] and not listed["movielens-100k"]["installed"] and listed["smallville-3"]["licence"] == "Apache-2.0"
    assert townsquare("data", "path", "toy-archive") == 0 and capsys.readouterr().out.strip() == str(folder)
    assert townsquare("data", "fetch", "toy-archive") == 0  # already there: nothing downloaded again
    assert len(server.requests) == 1


def test_fetch_per_file_release_downloads_each_file_and_derives_the_rest(home, server):
    serve_files(server)
    files_entry(home, server.url)
    assert townsquare("data", "fetch", "toy-files") == 0
    folder = home / "toy-files"
    assert (folder / "head.json").read_bytes() == HEAD and (folder / "ratings.bin").read_bytes() == BIG
    assert not (folder / "full.json").exists()  # an input is used, not installed
    assert {path for path, _ in server.requests} == {"/full.json", *(f"/repo/data/{p.replace(' ', '%20')}" for p in TOY)}
    assert townsquare("data", "verify", "toy-files") == 0


def test_a_checksum_mismatch_is_one_line_and_installs_nothing(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive[:-10] + b"0123456789"  # same size, other bytes
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 1
    err = error_line(capsys)
    assert err.startswith("error: checksum mismatch:") and sha(archive) in err and "nothing was installed" in err
    assert leftovers(home) == []


def test_a_cut_download_resumes_with_range_and_if_range(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = [("cut", 70_000), ("cut", 50_000), ("cut", 1), "no_length"]
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 0
    assert (home / "toy-archive" / "ratings.bin").read_bytes() == BIG
    ranges = [headers.get("Range") for _, headers in server.requests]
    assert ranges == [None, "bytes=70000-", "bytes=120000-", "bytes=120001-"]
    assert all(headers.get("If-Range") == server.etag("/toy.zip") for _, headers in server.requests[1:])
    assert leftovers(home) == sorted(p for p in leftovers(home) if p.startswith("toy-archive"))


def test_a_download_that_keeps_failing_is_kept_and_resumed_by_the_next_fetch(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = [("cut", 90_000), "reset", "reset", "reset", "reset", "reset", "reset"]
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 1
    err = error_line(capsys)
    assert "run the same command again to resume" in err and "90,000 bytes kept" in err
    assert not (home / "toy-archive").exists()
    assert [p.stat().st_size for p in (home / ".partial" / "toy-archive").glob("*.part")] == [90_000]
    server.faults["/toy.zip"] = []
    assert townsquare("data", "fetch", "toy-archive") == 0
    assert server.requests[-1][1].get("Range") == "bytes=90000-"
    assert (home / "toy-archive" / "ratings.bin").read_bytes() == BIG and not (home / ".partial").exists()


def test_ctrl_c_mid_download_leaves_no_dataset_only_the_part_to_resume(home, server):
    from townsquare.plugins.data.catalogue import dataset
    from townsquare.plugins.data.fetch_release import fetch_release
    from townsquare.plugins.data.installer import staging

    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    archive_entry(home, server.url, archive)
    entry = dataset("toy-archive")
    got = []

    def interrupt_after_a_while(n: int) -> None:
        got.append(n)
        if sum(got) > 100_000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), staging("toy-archive") as folder:
        fetch_release(entry, entry.releases[0], folder, interrupt_after_a_while)
    assert not (home / "toy-archive").exists() and not (home / ".staging").exists()
    kept = [p.stat().st_size for p in (home / ".partial" / "toy-archive").glob("*.part")]
    assert len(kept) == 1 and kept[0] > 100_000
    assert townsquare("data", "fetch", "toy-archive") == 0
    resumed = server.requests[1:]  # none when the interrupted read had already written the whole file
    assert [headers["Range"] for _, headers in resumed] == ([f"bytes={kept[0]}-"] if kept[0] < len(archive) else [])


@pytest.mark.parametrize("fault", ["ignore_range", "bad_range"])
def test_a_server_that_does_not_continue_the_range_restarts_the_file(home, server, fault):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = [("cut", 40_000), fault]
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 0
    assert (home / "toy-archive" / "ratings.bin").read_bytes() == BIG


def test_a_file_that_changed_on_the_server_is_sent_whole_not_spliced(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = [("cut", 40_000)] + ["reset"] * 6
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 1 and "to resume" in error_line(capsys)
    old_etag, first_fetch = server.etag("/toy.zip"), len(server.requests)
    server.faults["/toy.zip"] = []
    server.files["/toy.zip"] = zipped({**TOY, "README": b"changed upstream\n"})  # new ETag: If-Range fails
    assert townsquare("data", "fetch", "toy-archive") == 1
    assert "checksum mismatch" in error_line(capsys)
    resumed = server.requests[first_fetch][1]
    assert resumed["Range"] == "bytes=40000-" and resumed["If-Range"] == old_etag != server.etag("/toy.zip")
    assert leftovers(home) == []


def test_429_and_503_are_retried_after_retry_after(home, server):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = ["429", "503"]
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 0 and len(server.requests) == 3


def test_an_html_page_instead_of_the_file_is_refused(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    server.faults["/toy.zip"] = ["html"]
    archive_entry(home, server.url, archive)
    assert townsquare("data", "fetch", "toy-archive") == 1
    assert "sent an HTML page, not the file" in error_line(capsys)
    assert not (home / "toy-archive").exists()


def test_no_network_is_one_line_that_points_to_from(home, server, capsys):
    archive = zipped(TOY)
    archive_entry(home, server.url, archive)
    server.httpd.server_close()  # nothing listens there any more
    assert townsquare("data", "fetch", "toy-archive") == 1
    err = error_line(capsys)
    assert "cannot reach 127.0.0.1" in err and "--from PATH" in err
    assert not (home / "toy-archive").exists()


def test_a_missing_file_on_the_server_fails_without_retrying(home, server, capsys):
    archive_entry(home, server.url, zipped(TOY))
    assert townsquare("data", "fetch", "toy-archive") == 1
    assert "HTTP 404 Not Found" in error_line(capsys) and len(server.requests) == 1


def test_terms_are_shown_and_must_be_accepted_before_downloading(home, server, capsys):
    archive = zipped(TOY)
    server.files["/toy.zip"] = archive
    archive_entry(home, server.url, archive, terms="Research use only; cite the dataset.")
    assert townsquare("data", "fetch", "toy-archive") == 2
    captured = capsys.readouterr().err
    assert "Research use only; cite the dataset." in captured and "--accept-terms" in captured.splitlines()[-1]
    assert server.requests == [] and leftovers(home) == []
    assert townsquare("data", "fetch", "toy-archive", "--accept-terms") == 0
    marker = json.loads((home / "toy-archive" / ".townsquare-dataset.json").read_text())
    assert marker["terms_accepted"] == "Research use only; cite the dataset."


# --------------------------------------------------------------------------- local copies


def test_from_the_release_archive_and_from_an_archive_of_the_files(home, server, tmp_path):
    archive = zipped(TOY)
    archive_entry(home, server.url, archive)
    (tmp_path / "toy.zip").write_bytes(archive)
    assert townsquare("data", "fetch", "toy-archive", "--from", str(tmp_path / "toy.zip")) == 0
    assert (home / "toy-archive" / "ratings.bin").read_bytes() == BIG
    files_entry(home, server.url)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data in {**TOY, "full.json": FULL, "unrelated.txt": b"x"}.items():
            info = tarfile.TarInfo(f"toy-copy/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "copy.tar.gz").write_bytes(buffer.getvalue())
    assert townsquare("data", "fetch", "toy-files", "--from", str(tmp_path / "copy.tar.gz")) == 0
    assert (home / "toy-files" / "head.json").read_bytes() == HEAD and not (home / "toy-files" / "unrelated.txt").exists()
    assert server.requests == []


def test_from_a_folder_finds_the_files_under_a_root_or_at_their_upstream_paths(home, server, tmp_path, capsys):
    files_entry(home, server.url)
    clone = tmp_path / "clone"
    for path, data in TOY.items():  # a clone of the source repository: files under data/
        (clone / "data" / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / "data" / path).write_bytes(data)
    (clone / "full.json").write_bytes(FULL)
    assert townsquare("data", "fetch", "toy-files", "--from", str(clone)) == 0
    assert "head.json" in json.loads((home / "toy-files" / ".townsquare-dataset.json").read_text())["files"]
    assert townsquare("data", "remove", "toy-files") == 0 and not (home / "toy-files").exists()
    nested = tmp_path / "nested"
    for path, data in {**TOY, "head.json": HEAD}.items():
        (nested / "copy" / path).parent.mkdir(parents=True, exist_ok=True)
        (nested / "copy" / path).write_bytes(data)
    assert townsquare("data", "fetch", "toy-files", "--from", str(nested)) == 0
    assert server.requests == []


def test_a_folder_with_a_changed_file_or_the_wrong_layout_installs_nothing(home, server, tmp_path, capsys):
    files_entry(home, server.url)
    copy = tmp_path / "copy"
    for path, data in {**TOY, "head.json": HEAD}.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes(data)
    (copy / "README").write_bytes(b"edited by hand\n")
    assert townsquare("data", "fetch", "toy-files", "--from", str(copy)) == 1
    err = error_line(capsys)
    assert err.startswith("error: checksum mismatch:") and "README" in err
    (copy / "README").unlink()
    assert townsquare("data", "fetch", "toy-files", "--from", str(copy)) == 1
    err = error_line(capsys)
    assert err.startswith("error: wrong layout:") and "README" in err
    assert leftovers(home) == []


def test_an_unpacked_copy_of_an_archive_only_release_asks_for_the_archive(home, server, tmp_path, capsys):
    archive = zipped(TOY)
    archive_entry(home, server.url, archive)
    copy = tmp_path / "toy"
    for path, data in TOY.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_bytes(data)
    assert townsquare("data", "fetch", "toy-archive", "--from", str(copy)) == 1
    assert "import the archive itself" in error_line(capsys)
    (copy / "toy.zip").write_bytes(archive)  # the archive sits in the folder: that is used
    assert townsquare("data", "fetch", "toy-archive", "--from", str(copy)) == 0


def test_an_archive_member_that_climbs_out_is_refused(home, server, tmp_path, capsys):
    files_entry(home, server.url)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("../../evil.txt", b"x")
    (tmp_path / "evil.zip").write_bytes(buffer.getvalue())
    assert townsquare("data", "fetch", "toy-files", "--from", str(tmp_path / "evil.zip")) == 1
    assert "refuses member '../../evil.txt'" in error_line(capsys)
    assert not (tmp_path.parent / "evil.txt").exists() and leftovers(home) == []


# --------------------------------------------------------------------------- data: paths


def scenario_reading(path: Path, *people: str) -> Path:
    """A one-round scenario with a population of JSONL personas from each of ``people``."""
    populations = "".join(f"""
[[populations]]
name = "p{i}"
count = 2
slots = {{ policy = "embedding_baseline" }}
personas = {{ name = "jsonl", path = "{where}" }}
""" for i, where in enumerate(people))
    path.write_text('name = "s"\nrounds = 1\n' + populations)
    return path


def test_a_scenario_naming_missing_datasets_is_one_line_naming_the_fetch_command(home, server, tmp_path, capsys):
    scenario = scenario_reading(tmp_path / "s.toml", "data:toy-files/people.jsonl", "data:other-set/people.jsonl")
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "run")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {scenario}: populations[0].personas.path, populations[1].personas.path: datasets 'toy-files', "
                   "'other-set' are not installed: get them with `townsquare data fetch toy-files other-set` (add --from PATH to import a local copy)"]
    assert not (tmp_path / "run").exists()


def test_a_data_path_resolves_inside_the_installed_dataset_and_the_manifest_records_it(home, server, tmp_path):
    from townsquare.api import UsageError
    from townsquare.lib.data_paths import DatasetMissing, data_path

    people = b'{"name": "Ann", "sentences": ["I like tea."]}\n{"name": "Bo", "sentences": ["I run."]}\n'
    (home / "catalogue" / "people.toml").write_text(f"""
title = "people"
source = "test"
licence = "CC0"
[[releases]]
version = "1"
checksums = "test"
files = [{{ path = "people.jsonl", sha256 = "{sha(people)}", size = {len(people)} }}]
""")
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "people.jsonl").write_bytes(people)
    with pytest.raises(DatasetMissing, match="townsquare data fetch people"):
        data_path("data:people/people.jsonl")
    assert townsquare("data", "fetch", "people", "--from", str(tmp_path / "copy" / "people.jsonl")) == 0
    assert data_path("data:people/people.jsonl") == home / "people" / "people.jsonl"
    assert data_path("data:people") == home / "people"
    assert data_path("x.json", tmp_path) == tmp_path / "x.json" and data_path("/abs/x.json", tmp_path) == Path("/abs/x.json")
    with pytest.raises(UsageError, match="cannot go up"):
        data_path("data:people/../other/secret")
    with pytest.raises(UsageError, match="no 'nope.csv' in dataset 'people'"):
        data_path("data:people/nope.csv")
    scenario = scenario_reading(tmp_path / "s.toml", "data:people/people.jsonl")
    assert townsquare("run", str(scenario), "--out", str(tmp_path / "run"), "--quiet") == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["scenario"]["populations"][0]["personas"]["path"] == "data:people/people.jsonl"
    assert manifest["datasets"]["people"]["fingerprint"] and manifest["datasets"]["people"]["version"] == "1"


def test_without_the_plugin_a_scenario_naming_a_data_path_is_one_line(home, tmp_path, capsys):
    scenario = scenario_reading(tmp_path / "s.toml", "data:people/people.jsonl")
    assert townsquare("-p", "no:data", "run", str(scenario), "--out", str(tmp_path / "run")) == 2
    assert error_line(capsys) == (f"error: {scenario}: populations[0].personas.path: a data: path needs the 'data' plugin, "
                                  "which is not loaded (is it disabled with -p no:data?)")
    assert not (tmp_path / "run").exists()
    plain = scenario_reading(tmp_path / "plain.toml", str(tmp_path / "people.jsonl"))
    (tmp_path / "people.jsonl").write_text('{"name": "Ann", "sentences": ["I like tea."]}\n{"name": "Bo", "sentences": ["I run."]}\n')
    assert townsquare("-p", "no:data", "run", str(plain), "--out", str(tmp_path / "run"), "--quiet") == 0
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["datasets"] == {}


def test_without_the_plugin_there_is_no_data_command(home, capsys):
    assert townsquare("-p", "no:data", "data", "list") == 2
    assert "No such command 'data'" in error_line(capsys)


@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_from_a_device_or_a_pipe_is_refused_before_anything_is_read(data_home, tmp_path, source):
    """``/dev/zero`` never ends and a pipe may not: neither is read, and the data home gets no
    ``.staging/`` (the command runs in its own process, under the minute the issue allows it)."""
    import os
    import subprocess
    import sys

    if source == "fifo":
        source = str(tmp_path / "fifo")
        os.mkfifo(source)
    result = subprocess.run([sys.executable, "-m", "townsquare.cli", "data", "fetch", "smallville-3", "--from", source],
                            capture_output=True, text=True, timeout=60, env={**os.environ, "TOWNSQUARE_DATA": str(data_home)})
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: --from {source}: not a regular file or a folder (a device, pipe or socket is not read)")
    assert not (data_home / ".staging").exists() and not (data_home / "smallville-3").exists()
