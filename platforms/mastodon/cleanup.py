"""``townsquare mastodon cleanup RUN_DIR``: undo on the server what a run did there.

From the run's journal (every write the server accepted, with its Mastodon id) it deletes
the run's posts and replies, takes back its reblogs and favourites and, unless
``--keep-follows``, its follows; newest first, each with its own account's token (from the
tokens file or the token store, as during the run). The accounts stay: an admin removes
them with ``tootctl accounts delete USERNAME`` (the command lists them), which also removes
anything left. The run directory is not changed, so the study's record survives (the
journal notes what was cleaned).

Orphans, the accounts a sign-up made that the run could not use (the server's answer was lost
and it allows no password login; the journal lists them), are removed through Mastodon's admin
API (suspend, then delete) where the server allows it: with an admin's token
(``--admin-token-env VAR``), else with one of the run's own tokens (a test server such as
mastodon-mock lets any account do it; a real one answers 403). Those it cannot remove are
listed with their ``tootctl accounts delete`` line.

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

from townsquare.api import RunStopped, UsageError
from townsquare.lib.secret_files import resolve_secrets

from .client import RemoteError
from .journal import JOURNAL_NAME, Journal


def cleanup(run_dir: str | Path, *, dry_run: bool = False, keep_follows: bool = False, max_wait: float = 1800.0,
            echo: Callable[[str], None] = print, admin_token_env: str | None = None) -> Counter:
    """Undo the run's writes; returns counts by what was undone (or would be, with ``dry_run``)."""
    from townsquare.api.commands import open_run

    from .config import MastodonConfig
    from .connection import open_connection

    path = Path(run_dir) / JOURNAL_NAME
    if not path.exists():
        raise UsageError(f"{run_dir}: no {JOURNAL_NAME}: not a run on a Mastodon server")
    journal = Journal(path)
    base_url = journal.meta("base_url")
    journal.close()
    if not base_url:
        raise UsageError(f"{path}: the journal does not name its server")
    # the run's own platform settings (tokens file, token store...) come from its manifest
    manifest = open_run(run_dir).read_manifest()
    settings = {k: v for k, v in (manifest.get("scenario", {}).get("platform") or {}).items() if k != "name"}
    settings.update(base_url=base_url, max_ratelimit_wait=max_wait)
    conn = open_connection(MastodonConfig(**settings), run_dir=str(run_dir), base_dir=manifest.get("base_dir", "."))
    try:
        accounts = conn.journal.accounts()
        tokens = {}
        for agent, account in accounts.items():
            token = conn.credentials.token_for(agent, account["index"]) if conn.credentials.configured else None
            if token is None and conn.store is not None:
                token = conn.store.tokens.get(agent)
            if token is not None:
                tokens[agent] = token
        done: Counter = Counter()
        for row in reversed(conn.journal.successful()):
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
                    conn.transport.call(token, call, f"{what} for {row.agent_id}")
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
            conn.journal.set_meta("cleaned", "1")
        verb = "would undo" if dry_run else "undid"
        echo(f"{verb}: " + (", ".join(f"{n} {what}" for what, n in sorted(done.items())) or "nothing"))
        if accounts:
            echo("accounts remain; an admin removes them with: "
                 + "; ".join(f"tootctl accounts delete {a['username']}" for a in accounts.values()))
        admin = resolve_secrets(env=admin_token_env, what="Mastodon admin token")[0] if admin_token_env else None
        done.update(remove_orphans(conn, admin or next(iter(tokens.values()), None), dry_run, echo, run_dir))
        return done
    finally:
        conn.close()


def remove_orphans(conn: Any, token: str | None, dry_run: bool, echo: Callable[[str], None], run_dir: Any) -> Counter:
    """Suspend and delete, through the admin API, each orphaned account the journal lists;
    what the server does not allow is listed for an admin (see the module docstring)."""
    orphans = conn.journal.orphans()
    done: Counter = Counter()
    if not orphans:
        return done
    if dry_run or token is None:
        echo(f"{'would remove' if dry_run else 'cannot remove (no token)'} {len(orphans)} orphaned accounts: "
             + ", ".join(o["username"] for o in orphans))
        return done
    left = []
    for orphan in orphans:
        name = orphan["username"]
        try:
            account = conn.transport.call(token, lambda c: c.account_lookup(name), f"look up the orphaned account {name}")
            conn.transport.call(token, lambda c: c.admin_account_moderate(account["id"], action="suspend"), f"suspend {name}")
            conn.transport.call(token, lambda c: c.admin_account_delete(account["id"]), f"delete {name}")
        except RemoteError as exc:
            if exc.transient:
                raise RunStopped(f"cleanup stopped: mastodon server {conn.config.base_url}: {exc}; run "
                                 f"`townsquare mastodon cleanup {run_dir}` again") from None
            if exc.status not in (404, 410):  # 404: gone already
                left.append(name)
                continue
        conn.journal.orphan_removed(name)
        done["orphaned accounts removed"] += 1
    echo(f"removed {done['orphaned accounts removed']} of {len(orphans)} orphaned accounts")
    if left:
        echo("the server does not let this token remove orphaned accounts; an admin removes them with: "
             + "; ".join(f"tootctl accounts delete {name}" for name in left))
    return done


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

    from townsquare.api.commands import common_options

    @cli.group("mastodon")
    def mastodon_group() -> None:
        """Commands of the Mastodon platform."""

    @mastodon_group.command("cleanup")
    @click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
    @click.option("--dry-run", is_flag=True, help="Count what would be undone; change nothing.")
    @click.option("--keep-follows", is_flag=True, help="Leave the run's follows in place.")
    @click.option("--max-wait", type=float, default=1800.0, show_default=True, help="Longest wait for a rate limit, in seconds.")
    @click.option("--admin-token-env", default=None, metavar="VAR",
                  help="An admin's access token in environment variable VAR, to remove orphaned sign-up accounts.")
    @common_options
    def cleanup_command(run_dir: str, dry_run: bool, keep_follows: bool, max_wait: float, admin_token_env: str | None, **_: Any) -> None:
        """Delete a run's posts, undo its reblogs, favourites and follows, and remove its orphaned accounts."""
        cleanup(run_dir, dry_run=dry_run, keep_follows=keep_follows, max_wait=max_wait, echo=click.echo,
                admin_token_env=admin_token_env)
