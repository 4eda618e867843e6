"""Every agent's random numbers: one generator per agent per round, derived from the run's
seed, the agent's index and the round.

An agent's ``rng`` (:attr:`townsquare.components.Agent.rng`) is a view: in round ``r`` it is
a numpy ``Generator`` (PCG64) seeded with four consecutive outputs of a SplitMix64 stream
(Steele, Lea & Flood 2014, the seeding Vigna recommends for his generators) keyed on
``(seed, r)``, at the agent's own position. The generator is made the first time the agent
draws in the round and dropped when the next round starts. Whether an agent is active in a
round (:mod:`townsquare.activity`) is one more SplitMix64 output per agent, from a stream of its
own, so a whole population's activity is one numpy pass (:meth:`RandomStreams.activity_uniforms`)
and takes nothing from the agent's generator.

What this buys:

* **No generator state to keep.** A checkpoint holds no agent generator (a million of them
  were a third of a checkpoint's time), a Ray shard needs none sent, and a resume, a branch or
  another process draws the same numbers from the seed alone.
* **Common random numbers.** An agent's draws in round ``r`` do not depend on how many numbers it
  drew before. Two variants of a study (``townsquare ablate``, a ``branch`` with an
  intervention) give every agent the same activity and the same draws wherever their histories
  agree, so their difference is the intervention's, not the generator's drift (the variance
  reduction of common random numbers; Law, *Simulation Modeling and Analysis*, §11.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.random.bit_generator import ISeedSequence

#: SplitMix64's increment (the golden ratio in 64 bits) and its output function's constants
GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
#: stream domains: one key per (seed, round, purpose)
GENERATOR, ACTIVITY = 1, 2
_U64 = (1 << 64) - 1


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on a ``uint64`` array (wrapping arithmetic): a bijection
    whose every output bit depends on every input bit."""
    x = np.asarray(x, dtype=np.uint64).copy()
    x ^= x >> np.uint64(30)
    x *= np.uint64(_M1)
    x ^= x >> np.uint64(27)
    x *= np.uint64(_M2)
    x ^= x >> np.uint64(31)
    return x


def _mix_int(x: int) -> int:
    """:func:`mix64` on one Python int."""
    x &= _U64
    x = ((x ^ (x >> 30)) * _M1) & _U64
    x = ((x ^ (x >> 27)) * _M2) & _U64
    return x ^ (x >> 31)


def stream_key(seed: int, round: int, domain: int) -> int:
    """The SplitMix64 state that starts ``domain``'s stream of ``round`` in a run of ``seed``."""
    return _mix_int(_mix_int(_mix_int(seed) + domain * GOLDEN) + (round + 1) * GOLDEN)


def splitmix64(key: int, positions: np.ndarray) -> np.ndarray:
    """Outputs ``positions`` (0-based) of the SplitMix64 stream whose state starts at ``key``."""
    steps = (np.asarray(positions, dtype=np.uint64) + np.uint64(1)) * np.uint64(GOLDEN)
    return mix64(steps + np.uint64(key))


def uniforms(words: np.ndarray) -> np.ndarray:
    """Doubles in [0, 1) from 64-bit words, as numpy's ``random()`` makes them (the top 53 bits)."""
    return (words >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


class _Words(ISeedSequence):
    """A seed sequence that hands PCG64 given words (numpy's ``SeedSequence`` costs ~7 us per
    generator; a round may need a million)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray):
        self.words = words

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        data = self.words.view(np.uint32) if np.dtype(dtype) == np.uint32 else self.words
        if n_words > len(data):
            raise ValueError(f"an agent's generator is seeded with {len(data)} words, {n_words} were asked for")
        return data[:n_words].copy()


class RandomStreams:
    """A run's agent random numbers (see the module docstring). :meth:`start_round` moves every
    agent to the next round's generator; :meth:`generator` is agent ``index``'s current one."""

    def __init__(self, seed: int, agents: int):
        self.seed = int(seed)
        self.agents = int(agents)
        self.round = -1
        self._generators: dict[int, np.random.Generator] = {}
        self._words: np.ndarray | None = None
        self._activity: tuple[int, np.ndarray] | None = None

    def start_round(self, round: int) -> None:
        if round != self.round:
            self.round = round
            self._generators.clear()
            self._words = None

    def generator(self, index: int) -> np.random.Generator:
        """Agent ``index``'s generator in the current round (made on first use)."""
        generator = self._generators.get(index)
        if generator is None:
            if not 0 <= index < self.agents:
                raise IndexError(f"agent index {index} is not among the run's {self.agents} agents")
            if self._words is None:  # every agent's seed words of the round in one pass
                key = stream_key(self.seed, self.round, GENERATOR)
                self._words = splitmix64(key, np.arange(4 * self.agents, dtype=np.uint64)).reshape(self.agents, 4)
            generator = self._generators[index] = np.random.Generator(np.random.PCG64(_Words(self._words[index])))
        return generator

    def activity_uniforms(self, round: int) -> np.ndarray:
        """One uniform in [0, 1) per agent (by index) for ``round``'s activity draw."""
        if self._activity is None or self._activity[0] != round:
            key = stream_key(self.seed, round, ACTIVITY)
            self._activity = (round, uniforms(splitmix64(key, np.arange(self.agents, dtype=np.uint64))))
        return self._activity[1]

    def view(self, index: int) -> "AgentRandom":
        return AgentRandom(self, index)


class AgentRandom:
    """One agent's ``rng``: every attribute is its current round's generator's
    (``rng.random()``, ``rng.integers(...)``, ``rng.choice(...)``...)."""

    __slots__ = ("_streams", "_index")

    def __init__(self, streams: RandomStreams, index: int):
        self._streams = streams
        self._index = index

    def __getattr__(self, name: str) -> Any:
        return getattr(self._streams.generator(self._index), name)

    def __repr__(self) -> str:
        return f"AgentRandom(agent index {self._index}, round {self._streams.round})"
