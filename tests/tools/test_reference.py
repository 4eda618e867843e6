"""docs/reference.md is generated from the docstrings and kept current."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import townsquare.api as api
from townsquare import hookspecs
from townsquare.slots import SLOT_PROTOCOLS
from townsquare.specs import REGISTRATION_HOOKS

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import reference_docs as docs  # noqa: E402


def test_reference_page_is_current():
    assert docs.PAGE.read_text(encoding="utf-8") == docs.render(), "docs/reference.md is stale: run python tools/reference_docs.py"


def test_every_hook_is_in_the_reference_with_its_docstring():
    page = docs.PAGE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^#### (townsquare_\w+)$", page, re.M))
    assert documented == set(hookspecs.ALL_HOOKS)
    for name in hookspecs.ALL_HOOKS:
        first_line = docs._md(getattr(hookspecs, name).__doc__.strip().splitlines()[0])
        assert first_line in page, name


def test_every_protocol_and_record_is_documented_and_exported_by_the_api():
    page = docs.PAGE.read_text(encoding="utf-8")
    documented = set(re.findall(r"^### (\w+)$", page, re.M))
    names = {p.__name__ for p in SLOT_PROTOCOLS.values()} | {s.__name__ for s in REGISTRATION_HOOKS.values()}
    names |= {"Turns", "TurnsBackend", "ObservesRounds", "StepContext", "BuildContext", "PostView", "RoundView"}
    assert names <= documented, names - documented
    assert names <= set(api.__all__), names - set(api.__all__)


def test_check_mode_reports_a_stale_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(docs, "PAGE", tmp_path / "reference.md")
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0
