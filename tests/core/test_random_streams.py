"""Agents' random numbers (townsquare.random_streams): SplitMix64 as published, PCG64 seeded from
it, one generator per agent per round, and activity draws with the right frequencies."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.random.bit_generator import ISeedSequence

from townsquare.random_streams import ACTIVITY, GENERATOR, RandomStreams, mix64, splitmix64, stream_key, uniforms

MASK = (1 << 64) - 1


def reference_splitmix64(state: int, n: int) -> list[int]:
    """Steele, Lea & Flood's SplitMix64 (as in Vigna's splitmix64.c), one Python int at a time."""
    out = []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def test_splitmix64_matches_the_reference_and_its_published_first_output():
    assert reference_splitmix64(0, 1) == [0xE220A8397B1DCDAF]  # the published first output from seed 0
    for key in (0, 1, 12345, MASK, stream_key(7, 3, GENERATOR)):
        assert splitmix64(key, np.arange(50)).tolist() == reference_splitmix64(key, 50)
    assert mix64(np.array([0], dtype=np.uint64)).tolist() == [0]


def test_uniforms_take_the_top_53_bits_like_numpy():
    words = np.array([0, MASK, 1 << 63, 12345678901234567890], dtype=np.uint64)
    assert uniforms(words).tolist() == [(int(w) >> 11) * 2.0**-53 for w in words]
    assert uniforms(words).max() < 1.0


def test_an_agents_generator_is_pcg64_seeded_with_four_splitmix_words():
    streams = RandomStreams(seed=7, agents=10)
    streams.start_round(4)
    words = reference_splitmix64(stream_key(7, 4, GENERATOR), 4 * 10)[4 * 3:4 * 3 + 4]  # agent 3's four

    class Fixed(ISeedSequence):
        def generate_state(self, n_words, dtype=np.uint32):
            assert (n_words, np.dtype(dtype)) == (4, np.uint64)  # what PCG64 asks for
            return np.array(words, dtype=np.uint64)

    expected = np.random.Generator(np.random.PCG64(Fixed()))
    generator = streams.generator(3)
    assert isinstance(generator.bit_generator, np.random.PCG64)
    assert generator.random(5).tolist() == expected.random(5).tolist()


def test_one_generator_per_agent_per_round_and_common_across_histories():
    one, other = RandomStreams(seed=3, agents=5), RandomStreams(seed=3, agents=5)
    one.start_round(0)
    first = one.generator(2).random(3)
    assert one.generator(2).random() != first[0]  # within a round the stream goes on
    assert not np.array_equal(one.generator(1).random(3), first)  # another agent, another stream
    one.start_round(1)
    one.generator(2).random(1000)  # however much an agent drew in round 1...
    one.start_round(2)
    other.start_round(2)
    assert one.generator(2).random(4).tolist() == other.generator(2).random(4).tolist()  # ...round 2 is the same
    assert RandomStreams(seed=4, agents=5).generator(2).random() != RandomStreams(seed=3, agents=5).generator(2).random()
    with pytest.raises(IndexError):
        one.generator(5)


def test_an_agents_view_reads_its_current_generator():
    streams = RandomStreams(seed=11, agents=3)
    view = streams.view(1)
    streams.start_round(6)
    drawn = view.random(2)
    again = RandomStreams(seed=11, agents=3)
    again.start_round(6)
    assert drawn.tolist() == again.generator(1).random(2).tolist()
    assert 0 <= view.integers(10) < 10 and "round 6" in repr(view)


def test_activity_uniforms_are_uniform_and_independent_of_the_generators():
    streams = RandomStreams(seed=5, agents=200_000)
    u = streams.activity_uniforms(3)
    assert u.shape == (200_000,) and 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs((u < 0.2).mean() - 0.2) < 0.005
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    assert abs(counts - 10_000).max() < 600  # each bin within ~6 standard deviations
    assert streams.activity_uniforms(3) is u  # one pass a round
    assert not np.array_equal(u, streams.activity_uniforms(4))
    assert stream_key(5, 3, ACTIVITY) != stream_key(5, 3, GENERATOR)
