"""The project's text describes the project: the README stays a front door (at most 200 lines,
the main job and the test command as its first two bash blocks, which CI runs), every docs page
is listed in docs/index.md, and no file speaks of how the project was developed (work-item
numbers, who measured what, who else used the machine)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from helpers import ROOT

README_MAX_LINES = 200

#: Phrases that tell the history of the project's development instead of what it is.
DEV_HISTORY = [
    r"\bissues?\s+#?\d+",                       # "issue 17", "issues 8 and 9"
    r"\bthe\s+lead\b",                          # who measured or decided
    r"\b(this|last|previous|next)\s+round\s+of\s+(work|development|changes)\b",
    r"\bbefore\s+this\s+round\s+of\b",
    r"\b(other|another)\s+(sessions?|engineers?)\b",
    r"\bsessions?\s+(shared|sharing)\b",
    r"\bshared\s+with\s+other\s+sessions\b",
    r"\bhelper\s+(sessions?|engineers?)\b",
    r"\bmeasured\s+again\s+by\b",
    r"\bHELPERS\.md\b",
    r"\bworktrees?\b",
]

#: (path relative to the repository, pattern) pairs where a phrase is about the product.
ALLOWED: set[tuple[str, str]] = set()

TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".html", ".js", ".css", ".sh", ".j2"}
SKIP_DIRS = {".git", ".venv", "venv", "runs", "build", "dist", "node_modules", "__pycache__", ".pytest_cache",
             ".mypy_cache", ".ruff_cache"}


def project_files() -> list[Path]:
    """Every text file of the project (sources, docs, examples, benchmarks, tests, CI), without
    virtual environments, run directories and build outputs."""
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        for name in names:
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES or path.relative_to(ROOT).as_posix() == ".ci/run":
                files.append(path)
    return files


def dev_history_lines(text: str, relative: str) -> list[str]:
    found = []
    for pattern in DEV_HISTORY:
        if (relative, pattern) in ALLOWED:
            continue
        for match in re.finditer(pattern, text, re.IGNORECASE):
            line_no = text.count("\n", 0, match.start()) + 1
            found.append(f"{relative}:{line_no}: {match.group(0)!r}")
    return found


def test_no_project_text_speaks_of_how_it_was_developed():
    this = Path(__file__).resolve()
    found = []
    for path in project_files():
        if path.resolve() == this:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found += dev_history_lines(text, path.relative_to(ROOT).as_posix())
    assert not found, "project text that tells how it was developed (say what the project is):\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_phrase():
    """Guard for the list above: each pattern catches the phrasing it is for, and leaves the
    product's own words (a simulation round, a test helper, post ids) alone."""
    caught = ["as issue 17 asks", "measured again by the lead", "before this round of work", "while another session ran",
              "sessions shared the cores", "a helper session measured it", "see HELPERS.md", "in my worktree"]
    for phrase in caught:
        assert dev_history_lines(phrase, "x.md"), phrase
    kept = ["a post created before this round", "test helpers", "posts p1 and p2", "browse sessions a day",
            "the leading agent", "a Mastodon issue tracker"]
    for phrase in kept:
        assert not dev_history_lines(phrase, "x.md"), phrase


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES, f"README.md has {len(text.splitlines())} lines (at most {README_MAX_LINES})"
    # .ci/run runs the first two bash blocks verbatim: the main job, then the test command
    blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    main_job, tests = blocks[0].strip(), blocks[1].strip()
    assert "\n" not in main_job and "\n" not in tests
    assert main_job.startswith("python3 -m venv .venv") and ".[local,knowledge]" in main_job
    assert main_job.endswith("townsquare run examples/quickstart.toml")
    assert tests.startswith("python3 -m venv .venv") and ".[test]" in tests and tests.endswith("python -m pytest -q")
    # no internal names for the performance targets in the front door
    assert not re.search(r"\bP[1-6]\b", text)


def test_every_docs_page_is_in_the_index_and_every_link_resolves():
    docs = ROOT / "docs"
    index = (docs / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in docs.glob("*.md")} - {"index.md"}
    listed = set(re.findall(r"\]\(([a-z_]+\.md)\)", index))
    assert pages <= listed, f"docs pages missing from docs/index.md: {sorted(pages - listed)}"
    for page in [ROOT / "README.md", *docs.glob("*.md")]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)(?:#([^)]*))?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            linked = (page.parent / target).resolve()
            assert linked.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
            if anchor:
                assert anchor in heading_anchors(linked), f"{page.relative_to(ROOT)} links to {target}#{anchor}, no such heading"


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+\s+(.*?)\s*$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
