"""RLlib (new API stack) as a peer: PPO throughput on Breakout and CartPole races.

Env runner and learner run in the bench's process (no remote actors). Throughput uses
rlamd's settings with RLlib's own Atari wrappers (``wrap_atari_for_new_api_stack``,
84x84, 4 frames), on the CPU only. Races train CartPole with RLlib's tuned examples
(ray-project/ray ``rllib/tuned_examples/ppo/cartpole_ppo.py`` and
``rllib/tuned_examples/dqn/cartpole_dqn.py``); there is no Atari recipe here.
"""

from __future__ import annotations

from typing import Any

from rlamd.bench.peer import BasePeer, PeerUnavailable, PPOSettings, Recipe, Throughput, require
from rlamd.bench.peer import recipe as find_recipe

__all__ = ["PEER", "RECIPES"]

_RAY = "ray-project/ray rllib/tuned_examples"
RECIPES: dict[tuple[str, str], Recipe] = {
    ("CartPole-v1", "ppo"): Recipe(1, 200_000, {
        "training": {"gamma": 0.99, "lr": 3e-4, "num_epochs": 6, "vf_loss_coeff": 0.01},
        "model": {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True},
    }, f"{_RAY}/ppo/cartpole_ppo.py", "RLlib tuned example"),
    ("CartPole-v1", "dqn"): Recipe(1, 200_000, {
        "training": {
            "lr": 5e-4, "train_batch_size_per_learner": 32, "n_step": (2, 5), "double_q": True,
            "replay_buffer_config": {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 50_000,
                                     "alpha": 0.6, "beta": 0.4},
            "dueling": True, "epsilon": [(0, 1.0), (10_000, 0.02)],
        },
        "model": {"fcnet_hiddens": [256], "fcnet_activation": "tanh", "head_fcnet_hiddens": [256],
                  "fcnet_bias_initializer": "zeros_", "head_fcnet_bias_initializer": "zeros_"},
    }, f"{_RAY}/dqn/cartpole_dqn.py", "RLlib tuned example"),
}  # fmt: skip


def _ppo_module() -> Any:
    return require("ray.rllib.algorithms.ppo", "install it with `bash scripts/setup.sh --ray`")


def _ray_init(threads: int) -> bool:
    import ray

    if ray.is_initialized():
        return False
    ray.init(address="local", num_cpus=threads, include_dashboard=False, log_to_driver=False)
    return True


def _atari_config(module: Any, s: PPOSettings) -> Any:
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    n = s.num_envs
    return (
        module.PPOConfig()
        .environment("rlamd_bench_atari", clip_rewards=True)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=n, rollout_fragment_length=s.num_steps)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=s.per_rollout, minibatch_size=s.per_rollout // s.minibatches,
            num_epochs=s.epochs, lr=s.lr, clip_param=s.clip, vf_clip_param=10.0,
            entropy_coeff=s.ent_coef, vf_loss_coeff=s.vf_coef, grad_clip=s.max_grad_norm,
            gamma=s.gamma, lambda_=s.gae_lambda,
        )
        .rl_module(model_config=DefaultModelConfig(
            conv_filters=[[32, 8, 4], [64, 4, 2], [64, 3, 1]], conv_activation="relu",
            head_fcnet_hiddens=[512], vf_share_layers=True,
        ))
        .debugging(seed=0)
    )  # fmt: skip


class RLlib(BasePeer):
    name, label, colour = "rllib", "RLlib", "#27ae60"
    measurements = frozenset({"ppo", "race"})

    def unavailable(self) -> str | None:
        try:
            _ppo_module()
        except PeerUnavailable as exc:
            return str(exc)
        return None

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        """PPO with rlamd's Atari settings; env steps counted from RLlib's own results."""
        if str(device) != "cpu":
            raise PeerUnavailable(f"RLlib's figure is CPU-only in this bench (device {device})")
        if settings.family != "atari":
            raise PeerUnavailable("RLlib's throughput figure is Atari-only in this bench")
        module = _ppo_module()
        import ale_py
        import gymnasium as gym
        import ray
        from ray import tune
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        gym.register_envs(ale_py)

        def make(cfg):
            return wrap_atari_for_new_api_stack(gym.make(settings.gym_id), dim=84, framestack=4)

        started = _ray_init(2)
        tune.register_env("rlamd_bench_atari", make)
        algo = _atari_config(module, settings).build_algo()

        def run() -> int:
            return sum(
                int(algo.train()["env_runners"]["num_env_steps_sampled"]) for _ in range(iters)
            )

        def close() -> None:
            algo.stop()
            if started:
                ray.shutdown()

        meta = {"num_envs": settings.num_envs, "version": ray.__version__, "precision": "fp32"}
        return Throughput("RLlib PPO (fp32)", run, close, meta)

    def race_skip(self, env: str, algo: str) -> str | None:
        if find_recipe(RECIPES, env, algo) is None:
            return f"no RLlib recipe for {env} / {algo} in this bench (CartPole only)"
        return self.unavailable()

    def race_command(self, proto: Any, algo: str, seed: int, folder: Any):
        from rlamd.bench.race_child import child_command

        rec = find_recipe(RECIPES, proto.env, algo)
        assert rec is not None
        cmd = child_command(self.name, proto, algo, seed, folder)
        return cmd, {**rec.to_dict(), "steps": proto.steps or rec.steps}

    def race_train(self, args: Any, stop: Any, evals: Any) -> None:
        """Train with the tuned example, evaluating after each iteration past a due step."""
        _ppo_module()
        import numpy as np
        import ray
        import torch
        from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

        from rlamd.bench.race_child import with_epsilon
        from rlamd.envs import parse_env_id

        rec = find_recipe(RECIPES, args.env, args.algo)
        if rec is None:
            raise PeerUnavailable(f"no RLlib recipe for {args.env} / {args.algo} in this bench")
        if args.algo == "ppo":
            from ray.rllib.algorithms.ppo import PPOConfig as Config
        else:
            from ray.rllib.algorithms.dqn import DQNConfig as Config
        _ray_init(args.threads)
        gpus = 1 if torch.device(args.device).type == "cuda" else 0
        algo = (
            Config().environment(parse_env_id(args.env).game)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=rec.n_envs)
            .learners(num_learners=0, num_gpus_per_learner=gpus)
            .training(**rec.kwargs["training"])
            .rl_module(model_config=DefaultModelConfig(**rec.kwargs["model"]))
            .debugging(seed=args.seed).build_algo()
        )  # fmt: skip
        rng = np.random.default_rng(args.seed)

        def act(obs: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                out = algo.get_module().forward_inference({"obs": obs.float()})
            if "actions" in out:
                actions = out["actions"]
            elif args.algo == "ppo":
                actions = torch.distributions.Categorical(logits=out["action_dist_inputs"]).sample()
            else:
                actions = out.get("qf_preds", out.get("action_dist_inputs")).argmax(-1)
            n = int(out.get("action_dist_inputs", out.get("qf_preds", actions)).shape[-1])
            return with_epsilon(actions.cpu().numpy(), args.eval_epsilon, n, rng)

        steps, total = 0, args.steps or rec.steps
        try:
            while steps < total and not stop.is_set():
                steps += int(algo.train()["env_runners"]["num_env_steps_sampled"])
                evals.maybe(steps, act)
        finally:
            algo.stop()
            ray.shutdown()


PEER = RLlib()
