"""Stable-Baselines3 as a peer: DQN and PPO throughput, races, contention.

Throughput runs use rlamd's settings (:class:`rlamd.bench.peer.PPOSettings`; DQN: replay
50k, the bench's batch, target sync every 250 updates). Races use the RL Baselines3 Zoo's
hyperparameters (DLR-RM/rl-baselines3-zoo, ``hyperparams/dqn.yml`` at commit ce95481b and
``hyperparams/ppo.yml`` at 208b6fdf): ``CartPole-v1`` has its own entries, and every
Atari game shares the ``atari`` entry (``AtariWrapper``, 4 stacked frames,
``CnnPolicy``). ``lin_X`` in the Zoo is a value that falls linearly from X to 0 over the
run. As the Zoo does, ``optimize_memory_usage`` comes with
``handle_timeout_termination=False`` (SB3 refuses the pair otherwise).
"""

from __future__ import annotations

from typing import Any

from rlamd.bench.peer import BasePeer, PeerUnavailable, PPOSettings, Recipe, Throughput, require
from rlamd.bench.peer import recipe as find_recipe

__all__ = ["PEER", "RECIPES", "linear"]

_ZOO = "DLR-RM/rl-baselines3-zoo"
_DQN, _PPO = (
    f"{_ZOO} hyperparams/dqn.yml (commit ce95481b)",
    f"{_ZOO} hyperparams/ppo.yml (commit 208b6fdf)",
)
_ATARI = "atari (AtariWrapper, 4 frames)"
RECIPES: dict[tuple[str, str], Recipe] = {
    ("CartPole-v1", "dqn"): Recipe(1, 50_000, {
        "policy": "MlpPolicy", "learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000,
        "learning_starts": 1000, "gamma": 0.99, "target_update_interval": 10, "train_freq": 256,
        "gradient_steps": 128, "exploration_fraction": 0.16, "exploration_final_eps": 0.04,
        "policy_kwargs": {"net_arch": [256, 256]},
    }, f"{_DQN}, CartPole-v1", "RL Zoo recipe"),
    ("CartPole-v1", "ppo"): Recipe(8, 100_000, {
        "policy": "MlpPolicy", "n_steps": 32, "batch_size": 256, "gae_lambda": 0.8, "gamma": 0.98,
        "n_epochs": 20, "ent_coef": 0.0, "learning_rate": "lin_0.001", "clip_range": "lin_0.2",
    }, f"{_PPO}, CartPole-v1", "RL Zoo recipe"),
    ("atari", "dqn"): Recipe(1, 10_000_000, {
        "policy": "CnnPolicy", "buffer_size": 10_000, "learning_rate": 1e-4, "batch_size": 32,
        "learning_starts": 100_000, "target_update_interval": 1000, "train_freq": 4,
        "gradient_steps": 1, "exploration_fraction": 0.1, "exploration_final_eps": 0.01,
        "optimize_memory_usage": True, "replay_buffer_kwargs": {"handle_timeout_termination": False},
    }, f"{_DQN}, {_ATARI}", "RL Zoo recipe"),
    ("atari", "ppo"): Recipe(8, 10_000_000, {
        "policy": "CnnPolicy", "n_steps": 128, "n_epochs": 4, "batch_size": 256,
        "learning_rate": "lin_2.5e-4", "clip_range": "lin_0.1", "vf_coef": 0.5, "ent_coef": 0.01,
    }, f"{_PPO}, {_ATARI}", "RL Zoo recipe"),
}  # fmt: skip


