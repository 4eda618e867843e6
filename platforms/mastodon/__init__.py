"""The Mastodon platform (a package): the kernel's platform protocol over a real Mastodon server.

A scenario switches to it with one line (``[platform] name = "mastodon"`` plus ``base_url``).
One :class:`.connection.Connection` (settings, transport, journal, tokens, local state, the
agents' accounts) is built per run and handed to the parts; none of them imports the platform:

- :mod:`.config`: the ``[platform]`` settings;
- :mod:`.connection`: the shared connection object;
- :mod:`.client`: Mastodon.py clients, thread pools, retries, rate limits;
- :mod:`.accounts`: tokens file / environment / API sign-up, and the token store;
- :mod:`.journal`: the exactly-once journal in the run directory;
- :mod:`.writes`: applying a round's actions (serial or parallel);
- :mod:`.feed`: timelines, ranking candidates, search, posts;
- :mod:`.profiles`: profiles, followers, following;
- :mod:`.state`: local ids and what is checkpointed;
- :mod:`.entities`: parsing Status / Account / Relationship;
- :mod:`.platform`: the platform protocol over the parts;
- :mod:`.cleanup`: ``townsquare mastodon cleanup RUN_DIR``.

See ``docs/mastodon.md`` for running a study on your own instance.
"""

from __future__ import annotations

from townsquare.api import PlatformSpec, hookimpl

from .client import RemoteError
from .config import MastodonConfig
from .platform import MastodonPlatform, build_mastodon


@hookimpl
def townsquare_register_platforms():
    return [
        PlatformSpec(
            "mastodon", build_mastodon, config_model=MastodonConfig, priority=0,
            description="a Mastodon server through Mastodon.py (pip install -e \".[mastodon]\")",
        )
    ]


@hookimpl
def townsquare_register_commands(cli):
    from .cleanup import register

    register(cli)


__all__ = ["MastodonConfig", "MastodonPlatform", "RemoteError", "build_mastodon"]
