"""Continuous-action PPO through the Ray roles, without Ray: float action rows from a
rollout worker, a learner that learns from them, and observation statistics that travel
with the weights and agree between learners."""

from __future__ import annotations

import pytest
import torch

from rlamd.config.sections import RunConfig
from rlamd.distributed.sync import run_group

from .helpers import share


def continuous_cfg() -> RunConfig:
    return RunConfig.from_dict(
        {
            "train": {"env": "Pendulum-v1", "algo": "ppo", "precision": "fp32", "device": "cpu"},
            "ppo": {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2, "norm_obs": True},
            "ray": {"envs_per_worker": 2},
        }
    )


def test_worker_rows_carry_float_actions_and_weights_carry_the_statistics():
    from rlamd.distributed.roles import Learner, RolloutWorker

    cfg = continuous_cfg()
    worker, learner = RolloutWorker(cfg, 0), Learner(cfg, 0, 1, "cpu")
    rows, info = worker.collect(None, 0, 32)
    assert rows.actions.shape == (64, 1) and rows.actions.dtype == torch.float32
    assert info.env_steps == 64
    learner.feed(rows, 0)
    learner.step(0.0)
    weights = learner.weights()
    assert float(weights["obs_norm.count"]) == 64 and "log_std" in weights
    torch.testing.assert_close(weights["obs_norm.mean"], rows.obs.double().mean(0))
    worker.set_weights(weights, 1)
    assert float(worker.agent.net.obs_norm.count) == 64
    worker.close()


def observe_share(rank: int, world: int, rows) -> dict[str, torch.Tensor]:
    """In a gloo group: a learner learns from its share; returns its statistics."""
    from rlamd.distributed.roles import Learner
    from rlamd.distributed.sync import GradSync

    learner = Learner(continuous_cfg(), rank, world, "cpu")
    if world > 1:
        learner.attach(GradSync())
    learner.feed(share(rows, rank, world), 0)
    learner.step(0.0)
    norm = learner.agent.net.obs_norm
    return {"mean": norm.mean.clone(), "var": norm.var.clone(), "count": norm.count.clone()}


@pytest.mark.slow
def test_two_learners_keep_the_statistics_of_all_rows():
    from rlamd.distributed.roles import RolloutWorker

    worker = RolloutWorker(continuous_cfg(), 0)
    rows, _ = worker.collect(None, 0, 32)
    worker.close()
    two = run_group(observe_share, 2, rows)
    torch.testing.assert_close(two[0], two[1])
    whole = torch.cat([share(rows, r, 2).obs for r in range(2)]).double()
    torch.testing.assert_close(two[0]["mean"], whole.mean(0))
    torch.testing.assert_close(two[0]["var"], whole.var(0, unbiased=False))
    assert float(two[0]["count"]) == whole.shape[0]
