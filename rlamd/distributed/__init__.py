"""Distributed training on Ray (``python -m rlamd.train ENV --ray``).

``config`` (the ``[ray]`` settings), ``sync`` (gradient all-reduce over
torch.distributed) and ``roles`` (rollout worker and learner) import without Ray;
``driver`` places them on a cluster and needs ``pip install -e .[ray]``.
"""

from .config import ClusterFitError, LearnerFailed, RayConfig, RunFailed, WorkersFailed

__all__ = ["ClusterFitError", "LearnerFailed", "RayConfig", "RunFailed", "WorkersFailed"]
