"""SAC as an algorithm (``--algo sac``): its settings, presets and capture site, on the
off-policy machinery it shares with TD3 (:mod:`rlamd.algos.continuous`); the update is
:mod:`rlamd.agents.sac`'s."""

from __future__ import annotations

from rlamd.agents.sac import SAC, SACConfig

from .continuous import ContinuousQAlgorithm, capture_continuous, continuous_presets

__all__ = ["SAC_ALGORITHM", "SACAlgorithm", "capture_sac"]

# Box actions: the RL Zoo's SAC for MuJoCo (DLR-RM/rl-baselines3-zoo hyperparams/sac.yml,
# "mujoco-defaults": SB3's defaults, 1M steps, 10k random steps first), which are
# SACConfig's defaults; CleanRL's sac_continuous_action.py differs in q_lr 1e-3,
# policy_frequency 2 (with as many actor steps at each, so not sac.policy_frequency=2) and
# 5k random steps. Pendulum-v1's Zoo entry: 20k steps, lr 1e-3,
# 100 random steps (--set sac.lr=1e-3 --set sac.learning_starts=100).
PRESETS = continuous_presets("sac")


def capture_sac(agent: SAC, mode: str, log=None) -> SAC:
    """The one site where SAC's ``act`` and ``learn_step`` become CUDA/HIP graphs."""
    return capture_continuous(agent, mode, log)


class SACAlgorithm(ContinuousQAlgorithm):
    """SAC (``--algo sac``): see :mod:`rlamd.agents.sac` for the update."""

    name = "sac"
    config = SACConfig
    agent_class = SAC
    presets = PRESETS


SAC_ALGORITHM = SACAlgorithm()
