"""The peers the bench ships, one module each; importing this package registers them.

Adding one: write ``NAME.py`` with an object satisfying :class:`rlamd.bench.peer.Peer`
and add it to the line below (``docs/ARCHITECTURE.md``, the bench).
"""

from __future__ import annotations

from rlamd.bench.peer import register

from . import rllib, samplefactory, sb3, torchrl

for _module in (sb3, rllib, samplefactory, torchrl):
    register(_module.PEER)
