"""Installed peer libraries, loaded for side-by-side figures, or a reason they can't be.

A peer that is missing or cannot load is reported with the reason and never given a
figure (no numbers are invented or copied in its place).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

__all__ = ["PeerUnavailable", "rllib_ppo", "sb3", "torchrl_prioritized_sampler"]


class PeerUnavailable(RuntimeError):
    """A peer library is not installed, or its compiled parts do not load here."""


def _require(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install raising anything
        raise PeerUnavailable(
            f"{module} not importable ({exc.__class__.__name__}: {exc}); {extra}"
        ) from exc


def sb3() -> Any:
    """Stable-Baselines3, from the ``bench`` extra."""
    return _require("stable_baselines3", "install it with `bash scripts/setup.sh --bench`")


def rllib_ppo() -> Any:
    """RLlib's PPO, from the ``ray`` extra."""
    _require("ray.rllib.algorithms.ppo", "install it with `bash scripts/setup.sh --ray`")
    return _require("ray.rllib.algorithms.ppo", "")


def _build_torchrl_extension(torchrl_dir: Path) -> Any:
    """Compile the C++ segment trees that torchrl's wheel ships as sources (csrc/).

    torchrl 0.14.1's prebuilt extension is linked against another torch and fails to
    load with torch 2.13 (undefined symbol); its own sources build against ours.
    """
    from torch.utils.cpp_extension import load

    csrc = torchrl_dir / "csrc"
    sources = [csrc / "pybind.cpp", csrc / "utils.cpp"]
    if not all(s.exists() for s in sources):
        raise PeerUnavailable(
            f"torchrl's extension does not load and {csrc} has no sources to build"
        )
    cache = Path(os.environ.get("RLAMD_CACHE", Path.home() / ".cache" / "rlamd")) / "torchrl_ext"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        return load(
            name="_torchrl",
            sources=[str(s) for s in sources],
            extra_include_paths=[str(csrc)],
            build_directory=str(cache),
            verbose=False,
        )
    except Exception as exc:
        raise PeerUnavailable(f"building torchrl's segment tree from {csrc} failed: {exc}") from exc


def torchrl_prioritized_sampler(capacity: int, alpha: float, beta: float) -> Any:
    """TorchRL's ``PrioritizedSampler`` with its C++ sum/min trees."""
    torchrl = _require("torchrl", "`pip install torchrl` to compare against it")
    prio = importlib.import_module("torchrl.data.replay_buffers.samplers.prioritized")
    if prio.SumSegmentTreeFp32 is None:
        ext = _build_torchrl_extension(Path(torchrl.__file__).parent)
        for name in (
            "SumSegmentTreeFp32",
            "MinSegmentTreeFp32",
            "SumSegmentTreeFp64",
            "MinSegmentTreeFp64",
        ):
            setattr(prio, name, getattr(ext, name))
    return prio.PrioritizedSampler(capacity, alpha=alpha, beta=beta)


SB3_GYM_ID = "BreakoutNoFrameskip-v4"
"""The game SB3 plays in the benchmarks (its Atari wrappers, a stack of 4 frames)."""


def sb3_atari(
    algo: str, num_envs: int, device: str, *, batch: int = 32, warm: int = 0, per_update: int = 1
) -> Any:
    """An SB3 PPO or DQN on Breakout with rlamd's settings (one place for every suite).

    PPO: 128 steps x ``num_envs``, 4 epochs x 4 minibatches, lr 2.5e-4, clip 0.1 (CleanRL's
    Atari defaults, as rlamd's). DQN: replay 50k, ``batch``, ``per_update`` gradient steps
    per vector step, target sync every 250 updates, ``warm`` steps before learning.

    Raises:
        PeerUnavailable: SB3 (or its Atari support) cannot be imported.
    """
    module = sb3()
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(SB3_GYM_ID, n_envs=num_envs, seed=0), n_stack=4)
    common = {"device": device, "verbose": 0, "seed": 0}
    if algo == "ppo":
        model = module.PPO(
            "CnnPolicy",
            env,
            n_steps=128,
            n_epochs=4,
            batch_size=128 * num_envs // 4,
            learning_rate=2.5e-4,
            clip_range=0.1,
            ent_coef=0.01,
            vf_coef=0.5,
            max_grad_norm=0.5,
            gamma=0.99,
            gae_lambda=0.95,
            **common,
        )
    else:
        model = module.DQN(
            "CnnPolicy",
            env,
            buffer_size=50_000,
            learning_starts=warm,
            batch_size=batch,
            train_freq=1,
            gradient_steps=per_update,
            target_update_interval=250,
            **common,
        )
    # SB3's default logger makes a folder in the temp dir per learn() call; log nowhere.
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model
