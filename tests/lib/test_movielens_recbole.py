"""RecBole's atomic files (the layout the recbole wheel carries ML-100K in) read like GroupLens's
ml-100k, and bad files are one line naming the file and line."""

from __future__ import annotations

import shutil

import pytest

from helpers import ROOT
from townsquare.api import UsageError
from townsquare.lib.movielens import load_movielens_data, movielens_layout

DATA = ROOT / "tests" / "data" / "recsys"


def test_the_atomic_files_load_like_grouplens_ml_100k():
    grouplens, atomic = load_movielens_data(DATA / "ml-100k-mini"), load_movielens_data(DATA / "ml-100k-atomic-mini")
    assert atomic.layout == "recbole" and movielens_layout(DATA / "ml-100k-atomic-mini") == "recbole"
    assert atomic.items == grouplens.items  # titles get their year back; "unknown" is no genre
    assert atomic.ratings == grouplens.ratings and atomic.users == grouplens.users
    assert next(i for i in atomic.items if i.id == "7").title == "Amélie (2001)"  # UTF-8, where GroupLens writes Latin-1


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace("rating:float", "score:float"), "line 1: no 'rating' column"),
    (lambda t: t.replace("1\t4\t5\t1010", "1\t4\t5"), "line 3: expected 4 tab-separated fields, found 3"),
    (lambda t: t.replace("1\t4\t5\t1010", "1\t4\tfive\t1010"), "line 3: rating and timestamp must be numbers"),
])
def test_a_broken_atomic_file_is_one_line(tmp_path, edit, message):
    folder = tmp_path / "ml"
    shutil.copytree(DATA / "ml-100k-atomic-mini", folder)
    inter = folder / "ml-100k-mini.inter"
    inter.write_text(edit(inter.read_text()))
    with pytest.raises(UsageError, match=f"ml-100k-mini.inter: {message}"):
        load_movielens_data(folder)


def test_latin_1_in_an_atomic_file_is_refused_naming_it(tmp_path):
    folder = tmp_path / "ml"
    shutil.copytree(DATA / "ml-100k-atomic-mini", folder)
    item = folder / "ml-100k-mini.item"
    item.write_bytes(item.read_text().encode("latin-1"))
    with pytest.raises(UsageError, match="ml-100k-mini.item: not utf-8 text"):
        load_movielens_data(folder)
