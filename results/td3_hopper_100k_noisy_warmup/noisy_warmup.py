"""An experiment, not a feature: ``python -m rlamd.train`` with TD3's warm-up actions made
as SB3 2.9.2 makes them. Before ``learning_starts`` SB3 samples the action box uniformly,
then (when the algorithm has acting noise, as the RL Zoo's TD3 does) adds that noise and
clips to the box (``OffPolicyAlgorithm._sample_action``), so about 4% of the warm-up
action entries sit on the box's edges; rlamd's warm-up actions are uniform, with none
there. This replaces :meth:`rlamd.agents.td3.TD3.act` by one whose uniform actions get
the same Gaussian draw the policy's action gets, then the clip (one draw serves both,
since only one of the two is kept); the arguments are rlamd.train's.

    taskset -c 0 .venv/bin/python results/td3_hopper_100k_noisy_warmup/noisy_warmup.py \
        --config results/td3_hopper_100k_parity/seed1/rlamd/config.toml --set train.seed=1 ...
"""

import runpy
import sys

import torch

from rlamd.agents.td3 import TD3


@torch.no_grad()
def act(self, obs: torch.Tensor, random_share: float | torch.Tensor = 0.0) -> torch.Tensor:
    """TD3's acting, with the noise and clip applied to the uniform actions too."""
    n, d = obs.shape[0], self.action_size
    scale = self.actor.bounds.scale
    with self.precision.autocast():
        mu = self.actor(obs).float()
    noise = torch.randn((n, d), generator=self.generator, device=self.device)
    noise = noise * (self.cfg.exploration_noise * scale)
    uniform = torch.rand((n, d), generator=self.generator, device=self.device) * 2 - 1
    explore = torch.rand((n, 1), generator=self.generator, device=self.device) < random_share
    return self._clip(torch.where(explore, self.actor.bounds(uniform), mu) + noise)


TD3.act = act
sys.argv = ["rlamd.train", *sys.argv[1:]]
runpy.run_module("rlamd.train", run_name="__main__")
