"""A peer's side of a race: ``python -m rlamd.bench.race_child {sb3,rllib} ...``.

Trains Stable-Baselines3 or RLlib with its recipe (:mod:`rlamd.bench.zoo`) and evaluates
it on the race's schedule with the race's protocol, the one rlamd's runner uses
(:func:`rlamd.evaluate.evaluate_policy` on rlamd's env: whole games, unclipped scores,
``10_000 + step`` as the env seed, episodes spread over up to 8 envs). The peer's policy
acts on those observations: DQN greedy with ``--eval-epsilon`` random actions, PPO
sampled from its policy. Each evaluation appends ``step,mean,std,episodes`` to
``DIR/evals.csv``, as rlamd's runner does, for the race to watch. SIGINT or SIGTERM stops
training at the next env step (SB3) or iteration (RLlib); the process then exits 0.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .peers import PeerUnavailable
from .zoo import RLLIB, SB3, linear, recipe

__all__ = ["Evaluations", "main"]

Policy = Callable[[torch.Tensor], torch.Tensor]


class Evaluations:
    """The race's evaluation schedule and protocol, writing ``evals.csv`` like rlamd's."""

    def __init__(self, env: str, every: int, episodes: int, folder: Path) -> None:
        from rlamd.envs import AtariConfig, parse_env_id

        self.env, self.every, self.episodes = env, every, episodes
        self.atari = AtariConfig() if parse_env_id(env).family == "atari" else None
        self.due_at = every
        folder.mkdir(parents=True, exist_ok=True)
        self.csv = open(folder / "evals.csv", "w", encoding="utf-8", buffering=1)
        self.csv.write("step,mean,std,episodes\n")

    def maybe(self, step: int, policy: Policy) -> None:
        """Evaluate when ``step`` reached the next multiple of ``every`` (then the next)."""
        if step < self.due_at:
            return
        from rlamd.evaluate import evaluate_policy

        scores = evaluate_policy(
            policy,
            self.env,
            self.episodes,
            device=torch.device("cpu"),
            seed=10_000 + step,
            atari=self.atari,
        )
        mean, std = statistics.fmean(scores), statistics.pstdev(scores)
        self.csv.write(f"{step},{mean:.4f},{std:.4f},{len(scores)}\n")
        self.due_at = (step // self.every + 1) * self.every

    def close(self) -> None:
        self.csv.close()


def _epsilon(actions: np.ndarray, epsilon: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``actions`` with each replaced by a uniformly random one with probability ``epsilon``."""
    if epsilon <= 0:
        return actions
    random = rng.integers(0, n, len(actions))
    return np.where(rng.random(len(actions)) < epsilon, random, actions)


def _sb3_env(env: str, n_envs: int, seed: int):
    """SB3's own env for rlamd's env name: ``make_vec_env`` or its Atari pipeline."""
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from rlamd.envs import parse_env_id

    parsed = parse_env_id(env)
    if parsed.family != "atari":
        return make_vec_env(parsed.game, n_envs=n_envs, seed=seed)
    if parsed.sticky:
        raise PeerUnavailable(f"{env}: SB3's Atari pipeline here plays NoFrameskip-v4 ids only")
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    camel = "".join(p.capitalize() for p in parsed.game.split("_"))
    return VecFrameStack(make_atari_env(f"{camel}NoFrameskip-v4", n_envs=n_envs, seed=seed), 4)


