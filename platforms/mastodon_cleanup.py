"""``townsquare mastodon cleanup RUN_DIR``: undo on the server what a run did there.

From the run's journal (every write the server accepted, with its Mastodon id) it deletes
the run's posts and replies, takes back its reblogs and favourites and, unless
``--keep-follows``, its follows; newest first, each with its own account's token (from the
tokens file or the token store, as during the run). The accounts stay: an admin removes
them with ``tootctl accounts delete USERNAME`` (the command lists them), which also removes
anything left. The run directory is not changed, so the study's record survives.

Mastodon lets an account delete 30 statuses per 30 minutes: a large cleanup waits for its
rate limit (``--max-wait``), and deleting the accounts is then the quicker way. Every request
goes through the adapter's retries; a server that stays unreachable or refuses a token stops
the cleanup with one line (exit 3): running it again carries on (what is already undone
answers 404 and counts as undone).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable

from townsquare.errors import RunStopped, UsageError

from .mastodon_client import RemoteError
from .mastodon_journal import JOURNAL_NAME, Journal


def cleanup(run_dir: str | Path, *, dry_run: bool = False, keep_follows: bool = False, max_wait: float = 1800.0,
            echo: Callable[[str], None] = print) -> Counter:
    """Undo the run's writes; returns counts by what was undone (or would be, with ``dry_run``)."""
    from townsquare.rundir import RunDir

    from .mastodon import MastodonConfig, MastodonPlatform

    path = Path(run_dir) / JOURNAL_NAME
    if not path.exists():
        raise UsageError(f"{run_dir}: no {JOURNAL_NAME}: not a run on a Mastodon server")
    journal = Journal(path)
    base_url = journal.meta("base_url")
    journal.close()
    if not base_url:
        raise UsageError(f"{path}: the journal does not name its server")
    # the run's own platform settings (tokens file, token store...) come from its manifest
    manifest = RunDir.open(run_dir).read_manifest()
    settings = {k: v for k, v in (manifest.get("scenario", {}).get("platform") or {}).items() if k != "name"}
    settings.update(base_url=base_url, max_ratelimit_wait=max_wait)
    platform = MastodonPlatform(MastodonConfig(**settings), run_dir=str(run_dir), base_dir=manifest.get("base_dir", "."))
    try:
        accounts = platform.journal.accounts()
        tokens = {}
        for agent, account in accounts.items():
            token = platform.credentials.token_for(agent, account["index"]) if platform.credentials.configured else None
            if token is None and platform.store is not None:
                token = platform.store.tokens.get(agent)
            if token is not None:
                tokens[agent] = token
        done: Counter = Counter()
        for row in reversed(platform.journal.successful()):
            step = _undo(row, keep_follows)
            if step is None:
                continue
            what, call = step
            token = tokens.get(row.agent_id)
            if token is None:
                done["no token"] += 1
                continue
            if not dry_run:
                try:
                    platform.transport.call(token, call, f"{what} for {row.agent_id}")
                except RemoteError as exc:
                    if exc.transient or exc.fatal:  # the server is gone or refuses the token: no use going on
                        raise RunStopped(f"cleanup stopped after undoing {sum(done.values())} writes: mastodon server "
                                         f"{base_url}: {exc}; run `townsquare mastodon cleanup {run_dir}` again") from None
                    if exc.status not in (404, 410):
                        echo(f"could not undo round {row.round} #{row.position} ({row.kind} by {row.agent_id}): {exc}")
                        done["failed"] += 1
                        continue
            done[what] += 1
        if not dry_run:
            platform.journal.set_meta("cleaned", "1")
        verb = "would undo" if dry_run else "undid"
        echo(f"{verb}: " + (", ".join(f"{n} {what}" for what, n in sorted(done.items())) or "nothing"))
        if accounts:
            echo("accounts remain; an admin removes them with: "
                 + "; ".join(f"tootctl accounts delete {a['username']}" for a in accounts.values()))
        return done
    finally:
        platform.transport.close()
        platform.journal.close()


def _undo(row: Any, keep_follows: bool) -> tuple[str, Callable[[Any], Any]] | None:
    target = row.remote_id or row.target_remote
    if row.kind in ("post", "comment"):
        return "statuses deleted", lambda c: c.status_delete(row.remote_id)
    if row.kind == "reblog":
        return "reblogs undone", lambda c: c.status_unreblog(row.target_remote)
    if row.kind == "like":
        return "favourites undone", lambda c: c.status_unfavourite(target)
    if row.kind == "follow" and not keep_follows:
        return "follows undone", lambda c: c.account_unfollow(target)
    return None


def register(cli: Any) -> None:
    import click

    from townsquare.cli import common_options

    @cli.group("mastodon")
    def mastodon_group() -> None:
        """Commands of the Mastodon platform."""

    @mastodon_group.command("cleanup")
    @click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
    @click.option("--dry-run", is_flag=True, help="Count what would be undone; change nothing.")
    @click.option("--keep-follows", is_flag=True, help="Leave the run's follows in place.")
    @click.option("--max-wait", type=float, default=1800.0, show_default=True, help="Longest wait for a rate limit, in seconds.")
    @common_options
    def cleanup_command(run_dir: str, dry_run: bool, keep_follows: bool, max_wait: float, **_: Any) -> None:
        """Delete a run's posts and undo its reblogs, favourites and follows on the server."""
        cleanup(run_dir, dry_run=dry_run, keep_follows=keep_follows, max_wait=max_wait, echo=click.echo)
