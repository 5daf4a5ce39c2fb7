"""Stable-Baselines3 as a peer: DQN and PPO throughput with rlamd's settings, contention,
and races with the RL Zoo's hyperparameters (``sb3.toml``; ``lin_X``: linear from X to 0)."""

from __future__ import annotations

from typing import Any

from rlamd.bench.common import repeat
from rlamd.bench.peer import PLAIN_DQN, BasePeer, PeerUnavailable, PPOSettings, Throughput, require

__all__ = ["PEER"]


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
    return repeat(lambda: model.learn(total_timesteps=steps, reset_num_timesteps=False), 1, steps)


def _dqn(num_envs: int, device: str, batch: int, warm: int, per_update: int) -> Any:
    """SB3's DQN with rlamd's settings (replay 50k, target sync every 250), filled."""
    opts = {"buffer_size": 50_000, "learning_starts": warm, "batch_size": batch, "train_freq": 1}
    opts |= {"gradient_steps": per_update, "target_update_interval": 250}
    model = _model("DQN", "CnnPolicy", "BreakoutNoFrameskip-v4", num_envs, 0, device=device, **opts)
    model.learn(total_timesteps=warm)
    return model


def _ppo(s: PPOSettings, device: str) -> Any:
    opts = {"n_steps": s.num_steps, "n_epochs": s.epochs, "learning_rate": s.lr}
    opts |= {"batch_size": s.per_rollout // s.minibatches, "clip_range": s.clip}
    opts |= {"ent_coef": s.ent_coef, "vf_coef": s.vf_coef, "gamma": s.gamma}
    opts |= {"max_grad_norm": s.max_grad_norm, "gae_lambda": s.gae_lambda}
    policy = "CnnPolicy" if s.family == "atari" else "MlpPolicy"
    return _model("PPO", policy, s.gym_id, s.num_envs, 0, device=device, **opts)


class SB3(BasePeer):
    name, label, colour = "sb3", "Stable-Baselines3", "#2c3e50"
    measurements = frozenset({"dqn", "ppo", "race", "contention"})
    requires = ("stable_baselines3", "install it with `bash scripts/setup.sh --bench`")
    no_recipe = "no RL Zoo recipe for {env} / {algo}"

    dqn_algorithm = PLAIN_DQN

    def dqn_side(self, batch: int, device: Any, warm: int, iters: int) -> Any:
        from rlamd.bench.dqn import Side

        model = _dqn(1, str(device), batch, warm, 1)

        def learn(n: int = iters) -> int:
            model.train(gradient_steps=n, batch_size=batch)
            return n

        run = _learning(model, iters)
        return Side("SB3 DQN (fp32)", run, learn, lambda: learn(1), model.env.close)

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
        from stable_baselines3.common.callbacks import BaseCallback

        from rlamd.envs import parse_env_id

        rec, parsed = self.recipe(args.env, args.algo), parse_env_id(args.env)
        gym_id = parsed.game
        if parsed.family == "atari" and parsed.sticky:
            raise PeerUnavailable(f"{args.env}: SB3's Atari pipeline plays NoFrameskip-v4 only")
        if parsed.family == "atari":
            gym_id = "".join(p.capitalize() for p in parsed.game.split("_")) + "NoFrameskip-v4"
        kwargs = dict(rec.kwargs)
        for k, v in kwargs.items():  # lin_X: a schedule of progress_remaining (1 -> 0), X times it
            if isinstance(v, str) and v.startswith("lin_"):
                kwargs[k] = lambda progress_remaining, x=float(v[4:]): progress_remaining * x
        kind, policy = args.algo.upper(), kwargs.pop("policy")
        model = _model(kind, policy, gym_id, rec.n_envs, args.seed, device=args.device, **kwargs)

        def act(obs):
            actions, _ = model.predict(obs.cpu().numpy(), deterministic=args.algo == "dqn")
            return evals.explore(actions, int(model.action_space.n))

        class Race(BaseCallback):
            def _on_step(self) -> bool:
                evals.maybe(self.num_timesteps, act)
                return not stop.is_set()

        model.learn(total_timesteps=args.steps or rec.steps, callback=Race())


PEER = SB3()
