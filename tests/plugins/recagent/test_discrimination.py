"""The discrimination test (RecAgent fig. 2a): p on a hand-made selection, the cases drawn from
MovieLens-style histories, and ``townsquare eval discrimination`` on a generated fixture."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from townsquare.lib.items import Item
from townsquare.plugins.recagent.studies.discrimination import evaluate, make_cases, precision_p, read_histories


def test_p_on_a_hand_made_selection():
    truth = {"u1": {"a", "b", "c"}, "u2": {"d"}, "u3": {"e", "f"}}
    selected = {"u1": {"a", "b", "x"}, "u2": {"y"}, "u3": {"e", "f"}}
    # 2/3 + 0 + 1
    assert precision_p(truth, selected) == pytest.approx(2 / 3 + 0 + 1)
    assert precision_p(truth, {}) == 0


def write_movielens(folder, users=12, movies=40):
    """Users 1-6 rate 16 of the 20 comedies, 7-12 of the dramas: most negatives are of the other genre."""
    folder.mkdir()
    rows = ["movieId,title,genres"]
    for m in range(1, movies + 1):
        genre = "Comedy" if m % 2 else "Drama"
        rows.append(f"{m},{genre} tale number {m} (2001),{genre}")
    (folder / "movies.csv").write_text("\n".join(rows) + "\n")
    ratings = ["userId,movieId,rating,timestamp"]
    for u in range(1, users + 1):
        own = [m for m in range(1, movies + 1) if (m % 2 == 1) == (u <= users // 2)]
        own = own[u % 3:] + own[:u % 3]
        for t, m in enumerate(own[:16]):
            ratings.append(f"{u},{m},4.0,{1000 + 10 * (16 - t) if u == 1 else 1000 + t}")
    (folder / "ratings.csv").write_text("\n".join(ratings) + "\n")
    return folder


SCENARIO = """
name = "disc"
seed = 2
rounds = 1
[platform]
name = "recsys"
catalogue = "movielens"
path = "{folder}"
[recommender]
name = "item_random"
[embedder]
name = "hash"
[llm]
name = "{llm}"
[[populations]]
name = "users"
count = 1
slots = {{ policy = "recagent_policy" }}
personas = {{ name = "inline", items = [{{ name = "A", sentences = ["x"] }}] }}
"""


def test_cases_hold_out_the_last_a_items_by_time(tmp_path):
    items, histories = read_histories(write_movielens(tmp_path / "ml"))
    # user 1's timestamps run backwards: the file's first rows are the latest
    assert histories["1"][-1] == "3" and histories["1"][0] == "33"
    cases = make_cases(items, histories, 2, 5, 4, np.random.default_rng(0))
    assert len(cases) == 4
    for case in cases:
        history = histories[case.user]
        assert case.truth == set(history[-2:]) and [i.id for i in case.history] == history[:-2]
        ids = [i.id for i in case.candidates]
        assert len(ids) == 7 and case.truth <= set(ids) and not (set(ids) - case.truth) & set(history)


def test_embedding_beats_random_on_genre_loyal_users(tmp_path):
    from townsquare.plugins.embedders.hash import HashEmbedder, HashEmbedderConfig

    items, histories = read_histories(write_movielens(tmp_path / "ml"))
    rows = asyncio.run(evaluate(items, histories, users=12, grid=[(2, 8)], seed=1, embedder=HashEmbedder(HashEmbedderConfig())))
    row = rows[0]
    assert row["users"] == 12 and row["random"] == pytest.approx(row["random_mean"] * 12)
    # negatives are half the other genre: the embedding picks the user's genre
    assert row["embedding_mean"] > row["random_mean"] + 0.2


def test_eval_discrimination_command(tmp_path, write_scenario, capsys):
    from townsquare.cli import main

    folder = write_movielens(tmp_path / "ml")
    path = write_scenario(SCENARIO.format(folder=folder, llm="scripted"))
    args = ["eval", "discrimination", str(path), "--users", "5", "--grid", "1,5", "--grid", "2,3", "-p", "townsquare.testing.scripted"]
    main([*args, "--out", str(tmp_path / "disc")])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "agent" in lines[0] and "embedding" in lines[0] and "random" in lines[0]
    assert lines[1].startswith("(1, 5)        5") and lines[2].startswith("(2, 3)        5")
    # every call journaled beside the results (the bare model's in OUT, the agents' per batch), none lost
    made = journaled(tmp_path / "disc")
    assert made["recagent.discrimination"] == 5 * 1 + 5 * 2 and made["recagent.pick"] == 5 * 1 + 5 * 2
    rows = sum(journaled(tmp_path / "disc", "1").values())
    assert f"{rows} LLM calls" in out and json.loads((tmp_path / "disc" / "discrimination.json").read_text())["rows"]
    # priced before spending: calls within 25 % of those made; nothing written
    main([*args, "--estimate", "--out", str(tmp_path / "never")])
    assert_estimate_close(capsys.readouterr().out, made)
    assert not (tmp_path / "never").exists()
    # the same command again: every answer from the cache
    main([*args, "--out", str(tmp_path / "disc")])
    again = capsys.readouterr().out
    assert " 0 answered by the model" in again and journaled(tmp_path / "disc") == made
    with pytest.raises(SystemExit) as bad:
        main(["eval", "discrimination", str(path), "--grid", "1-5"])
    assert bad.value.code == 2 and "--grid '1-5'" in capsys.readouterr().err




def journaled(folder, where: str = "status != 'parse_failure'") -> dict:
    """purpose -> llm_calls rows (calls made; parse failures are no calls) in every journal of
    an evaluation folder."""
    import sqlite3

    counts: dict = {}
    for path in [folder / "events.sqlite", *sorted(folder.glob("agents-*/events.sqlite"))]:
        db = sqlite3.connect(path)
        try:
            for purpose, n in db.execute(f"SELECT purpose, COUNT(*) FROM llm_calls WHERE {where} GROUP BY purpose"):
                counts[purpose] = counts.get(purpose, 0) + n
        finally:
            db.close()
    return counts


def assert_estimate_close(printed: str, made: dict) -> None:
    """Estimated calls within 25 % of the calls made, repairs of malformed answers aside (the
    scripted model's JSON is canned, so every JSON answer of the agents' memory is repaired)."""
    estimated = int(printed.split("ESTIMATE: ")[1].split(" LLM calls")[0].replace(",", ""))
    first_tries = sum(n for purpose, n in made.items() if not purpose.endswith(".repair"))
    assert abs(estimated - first_tries) <= 0.25 * first_tries, (estimated, first_tries, printed)


def test_the_recagent_agent_itself_chooses_with_profile_memory_and_policy(tmp_path, write_scenario, capsys, monkeypatch):
    from townsquare.cli import main
    from townsquare.testing.oracle import OracleLLM

    seen = []
    original = OracleLLM.complete

    async def complete(oracle, request):
        seen.append(request)
        return await original(oracle, request)

    monkeypatch.setattr(OracleLLM, "complete", complete)
    folder = write_movielens(tmp_path / "ml")
    path = write_scenario(SCENARIO.format(folder=folder, llm="oracle"))
    main(["eval", "discrimination", str(path), "--users", "12", "--grid", "2,8", "-p", "townsquare.testing.oracle", "--out", str(tmp_path / "o")])
    lines = capsys.readouterr().out.splitlines()
    import re

    means = [float(x) for x in re.findall(r"(\d+\.\d{3}) \(", lines[1])]
    values = dict(zip(["random", "embedding", "llm", "agent"], means))
    assert "agent" in lines[0] and "llm" in lines[0]
    # genre-loyal users: the agent's profile names its genre ("You enjoy comedy movies"), and it picks it
    assert values["agent"] > values["random"] + 0.2
    picks = [r for r in seen if r.purpose == "recagent.pick"]
    assert len(picks) == 12 * 2
    prompt = picks[0].messages[-1].content
    assert "Movies you rated before, most recent last:" in prompt and "You enjoy" in prompt  # the profile
    assert "Memories that matter here:" in prompt and "rated it 4 out of 5" in prompt  # the history, through memory
    assert "browsing the recommender system" in prompt and "Which of these movies" in prompt  # context and the policy's page
    # the history went through sensory memory first
    assert sum(r.purpose == "recagent.sensory" for r in seen) >= 12 * 10


def test_generation_test_judges_the_agent_and_the_embedding_baseline(tmp_path, write_scenario, capsys):
    from townsquare.cli import main

    folder = write_movielens(tmp_path / "ml")
    path = write_scenario(SCENARIO.format(folder=folder, llm="oracle"))
    args = ["eval", "generation", str(path), "--users", "12", "--n", "3", "--page-size", "6", "-p", "townsquare.testing.oracle"]
    main([*args, "--out", str(tmp_path / "gen")])
    lines = capsys.readouterr().out.splitlines()
    made = journaled(tmp_path / "gen")
    assert made["recagent.judge"] == 2 * 12 and made["recagent.pick"] == 3 * 12
    main([*args, "--estimate"])
    assert_estimate_close(capsys.readouterr().out, made)
    assert "agent win/lose/indist." in lines[0] and "embedding win/lose/indist." in lines[0]
    cells = lines[1].split()
    assert cells[:2] == ["3", "12"]
    shares = [float(c.rstrip("%")) for c in cells[2:8]]
    assert sum(shares[:3]) == pytest.approx(100, abs=0.2) and sum(shares[3:]) == pytest.approx(100, abs=0.2)