def linear(value: Any) -> Any:
    """``lin_X`` -> a schedule of SB3's ``progress_remaining`` (1 -> 0): X times it."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def _module() -> Any:
    return require("stable_baselines3", "install it with `bash scripts/setup.sh --bench`")


def _quiet(model: Any) -> Any:
    """SB3's default logger makes a folder in the temp dir per learn() call; log nowhere."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def _env(gym_id: str, n_envs: int, seed: int) -> Any:
    """SB3's own env: ``make_vec_env``, or its Atari pipeline with 4 stacked frames."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack

    if "NoFrameskip" not in gym_id:
        return make_vec_env(gym_id, n_envs=n_envs, seed=seed)
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    return VecFrameStack(make_atari_env(gym_id, n_envs=n_envs, seed=seed), n_stack=4)


def _gym_id(env: str) -> str:
    from rlamd.envs import parse_env_id

    parsed = parse_env_id(env)
    if parsed.family != "atari":
        return parsed.game
    if parsed.sticky:
        raise PeerUnavailable(f"{env}: SB3's Atari pipeline here plays NoFrameskip-v4 ids only")
    return "".join(p.capitalize() for p in parsed.game.split("_")) + "NoFrameskip-v4"


def _dqn(num_envs: int, device: str, batch: int, warm: int, per_update: int) -> Any:
    env = _env("BreakoutNoFrameskip-v4", num_envs, 0)
    return _quiet(_module().DQN(
        "CnnPolicy", env, buffer_size=50_000, learning_starts=warm, batch_size=batch, train_freq=1,
        gradient_steps=per_update, target_update_interval=250, device=device, verbose=0, seed=0,
    ))  # fmt: skip


def _ppo(s: PPOSettings, device: str) -> Any:
    policy = "CnnPolicy" if s.family == "atari" else "MlpPolicy"
    return _quiet(_module().PPO(
        policy, _env(s.gym_id, s.num_envs, 0), n_steps=s.num_steps, n_epochs=s.epochs,
        batch_size=s.per_rollout // s.minibatches, learning_rate=s.lr, clip_range=s.clip,
        ent_coef=s.ent_coef, vf_coef=s.vf_coef, max_grad_norm=s.max_grad_norm, gamma=s.gamma,
        gae_lambda=s.gae_lambda, device=device, verbose=0, seed=0,
    ))  # fmt: skip


class SB3(BasePeer):
    name, label, colour = "sb3", "Stable-Baselines3", "#2c3e50"
    measurements = frozenset({"dqn", "ppo", "race", "contention"})

    def unavailable(self) -> str | None:
        try:
            _module()
        except PeerUnavailable as exc:
            return str(exc)
        return None

    def dqn_algorithm(self) -> dict[str, Any]:
        """rlamd's DQN settings for SB3's algorithm: one-step targets, no double Q, no
        dueling head, uniform replay (the like-for-like row)."""
        return {"double_q": False, "dueling": False, "prioritized": False, "n_step": 1}

    def dqn_side(self, batch: int, device: Any, warm: int, iters: int) -> Any:
        from rlamd.bench.dqn import Side

        model = _dqn(1, str(device), batch, warm, 1)
        model.learn(total_timesteps=warm)

        def iterate() -> int:
            model.learn(total_timesteps=iters, reset_num_timesteps=False)
            return iters

        def learn() -> int:
            model.train(gradient_steps=iters, batch_size=batch)
            return iters

        meta = {"batch": batch, "device": str(device), "precision": "fp32", "algorithm": self.name}
        one = lambda: model.train(gradient_steps=1, batch_size=batch)  # noqa: E731
        return Side(
            "SB3 DQN (fp32)", f"{self.name}_fp32", meta, iterate, learn, one, model.env.close
        )

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        model = _ppo(settings, str(device))
        work = iters * settings.per_rollout
        model.learn(settings.per_rollout)  # warm-up: the first rollout and update

        def run() -> int:
            model.learn(total_timesteps=work, reset_num_timesteps=False)
            return work

        meta = {"num_envs": settings.num_envs, "device": str(device), "precision": "fp32"}
        return Throughput("SB3 PPO (fp32)", run, model.get_env().close, meta)

    def contention(self, algo: str, num_envs: int, warm: int):
        """SB3's PPO or DQN on Breakout with rlamd's settings: (iterate() -> env steps, close)."""
        from rlamd.bench.ppo import atari_settings

        if algo == "ppo":
            model, per = _ppo(atari_settings(num_envs), "cpu"), 128 * num_envs
        else:  # train_freq counts vector steps: num_envs / 4 updates per vector step, as rlamd
            model, per = _dqn(num_envs, "cpu", 32, warm, max(1, num_envs // 4)), 16 * num_envs
            model.learn(total_timesteps=warm)

        def iterate() -> int:
            model.learn(total_timesteps=per, reset_num_timesteps=False)
            return per

        return iterate, model.get_env().close

    def race_skip(self, env: str, algo: str) -> str | None:
        if find_recipe(RECIPES, env, algo) is None:
            return f"no RL Zoo recipe for {env} / {algo}"
        return self.unavailable()

    def race_command(self, proto: Any, algo: str, seed: int, folder: Any):
        from rlamd.bench.race_child import child_command

        rec = find_recipe(RECIPES, proto.env, algo)
        assert rec is not None
        cmd = child_command(self.name, proto, algo, seed, folder)
        return cmd, {**rec.to_dict(), "steps": proto.steps or rec.steps}

    def race_train(self, args: Any, stop: Any, evals: Any) -> None:
        """Train with the Zoo recipe, evaluating from a callback, until done or stopped."""
        import numpy as np
        from stable_baselines3.common.callbacks import BaseCallback

        from rlamd.bench.race_child import with_epsilon

        module = _module()
        rec = find_recipe(RECIPES, args.env, args.algo)
        if rec is None:
            raise PeerUnavailable(f"no RL Zoo recipe for {args.env} / {args.algo}")
        kwargs = {k: linear(v) for k, v in rec.kwargs.items()}
        kind = module.DQN if args.algo == "dqn" else module.PPO
        env = _env(_gym_id(args.env), rec.n_envs, args.seed)
        model = _quiet(kind(kwargs.pop("policy"), env, seed=args.seed, device=args.device,
                            verbose=0, **kwargs))  # fmt: skip
        rng, n = np.random.default_rng(args.seed), int(model.action_space.n)

        def act(obs):
            actions, _ = model.predict(obs.cpu().numpy(), deterministic=args.algo == "dqn")
            return with_epsilon(actions, args.eval_epsilon, n, rng)

        class Race(BaseCallback):
            def _on_step(self) -> bool:
                evals.maybe(self.num_timesteps, act)
                return not stop.is_set()

        model.learn(total_timesteps=args.steps or rec.steps, callback=Race())


PEER = SB3()
