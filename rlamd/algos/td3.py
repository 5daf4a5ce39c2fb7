"""TD3 as an algorithm (``--algo td3``): its settings, presets and capture site, on the
off-policy machinery it shares with SAC (:mod:`rlamd.algos.continuous`); the update is
:mod:`rlamd.agents.td3`'s."""

from __future__ import annotations

from rlamd.agents.td3 import TD3, TD3Config

from .continuous import ContinuousQAlgorithm, capture_continuous, continuous_presets

__all__ = ["TD3_ALGORITHM", "TD3Algorithm", "capture_td3"]

# Box actions: the RL Zoo's TD3 for MuJoCo (DLR-RM/rl-baselines3-zoo hyperparams/td3.yml
# at d29756c4, "mujoco-defaults": 1M steps, 10k random steps, Gaussian noise 0.1,
# lr 1e-3, batch 256, [400, 300]), which are TD3Config's defaults. CleanRL's
# td3_continuous_action.py differs in lr 3e-4, 256-unit layers and 25k random steps.
PRESETS = continuous_presets("td3")


def capture_td3(agent: TD3, mode: str, log=None) -> TD3:
    """The one site where TD3's ``act`` and ``learn_step`` become CUDA/HIP graphs."""
    return capture_continuous(agent, mode, log)


class TD3Algorithm(ContinuousQAlgorithm):
    """TD3 (``--algo td3``): see :mod:`rlamd.agents.td3` for the update."""

    name = "td3"
    config = TD3Config
    agent_class = TD3
    presets = PRESETS


TD3_ALGORITHM = TD3Algorithm()
