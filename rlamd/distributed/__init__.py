"""Distributed training on Ray (``python -m rlamd.train ENV --ray``).

``plan`` (the layout plan and the errors; the ``[ray]`` settings are
``rlamd.config.sections.RayConfig``), ``sync`` (gradient all-reduce over torch.distributed)
and ``roles`` (rollout worker and learner) import without Ray; ``driver`` places them on a
cluster and needs Ray (``bash scripts/setup.sh --ray``).
"""

from .plan import ClusterFitError, LearnerFailed, RunFailed, WorkersFailed

__all__ = ["ClusterFitError", "LearnerFailed", "RunFailed", "WorkersFailed"]
