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

    def take(self) -> bool:
        """Take a place at once if one is free and nobody waits: the per-call path, with no
        coroutine (:meth:`wait` when it says False)."""
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def wait(self) -> None:
        """Wait in line for a place (after :meth:`take` said False)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # a release hands its place over: ``free`` stays as it is
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed a place, then cancelled: pass it on
                self.release()
            else:
                self._waiters.remove(waiter)
            raise

    async def __aenter__(self) -> None:
        if not self.take():
            await self.wait()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
