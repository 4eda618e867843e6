"""The pluggy markers for townsquare: ``from townsquare import hookimpl``."""

import pluggy

PROJECT_NAME = "townsquare"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
