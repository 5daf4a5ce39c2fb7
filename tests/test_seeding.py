"""One run seed, independent streams: the initial weights (torch's global generator seeded
with the run seed), an agent's acting and update noise, and the replay's sampler must not
draw the same numbers, and Ray rollout workers must not explore alike."""

from __future__ import annotations

import pytest
import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.envs import make_env
from rlamd.seeding import stream_seed

SEED = 7
CPU = torch.device("cpu")


def _draws(generator: torch.Generator, n: int = 64) -> torch.Tensor:
    return torch.rand(n, generator=generator)


def _global_stream(seed: int) -> torch.Tensor:
    """What torch's global generator, seeded with the run seed, draws first: the initial
    weights come from it."""
    return _draws(torch.Generator().manual_seed(seed))


def _assert_all_differ(draws: dict) -> None:
    keys = list(draws)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert not torch.equal(draws[a], draws[b]), f"{a} and {b} draw the same numbers"


def test_stream_seeds_are_fixed_distinct_and_in_range():
    names = ["act", "learn", "replay"]
    seen = {stream_seed(s, n) for s in (0, 1, 2, 2**31 - 1, -5) for n in names}
    assert len(seen) == 15
    assert all(0 <= v < 2**63 for v in seen)
    assert stream_seed(SEED, "act") == stream_seed(SEED, "act")
    torch.Generator().manual_seed(max(seen))  # torch takes every value


def _loop(env_id: str, algo: str):
    cfg = RunConfig.from_dict(
        {
            "train": {"env": env_id, "algo": algo, "seed": SEED, "device": "cpu"},
            algo: {"buffer_size": 256, "learning_starts": 10**9},
        }
    )
    env = make_env(env_id, num_envs=1)
    torch.manual_seed(SEED)
    agent = build_agent(cfg, CPU, env)
    return get_algorithm(algo).local_loop(cfg, Collector(env, CPU, SEED), agent, 0, print)


@pytest.mark.parametrize(("env_id", "algo"), [("Pendulum-v1", "td3"), ("CartPole-v1", "dqn")])
def test_acting_and_replay_streams_differ_from_the_weights_and_each_other(env_id, algo):
    loop = _loop(env_id, algo)
    streams = {"weights": _global_stream(SEED), "act": _draws(loop.agent.generator)}
    streams["replay"] = _draws(loop.buffer.generator)
    if hasattr(loop.agent, "learn_generator"):
        streams["learn"] = _draws(loop.agent.learn_generator)
    _assert_all_differ(streams)
    loop.collector.env.close()


def test_td3_warm_up_actions_do_not_repeat_the_initial_weights():
    """The bug this guards: the warm-up's uniform actions were the first layer's weights,
    rescaled, when both generators started from the run seed."""
    loop = _loop("Pendulum-v1", "td3")
    actions = torch.cat([torch.as_tensor(loop.iterate()[0].actions).flatten() for _ in range(32)])
    # Back to the uniform draws in [0, 1) they were made from (Pendulum's box is [-2, 2]).
    uniform = (actions.double() / 2 + 1) / 2
    assert 0 <= float(uniform.min()) and float(uniform.max()) < 1
    weights = torch.sort(torch.rand(4096, generator=torch.Generator().manual_seed(SEED)))[0]
    # Nearest draw of the weights' stream to each (a chance match within 1e-6: about 1 in 120).
    i = torch.searchsorted(weights.double(), uniform).clamp(1, weights.numel() - 1)
    near = torch.minimum((weights[i] - uniform).abs(), (weights[i - 1] - uniform).abs())
    repeated = int((near < 1e-6).sum())
    assert repeated <= 2, (
        f"{repeated} of {uniform.numel()} warm-up draws repeat the weights' stream"
    )
    loop.collector.env.close()


def test_each_rollout_worker_explores_with_its_own_stream():
    from rlamd.distributed.roles import RolloutWorker

    cfg = RunConfig.from_dict(
        {
            "train": {"env": "CartPole-v1", "algo": "dqn", "seed": SEED, "device": "cpu"},
            "ray": {"envs_per_worker": 1},
        }
    )
    workers = [RolloutWorker(cfg, i) for i in range(3)]
    draws = [_draws(w.agent.generator) for w in workers]
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    again = RolloutWorker(cfg, 1)
    assert torch.equal(_draws(again.agent.generator), draws[1])  # still fixed by the seed
    for w in [*workers, again]:
        w.close()


def test_each_ray_learners_replay_shard_has_its_own_stream_across_seeds():
    """A shard's draws come from the run seed and its rank, so learner 1 of seed s does
    not sample as learner 0 of seed s + 1 (sweeps run consecutive seeds)."""
    from rlamd.algos.dqn_apex import ReplayShard

    env = make_env("CartPole-v1", num_envs=1)

    def shard(seed: int, rank: int) -> torch.Tensor:
        cfg = RunConfig.from_dict(
            {
                "train": {"env": "CartPole-v1", "algo": "dqn", "seed": seed, "device": "cpu"},
                "dqn": {"buffer_size": 512},
            }
        )
        torch.manual_seed(seed)
        agent = build_agent(cfg, CPU, env)
        return _draws(ReplayShard(cfg, agent, env, rank, 2, 1, print).replay.generator)

    draws = {(s, r): shard(s, r) for s in (SEED, SEED + 1) for r in (0, 1)}
    assert torch.equal(shard(SEED, 1), draws[SEED, 1])  # fixed by seed and rank
    _assert_all_differ(draws)
    env.close()
