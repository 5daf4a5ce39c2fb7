"""Stable-Baselines3 as a peer: DQN and PPO throughput, races, contention.

Throughput runs use rlamd's settings (DQN: replay 50k, the bench's batch, target sync every
250 updates). Races use the RL Baselines3 Zoo's hyperparameters (DLR-RM/rl-baselines3-zoo,
``hyperparams/dqn.yml`` at commit ce95481b and ``hyperparams/ppo.yml`` at 208b6fdf):
``CartPole-v1`` has its own entries, every Atari game shares the ``atari`` entry
(``AtariWrapper``, 4 stacked frames). ``lin_X`` is a value falling linearly from X to 0.
As the Zoo does, ``optimize_memory_usage`` comes with ``handle_timeout_termination=False``.
"""

from __future__ import annotations

from typing import Any

from rlamd.bench.peer import BasePeer, PeerUnavailable, PPOSettings, Recipe, Throughput, require

__all__ = ["PEER", "RECIPES", "linear"]

_ZOO = "DLR-RM/rl-baselines3-zoo hyperparams"
_DQN, _PPO = f"{_ZOO}/dqn.yml (commit ce95481b)", f"{_ZOO}/ppo.yml (commit 208b6fdf)"
_ATARI, _TAG = "atari (AtariWrapper, 4 frames)", "RL Zoo recipe"
_CARTPOLE_DQN = {
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
}
_CARTPOLE_PPO = {
    "policy": "MlpPolicy",
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
    "learning_rate": "lin_0.001",
    "clip_range": "lin_0.2",
}
_ATARI_DQN = {
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
}
_ATARI_PPO = {
    "policy": "CnnPolicy",
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "learning_rate": "lin_2.5e-4",
    "clip_range": "lin_0.1",
    "vf_coef": 0.5,
    "ent_coef": 0.01,
}
RECIPES: dict[tuple[str, str], Recipe] = {
    ("CartPole-v1", "dqn"): Recipe(1, 50_000, _CARTPOLE_DQN, f"{_DQN}, CartPole-v1", _TAG),
    ("CartPole-v1", "ppo"): Recipe(8, 100_000, _CARTPOLE_PPO, f"{_PPO}, CartPole-v1", _TAG),
    ("atari", "dqn"): Recipe(1, 10_000_000, _ATARI_DQN, f"{_DQN}, {_ATARI}", _TAG),
    ("atari", "ppo"): Recipe(8, 10_000_000, _ATARI_PPO, f"{_PPO}, {_ATARI}", _TAG),
}


def linear(value: Any) -> Any:
    """``lin_X`` -> a schedule of SB3's ``progress_remaining`` (1 -> 0): X times it."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def _model(kind: str, policy: str, gym_id: str, n_envs: int, seed: int, **kwargs: Any) -> Any:
    """SB3's ``kind`` on its own env (``make_vec_env``, or its Atari pipeline with 4 stacked
    frames), logging nowhere (its default logger makes a temp folder per ``learn``)."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.logger import Logger
    from stable_baselines3.common.vec_env import VecFrameStack

    if "NoFrameskip" in gym_id:
        import ale_py
        import gymnasium as gym

        gym.register_envs(ale_py)
        env = VecFrameStack(make_atari_env(gym_id, n_envs=n_envs, seed=seed), n_stack=4)
    else:
        env = make_vec_env(gym_id, n_envs=n_envs, seed=seed)
    model = getattr(require(*SB3.requires), kind)(policy, env, seed=seed, verbose=0, **kwargs)
    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _learning(model: Any, steps: int) -> Any:
    """A call that trains ``model`` ``steps`` more env steps and returns them."""

    def run() -> int:
        model.learn(total_timesteps=steps, reset_num_timesteps=False)
        return steps

    return run


def _dqn(num_envs: int, device: str, batch: int, warm: int, per_update: int) -> Any:
    model = _model(
        "DQN",
        "CnnPolicy",
        "BreakoutNoFrameskip-v4",
        num_envs,
        0,
        device=device,
        buffer_size=50_000,
        learning_starts=warm,
        batch_size=batch,
        train_freq=1,
        gradient_steps=per_update,
        target_update_interval=250,
    )
    model.learn(total_timesteps=warm)
    return model


