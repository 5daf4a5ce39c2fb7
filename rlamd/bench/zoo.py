"""The peers' recipes for a race: each framework's own tuned hyperparameters, cited.

Stable-Baselines3 trains with the RL Baselines3 Zoo's hyperparameters (DLR-RM/
rl-baselines3-zoo, ``hyperparams/dqn.yml`` at commit ce95481b and ``hyperparams/ppo.yml``
at 208b6fdf): ``CartPole-v1`` has its own entries, and every Atari game shares the
``atari`` entry (``AtariWrapper``, 4 stacked frames, ``CnnPolicy``). ``lin_X`` in the Zoo
is a learning rate or clip range that falls linearly from X to 0 over the run. As the
Zoo does, ``optimize_memory_usage`` comes with ``handle_timeout_termination=False``
(SB3 refuses the pair otherwise).

RLlib (new API stack) trains CartPole with its own tuned examples (ray-project/ray,
``rllib/tuned_examples/ppo/cartpole_ppo.py`` and ``rllib/tuned_examples/dqn/
cartpole_dqn.py``); the race has no RLlib Atari recipe.

Each recipe also fixes the run's length in env steps (its schedules depend on it), the
Zoo's ``n_timesteps`` or the RLlib example's stopping step count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RLLIB", "SB3", "Recipe", "recipe"]

ZOO = "DLR-RM/rl-baselines3-zoo"
ZOO_DQN = f"{ZOO} hyperparams/dqn.yml (commit ce95481b)"
ZOO_PPO = f"{ZOO} hyperparams/ppo.yml (commit 208b6fdf)"


@dataclass(frozen=True)
class Recipe:
    """One peer's settings for one env family or task and one algorithm."""

    n_envs: int
    """Envs the peer steps together (its own default or the recipe's)."""
    steps: int
    """The run's length in env steps (the recipe's schedules are laid over it)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor settings, as the source writes them (``lin_X``: linear schedules)."""
    source: str = ""
    """Where the settings come from."""

    def to_dict(self) -> dict[str, Any]:
        return {"n_envs": self.n_envs, "steps": self.steps, **self.kwargs, "source": self.source}


SB3: dict[tuple[str, str], Recipe] = {
    ("CartPole-v1", "dqn"): Recipe(
        n_envs=1,
        steps=50_000,
        kwargs={
            "policy": "MlpPolicy",
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
        source=f"{ZOO_DQN}, CartPole-v1",
    ),
    ("CartPole-v1", "ppo"): Recipe(
        n_envs=8,
        steps=100_000,
        kwargs={
            "policy": "MlpPolicy",
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "learning_rate": "lin_0.001",
            "clip_range": "lin_0.2",
        },
        source=f"{ZOO_PPO}, CartPole-v1",
    ),
    ("atari", "dqn"): Recipe(
        n_envs=1,
        steps=10_000_000,
        kwargs={
            "policy": "CnnPolicy",
            "buffer_size": 10_000,
            "learning_rate": 1e-4,
            "batch_size": 32,
            "learning_starts": 100_000,
            "target_update_interval": 1000,
            "train_freq": 4,
            "gradient_steps": 1,
            "exploration_fraction": 0.1,
            "exploration_final_eps": 0.01,
            "optimize_memory_usage": True,
            "replay_buffer_kwargs": {"handle_timeout_termination": False},
        },
        source=f"{ZOO_DQN}, atari (AtariWrapper, 4 frames)",
    ),
    ("atari", "ppo"): Recipe(
        n_envs=8,
        steps=10_000_000,
        kwargs={
            "policy": "CnnPolicy",
            "n_steps": 128,
            "n_epochs": 4,
            "batch_size": 256,
            "learning_rate": "lin_2.5e-4",
            "clip_range": "lin_0.1",
            "vf_coef": 0.5,
            "ent_coef": 0.01,
        },
        source=f"{ZOO_PPO}, atari (AtariWrapper, 4 frames)",
    ),
}

_RAY = "ray-project/ray rllib/tuned_examples"
RLLIB: dict[tuple[str, str], Recipe] = {
    ("CartPole-v1", "ppo"): Recipe(
        n_envs=1,
        steps=200_000,
        kwargs={
            "training": {"gamma": 0.99, "lr": 3e-4, "num_epochs": 6, "vf_loss_coeff": 0.01},
            "model": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True},
        },
        source=f"{_RAY}/ppo/cartpole_ppo.py",
    ),
    ("CartPole-v1", "dqn"): Recipe(
        n_envs=1,
        steps=200_000,
        kwargs={
            "training": {
                "lr": 5e-4,
                "train_batch_size_per_learner": 32,
                "replay_buffer_config": {
                    "type": "PrioritizedEpisodeReplayBuffer",
                    "capacity": 50_000,
                    "alpha": 0.6,
                    "beta": 0.4,
                },
                "n_step": (2, 5),
                "double_q": True,
                "dueling": True,
                "epsilon": [(0, 1.0), (10_000, 0.02)],
            },
            "model": {
                "fcnet_hiddens": [256],
                "fcnet_activation": "tanh",
                "fcnet_bias_initializer": "zeros_",
                "head_fcnet_bias_initializer": "zeros_",
                "head_fcnet_hiddens": [256],
            },
        },
        source=f"{_RAY}/dqn/cartpole_dqn.py",
    ),
}


def recipe(table: dict[tuple[str, str], Recipe], env: str, algo: str) -> Recipe | None:
    """The recipe for rlamd's env name ``env`` (``cartpole``, ``pong`` ...) and ``algo``,
    or None when ``table`` has none. Atari games share the ``atari`` entry."""
    from rlamd.envs import parse_env_id

    parsed = parse_env_id(env)
    key = "atari" if parsed.family == "atari" else parsed.game
    return table.get((key, algo))


def linear(value: Any) -> Any:
    """``lin_X`` -> a schedule of SB3's ``progress_remaining`` (1 -> 0): X times it."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])

        def schedule(progress_remaining: float) -> float:
            return progress_remaining * start

        return schedule
    return value
