"""Shared cases for the distributed tests: fixed batches, and a learner run on a share."""

from __future__ import annotations

import torch

from rlamd.agents.ppo import PPORows
from rlamd.config.sections import RunConfig
from rlamd.replay import ReplayBatch


def sections(algo: str, **ray: object) -> RunConfig:
    """CartPole, fp32 on the CPU, settings small enough for a test."""
    return RunConfig.from_dict(
        {
            "train": {
                "env": "cartpole",
                "algo": algo,
                "precision": "fp32",
                "device": "cpu",
                "seed": 3,
            },
            "dqn": {
                "buffer_size": 2_000,
                "batch_size": 64,
                "target_update_interval": 2,
                "lr": 1e-3,
            },
            "ppo": {"num_minibatches": 1, "update_epochs": 3, "lr": 1e-3},
            "ray": ray,
        }
    )


def dqn_batch(seed: int, n: int = 64) -> ReplayBatch:
    g = torch.Generator().manual_seed(seed)
    return ReplayBatch(
        obs=torch.randn(n, 4, generator=g),
        actions=torch.randint(0, 2, (n,), generator=g),
        returns=torch.randn(n, generator=g),
        next_obs=torch.randn(n, 4, generator=g),
        discounts=torch.rand(n, generator=g),
        weights=0.2
        + 0.8 * torch.rand(n, generator=g),  # unequal: the max is taken over all learners
        indices=torch.arange(n),
    )


def ppo_rows(seed: int, n: int = 256) -> PPORows:
    g = torch.Generator().manual_seed(seed)
    return PPORows(
        obs=torch.randn(n, 4, generator=g),
        actions=torch.randint(0, 2, (n,), generator=g),
        logprobs=-0.2 - torch.rand(n, generator=g),
        values=torch.randn(n, generator=g),
        advantages=3.0 + 2.0 * torch.randn(n, generator=g),  # normalised over all learners' rows
        returns=torch.randn(n, generator=g),
    )


def share(x, rank: int, world: int):
    """Rank ``rank``'s equal share of a batch (every tensor split by rows)."""
    if isinstance(x, tuple):
        return type(x)(*(share(v, rank, world) for v in x))
    n = x.shape[0] // world
    return x[rank * n : (rank + 1) * n]


def parameters_vector(learner) -> torch.Tensor:
    """A learner's parameters, flattened, on the CPU (to compare learners)."""
    return torch.cat([p.detach().reshape(-1).cpu() for p in learner.agent.params])


def train_share(learner, algo: str, rank: int, world: int) -> torch.Tensor:
    """Three DQN updates (or one PPO iteration of 3 epochs) on this learner's share."""
    if algo == "dqn":
        for i in range(3):
            learner.agent.update_on(share(dqn_batch(i), rank, world))
    else:
        learner.feed(share(ppo_rows(0), rank, world), 0)
        learner.step(0.0)
    return parameters_vector(learner)


def group_member(rank: int, world: int, algo: str) -> torch.Tensor:
    """In a process of a gloo group (``run_group``): a learner trained on its share."""
    from rlamd.distributed.roles import Learner
    from rlamd.distributed.sync import GradSync

    learner = Learner(sections(algo), rank, world, "cpu", num_streams=2)
    learner.attach(GradSync())
    return train_share(learner, algo, rank, world)


def whole_batch(algo: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One learner, no process group, on the whole batch: (parameters before, after)."""
    from rlamd.distributed.roles import Learner

    learner = Learner(sections(algo), 0, 1, "cpu", num_streams=2)
    return parameters_vector(learner), train_share(learner, algo, 0, 1)
