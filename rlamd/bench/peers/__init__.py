"""The peers the bench ships, registered when ``rlamd.bench`` is imported. Adding one:
``NAME.py`` with a ``PEER`` satisfying :class:`rlamd.bench.peer.Peer`, listed here."""

from rlamd.bench.peer import register

from . import rllib, samplefactory, sb3, torchrl

SHIPPED = tuple(register(m.PEER) for m in (sb3, rllib, samplefactory, torchrl))
