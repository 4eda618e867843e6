"""Opt-in tests against a real Mastodon instance: ``pytest -m live``.

They run only when ``MASTODON_BASE_URL`` (e.g. ``https://social.example``) and
``MASTODON_TOKENS_FILE`` (a tokens file, see docs/mastodon.md; two or three bot accounts
are enough) are set, and clean up after themselves: every status they make is
followers-only and deleted at the end with ``townsquare mastodon cleanup``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

BASE_URL = os.environ.get("MASTODON_BASE_URL", "")
TOKENS_FILE = os.environ.get("MASTODON_TOKENS_FILE", "")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(not (BASE_URL and TOKENS_FILE), reason="set MASTODON_BASE_URL and MASTODON_TOKENS_FILE to run live tests"),
]


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "support"), "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "townsquare.cli", *args], capture_output=True, text=True, env=env, timeout=900)


def test_a_small_run_on_a_real_instance_then_cleanup(tmp_path):
    pytest.importorskip("mastodon")
    from mastodon import Mastodon

    tokens = [line.split()[-1] for line in Path(TOKENS_FILE).read_text().splitlines() if line.strip() and not line.startswith("#")]
    count = min(3, len(tokens))
    assert count >= 2, "the live test needs at least two accounts"
    scenario = tmp_path / "s.toml"
    scenario.write_text(f"""name = "live"
seed = 3
rounds = 2
[activity]
model = "always"
[plugins.embedding_baseline]
post_probability = 1.0
[[populations]]
name = "users"
count = {count}
slots = {{ policy = "embedding_baseline" }}
[populations.personas]
name = "inline"
items = [
  {{ name = "Test Ada", sentences = ["I love hiking in the mountains.", "I cook vegan food."] }},
  {{ name = "Test Bo", sentences = ["I play jazz piano at night.", "Mountains and hiking relax me."] }},
  {{ name = "Test Cy", sentences = ["I follow football every weekend.", "I cook spicy food for friends."] }},
]
""")
    result = cli("run", str(scenario), "--out", str(tmp_path / "run"), "-p", "townsquare.platforms.mastodon",
                 "--set", "platform.name=mastodon", "--set", f"platform.base_url={BASE_URL}",
                 "--set", f"platform.tokens={TOKENS_FILE}", "--set", 'platform.note_suffix="townsquare live test account"',
                 tmp_path=tmp_path)
    try:
        assert result.returncode == 0, result.stderr
        db = sqlite3.connect(tmp_path / "run" / "events.sqlite")
        remote_ids = [r for (r,) in db.execute("SELECT remote_id FROM posts")]
        db.close()
        assert remote_ids
        client = Mastodon(access_token=tokens[0], api_base_url=BASE_URL, version_check_mode="none")
        assert client.me().bot
        mine = [s for s in client.account_statuses(client.me().id, limit=40) if str(s.id) in remote_ids]
        assert mine and all(s.visibility == "private" for s in mine)
        for path in (tmp_path / "run").rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert not any(token.encode() in data for token in tokens), f"a token appears in {path}"
        assert not any(token in result.stderr + result.stdout for token in tokens)
        assert json.loads((tmp_path / "run" / "manifest.json").read_text())["status"] == "finished"
    finally:
        if (tmp_path / "run" / "mastodon_journal.sqlite").exists():
            cleaned = cli("mastodon", "cleanup", str(tmp_path / "run"), "-p", "townsquare.platforms.mastodon", tmp_path=tmp_path)
            assert cleaned.returncode == 0, cleaned.stderr
    from mastodon.errors import MastodonNotFoundError

    for remote_id in remote_ids:
        with pytest.raises(MastodonNotFoundError):
            client.status(remote_id)
