"""One run seed, many independent random streams.

A run's seed fixes everything random in it: torch's global generator (the initial
weights), the env's resets, and the generators an agent or a replay keeps for itself
(acting, the noise of an update, the sampler's uniforms). Seeding each of those
generators with the run seed itself would make them draw the *same* numbers: a
uniform warm-up action would repeat the first layer's initial weights, and every
Ray rollout worker would explore with one sequence. :func:`stream_seed` gives each
named stream its own seed, derived from the run seed and the stream's name the way
NumPy's ``SeedSequence`` spawns children (a hash of both words, not a sum, so seeds
that differ by one give unrelated streams).
"""

from __future__ import annotations

import zlib

import numpy as np
import torch

__all__ = ["stream_generator", "stream_seed"]


def stream_seed(seed: int, name: str) -> int:
    """The seed of the stream ``name`` in a run seeded with ``seed``.

    The same ``(seed, name)`` always gives the same number, in ``[0, 2**63)`` (what
    ``torch.Generator.manual_seed`` and NumPy take); different names give independent
    streams.
    """
    words = [seed % 2**64, zlib.crc32(name.encode())]
    (value,) = np.random.SeedSequence(words).generate_state(1, dtype=np.uint64)
    return int(value) >> 1


def stream_generator(seed: int, name: str, device: torch.device) -> torch.Generator:
    """A generator on ``device`` seeded for the stream ``name`` (:func:`stream_seed`)."""
    return torch.Generator(device=device).manual_seed(stream_seed(seed, name))