def run_sb3(args: argparse.Namespace, stop: threading.Event, evals: Evaluations) -> None:
    """Train SB3 with the RL Zoo recipe, evaluating from a callback, until done or stopped."""
    from .peers import sb3

    module = sb3()
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.logger import Logger

    rec = recipe(SB3, args.env, args.algo)
    if rec is None:
        raise PeerUnavailable(f"no RL Zoo recipe for {args.env} / {args.algo}")
    kwargs = {k: linear(v) for k, v in rec.kwargs.items()}
    policy_name = kwargs.pop("policy")
    kind = module.DQN if args.algo == "dqn" else module.PPO
    model = kind(
        policy_name,
        _sb3_env(args.env, rec.n_envs, args.seed),
        seed=args.seed,
        device=args.device,
        verbose=0,
        **kwargs,
    )
    model.set_logger(Logger(folder=None, output_formats=[]))
    rng, n = np.random.default_rng(args.seed), int(model.action_space.n)

    def act(obs: torch.Tensor) -> torch.Tensor:
        actions, _ = model.predict(obs.cpu().numpy(), deterministic=args.algo == "dqn")
        return torch.as_tensor(_epsilon(np.asarray(actions), args.eval_epsilon, n, rng))

    class Race(BaseCallback):
        def _on_step(self) -> bool:
            evals.maybe(self.num_timesteps, act)
            return not stop.is_set()

    model.learn(total_timesteps=args.steps or rec.steps, callback=Race())


def _rllib_config(args: argparse.Namespace, rec: Any):
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from rlamd.envs import parse_env_id

    if args.algo == "ppo":
        from ray.rllib.algorithms.ppo import PPOConfig as Config
    else:
        from ray.rllib.algorithms.dqn import DQNConfig as Config
    gpus = 1 if torch.device(args.device).type == "cuda" else 0
    return (
        Config()
        .environment(parse_env_id(args.env).game)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=rec.n_envs)
        .learners(num_learners=0, num_gpus_per_learner=gpus)
        .training(**rec.kwargs["training"])
        .rl_module(model_config=DefaultModelConfig(**rec.kwargs["model"]))
        .debugging(seed=args.seed)
    )


def run_rllib(args: argparse.Namespace, stop: threading.Event, evals: Evaluations) -> None:
    """Train RLlib (new API stack, env runner and learner in this process) with its tuned
    example, evaluating after each iteration that passed a due step."""
    from .peers import rllib_ppo

    rllib_ppo()  # PeerUnavailable without Ray
    import ray

    rec = recipe(RLLIB, args.env, args.algo)
    if rec is None:
        raise PeerUnavailable(f"no RLlib recipe for {args.env} / {args.algo} in this bench")
    ray.init(num_cpus=args.threads, include_dashboard=False, log_to_driver=False)
    algo = _rllib_config(args, rec).build_algo()
    rng = np.random.default_rng(args.seed)

    def act(obs: torch.Tensor) -> torch.Tensor:
        module = algo.get_module()
        with torch.no_grad():
            out = module.forward_inference({"obs": obs.float()})
        if "actions" in out:
            actions = out["actions"]
        elif args.algo == "ppo":
            actions = torch.distributions.Categorical(logits=out["action_dist_inputs"]).sample()
        else:
            actions = out.get("qf_preds", out.get("action_dist_inputs")).argmax(-1)
        n = int(out.get("action_dist_inputs", out.get("qf_preds", actions)).shape[-1])
        return torch.as_tensor(_epsilon(actions.cpu().numpy(), args.eval_epsilon, n, rng))

    steps, total = 0, args.steps or rec.steps
    try:
        while steps < total and not stop.is_set():
            result = algo.train()
            steps += int(result["env_runners"]["num_env_steps_sampled"])
            evals.maybe(steps, act)
    finally:
        algo.stop()
        ray.shutdown()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m rlamd.bench.race_child")
    p.add_argument("who", choices=("sb3", "rllib"))
    p.add_argument("--env", required=True, help="rlamd's env name (cartpole, pong ...)")
    p.add_argument("--algo", required=True, choices=("dqn", "ppo"))
    p.add_argument("--steps", type=int, default=0, help="run length (0: the recipe's)")
    p.add_argument("--eval-every", type=int, required=True)
    p.add_argument("--eval-episodes", type=int, required=True)
    p.add_argument("--eval-epsilon", type=float, default=0.0, help="DQN's evaluation epsilon")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dir", required=True, help="run folder: evals.csv goes here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    evals = Evaluations(args.env, args.eval_every, args.eval_episodes, Path(args.dir))
    try:
        (run_sb3 if args.who == "sb3" else run_rllib)(args, stop, evals)
    except PeerUnavailable as exc:
        print(f"skipped: {exc}", file=sys.stderr)
        return 3
    finally:
        evals.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
