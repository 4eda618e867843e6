"""Test plugin: SIGKILLs its own process at a chosen point of a chosen round.

KILL_AT_ROUND=R and KILL_DURING=llm|action: dies at the 3rd LLM call or the 3rd applied action
of round R, i.e. in the middle of agent steps or of the apply phase. Inactive without the env var.
"""

import os
import signal

from townsquare import hookimpl

_seen = {"llm": 0, "action": 0}


def _maybe_die(point: str, round: int) -> None:
    if os.environ.get("KILL_DURING") != point or str(round) != os.environ.get("KILL_AT_ROUND"):
        return
    _seen[point] += 1
    if _seen[point] == 3:
        os.kill(os.getpid(), signal.SIGKILL)


@hookimpl
def townsquare_on_llm_call(call):
    _maybe_die("llm", call.round)


@hookimpl
def townsquare_on_action_applied(round):
    _maybe_die("action", round)
