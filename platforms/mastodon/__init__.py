"""The Mastodon platform (a package): the kernel's platform protocol over a real Mastodon server.

See :mod:`.platform` for the pieces; ``docs/mastodon.md`` for running a study on your own instance.
"""

from .platform import MastodonConfig, MastodonPlatform, RemoteError, build_mastodon, townsquare_register_commands, townsquare_register_platforms

__all__ = ["MastodonConfig", "MastodonPlatform", "RemoteError", "build_mastodon"]
