"""A counting semaphore for the per-call path of the LLM links: ``async with limiter:``.

It keeps :class:`asyncio.Semaphore`'s contract (at most ``size`` holders; waiters served in
the order they came; a cancelled waiter takes no place and loses none) without its cost per
call: on Python 3.11 every ``acquire`` scans the waiters, and ``async with`` goes through two
more coroutines. At 2,560 calls a second (``benchmarks/scale.py --p1``, an LLM-bound round) the two semaphores a
call passes were 3 % of the client's CPU.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Limiter:
    """At most ``size`` holders at once; the others wait in order."""

    __slots__ = ("free", "_waiters")

    def __init__(self, size: int):
        self.free = size
        self._waiters: deque[asyncio.Future] = deque()

    async def __aenter__(self) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # a release hands its place over: ``free`` stays as it is
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a place, then cancelled: pass it on
                self._release()
            else:
                self._waiters.remove(waiter)
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