def _ppo(s: PPOSettings, device: str) -> Any:
    policy = "CnnPolicy" if s.family == "atari" else "MlpPolicy"
    return _model(
        "PPO",
        policy,
        s.gym_id,
        s.num_envs,
        0,
        device=device,
        n_steps=s.num_steps,
        n_epochs=s.epochs,
        batch_size=s.per_rollout // s.minibatches,
        learning_rate=s.lr,
        clip_range=s.clip,
        ent_coef=s.ent_coef,
        vf_coef=s.vf_coef,
        gamma=s.gamma,
        max_grad_norm=s.max_grad_norm,
        gae_lambda=s.gae_lambda,
    )


def _gym_id(env: str) -> str:
    from rlamd.envs import parse_env_id

    parsed = parse_env_id(env)
    if parsed.family != "atari":
        return parsed.game
    if parsed.sticky:
        raise PeerUnavailable(f"{env}: SB3's Atari pipeline here plays NoFrameskip-v4 ids only")
    return "".join(p.capitalize() for p in parsed.game.split("_")) + "NoFrameskip-v4"


class SB3(BasePeer):
    name, label, colour = "sb3", "Stable-Baselines3", "#2c3e50"
    measurements = frozenset({"dqn", "ppo", "race", "contention"})
    requires = ("stable_baselines3", "install it with `bash scripts/setup.sh --bench`")
    recipes, no_recipe = RECIPES, "no RL Zoo recipe for {env} / {algo}"

    def dqn_algorithm(self) -> dict[str, Any]:
        """SB3's DQN in rlamd: one-step targets, no double Q or dueling, uniform replay."""
        return {"double_q": False, "dueling": False, "prioritized": False, "n_step": 1}

    def dqn_side(self, batch: int, device: Any, warm: int, iters: int) -> Any:
        from rlamd.bench.dqn import Side

        model = _dqn(1, str(device), batch, warm, 1)

        def learn(n: int = iters) -> int:
            model.train(gradient_steps=n, batch_size=batch)
            return n

        meta = {"batch": batch, "device": str(device), "precision": "fp32", "algorithm": self.name}
        one = lambda: learn(1)  # noqa: E731
        return Side(
            "SB3 DQN (fp32)",
            f"{self.name}_fp32",
            meta,
            _learning(model, iters),
            learn,
            one,
            model.env.close,
        )

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        model = _ppo(settings, str(device))
        model.learn(settings.per_rollout)  # warm-up: the first rollout and update
        run = _learning(model, iters * settings.per_rollout)
        meta = {"num_envs": settings.num_envs, "device": str(device), "precision": "fp32"}
        return Throughput("SB3 PPO (fp32)", run, model.get_env().close, meta)

    def contention(self, algo: str, num_envs: int, warm: int):
        from rlamd.bench.ppo import atari_settings

        if algo == "ppo":
            model, per = _ppo(atari_settings(num_envs), "cpu"), 128 * num_envs
        else:  # train_freq counts vector steps: num_envs / 4 updates per vector step, as rlamd
            model, per = _dqn(num_envs, "cpu", 32, warm, max(1, num_envs // 4)), 16 * num_envs
        return _learning(model, per), model.get_env().close

    def race_train(self, args: Any, stop: Any, evals: Any) -> None:
        """Train with the Zoo recipe, evaluating from a callback, until done or stopped."""
        rec = self.recipe(args.env, args.algo)
        kwargs = {k: linear(v) for k, v in rec.kwargs.items()}
        kind, policy = args.algo.upper(), kwargs.pop("policy")
        gym_id = _gym_id(args.env)
        model = _model(kind, policy, gym_id, rec.n_envs, args.seed, device=args.device, **kwargs)
        from stable_baselines3.common.callbacks import BaseCallback

        def act(obs):
            actions, _ = model.predict(obs.cpu().numpy(), deterministic=args.algo == "dqn")
            return evals.explore(actions, int(model.action_space.n))

        class Race(BaseCallback):
            def _on_step(self) -> bool:
                evals.maybe(self.num_timesteps, act)
                return not stop.is_set()

        model.learn(total_timesteps=args.steps or rec.steps, callback=Race())


PEER = SB3()
