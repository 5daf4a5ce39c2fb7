"""Which episodes an evaluation counts, and what it does to the mean: a measurement.

An evaluation of 10 episodes on 8 envs used to count the first 10 episodes to finish (at
most 2 begun per env). Short episodes finish first, so the 2 second episodes it counted
were the short ones of the envs that had failed early. Since this folder's commit each env
plays a quota fixed before play (``rlamd.evaluate.episode_quota``: envs 6 and 7 two, the
others one), as SB3's ``evaluate_policy`` splits them.

For each checkpoint given this script plays the policy's mean action on 8 envs long enough
that every env ends 2 episodes, 10 times from different reset seeds, and takes from the
same play both selections; then 100 episodes one after another on one env, the reference
that no selection touches. It prints each mean and the two rules' gaps from the reference.

    .venv/bin/python results/eval_quota/measure.py RUN/checkpoint.pt [...] > output.txt

``output.txt`` (2026-12-07): the six TD3 Hopper-v5 policies of
``results/td3_hopper_100k_noisy_warmup`` at 100k steps (their checkpoints, not kept). Five
play one kind of episode and both rules read them within 3%; seed 3 falls early in some
episodes and runs far in others, and the first 10 to end read it 16% low (1,312 against
1,556), the quota 1% low.
"""

import statistics
import sys

import numpy as np
import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.checkpoint import load_checkpoint
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.envs import make_env
from rlamd.evaluate import episode_quota, evaluate_episodes

CPU = torch.device("cpu")
EPISODES, ENVS, PLAYS = 10, 8, 10


def episodes_ended(policy, cfg: RunConfig, seed: int) -> list[tuple[int, int, float]]:
    """``(env, its episode number, score)`` in the order the episodes ended, until every
    env has ended two."""
    env = make_env(cfg.train.env, num_envs=ENVS, env_cfg=cfg.env)
    collector, ended = Collector(env, CPU, seed), []
    count = np.zeros(ENVS, dtype=np.int64)
    try:
        while count.min() < 2:
            _, _, s = collector.step(policy)
            for i in np.flatnonzero(s.done):
                ended.append((int(i), int(count[i]), float(s.episode_return[i])))
                count[i] += 1
    finally:
        collector.close()
    return ended


def first_to_finish(ended: list[tuple[int, int, float]]) -> list[float]:
    """The former rule: the first 10 to end, of the first 2 begun on each env."""
    return [score for _, k, score in ended if k < 2][:EPISODES]


def by_quota(ended: list[tuple[int, int, float]]) -> list[float]:
    quota = episode_quota(EPISODES, ENVS)
    return [score for i, k, score in ended if k < quota[i]]


def main() -> None:
    torch.set_num_threads(1)
    print(f"{'checkpoint':<40} {'first 10 to end':>16} {'quota':>8} {'reference':>10}")
    gaps: dict[str, list[float]] = {"first 10 to end": [], "quota": []}
    for path in sys.argv[1:]:
        state = load_checkpoint(path, advice="give another checkpoint")
        cfg = RunConfig.from_dict(state["config"])
        agent = build_agent(cfg, CPU, agent_state=state["agent"])
        policy = get_algorithm(cfg.train.algo).policy(agent, cfg, 0.0)
        plays = [episodes_ended(policy, cfg, 777 + 100 * k) for k in range(PLAYS)]
        old = statistics.mean(statistics.mean(first_to_finish(p)) for p in plays)
        new = statistics.mean(statistics.mean(by_quota(p)) for p in plays)
        ref = statistics.mean(
            evaluate_episodes(policy, cfg.train.env, 100, device=CPU, seed=5555, num_envs=1).scores
        )
        print(f"{path[-40:]:<40} {old:>16.0f} {new:>8.0f} {ref:>10.0f}")
        gaps["first 10 to end"].append(old / ref - 1)
        gaps["quota"].append(new / ref - 1)
    for rule, g in gaps.items():
        print(
            f"{rule}: mean gap from the reference {100 * statistics.mean(g):+.1f}%, "
            f"range {100 * min(g):+.1f}% to {100 * max(g):+.1f}%"
        )


if __name__ == "__main__":
    main()
