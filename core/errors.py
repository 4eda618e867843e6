"""Errors the CLI turns into one line and an exit status.

Every error a user can cause (a bad scenario, an unknown component, a broken plugin) is a
`UsageError`: its message is one line that names the file, key or plugin at fault. The CLI
prints it without a traceback and exits with status 2 (``--debug`` shows the traceback).
"""

from __future__ import annotations


class TownsquareError(Exception):
    """Base class for errors raised by townsquare."""


class UsageError(TownsquareError):
    """Bad input from the user: printed as one line, exit status 2."""

    exit_code = 2


class ScenarioError(UsageError):
    """A scenario file or override is malformed. The message names the file and key."""

    def __init__(self, source: str, key: str, problem: str):
        self.source, self.key, self.problem = source, key, problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


class PluginError(UsageError):
    """A plugin failed to import or register, or two plugins clash."""


class ComponentError(UsageError):
    """A component was asked for that no enabled plugin provides."""


class RunStopped(TownsquareError):
    """A run stopped cleanly before its last round (a budget was reached, say).

    The run directory holds a checkpoint at the last finished round; ``townsquare resume``
    continues from it. ``reason`` is shown to the user.
    """

    exit_code = 3

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)
