"""The peers the bench ships, one module each (``rlamd.bench`` registers them on import).

Adding one: write ``NAME.py`` with a ``PEER`` satisfying :class:`rlamd.bench.peer.Peer`
and add it to :data:`SHIPPED` (``docs/ARCHITECTURE.md``, the bench).
"""

from __future__ import annotations

from . import rllib, samplefactory, sb3, torchrl

SHIPPED = tuple(m.PEER for m in (sb3, rllib, samplefactory, torchrl))
