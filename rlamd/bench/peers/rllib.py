"""RLlib (new API stack) as a peer: PPO throughput on Breakout (CPU only, its own Atari
wrappers, rlamd's settings) and CartPole races (its tuned examples, ``rllib.toml``), with
env runner and learner in the bench's process."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from rlamd.bench.peer import BasePeer, PeerUnavailable, PPOSettings, Throughput, require

__all__ = ["PEER"]

_ATARI_ENV = "rlamd_bench_atari"


def _config(algo: str, env: str, n_envs: int, seed: int, training: dict, model: dict) -> Any:
    """RLlib's config for ``algo`` with env runner and learner in this process."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    module = require(f"ray.rllib.algorithms.{algo}", RLlib.requires[1])
    # TOML has no tuples, and RLlib's replay draws an n-step per sample only from a tuple.
    training = {k: tuple(v) if k == "n_step" else v for k, v in training.items()}
    return (
        getattr(module, f"{algo.upper()}Config")()
        .environment(env, **({"clip_rewards": True} if env == _ATARI_ENV else {}))
        .env_runners(num_env_runners=0, num_envs_per_env_runner=n_envs)
        .learners(num_learners=0)
        .training(**training)
        .rl_module(model_config=DefaultModelConfig(**model))
        .debugging(seed=seed)
    )


def _trained(algo: Any) -> int:
    return int(algo.train()["env_runners"]["num_env_steps_sampled"])


class RLlib(BasePeer):
    name, label, colour = "rllib", "RLlib", "#27ae60"
    measurements = frozenset({"ppo", "race"})
    requires = ("ray.rllib.algorithms.ppo", "install it with `bash scripts/setup.sh --ray`")
    no_recipe = "no RLlib recipe for {env} / {algo} in this bench (CartPole only)"

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        """PPO with rlamd's Atari settings; env steps counted from RLlib's own results."""
        if str(device) != "cpu" or settings.family != "atari":
            where = f"{settings.gym_id} on {device}"
            raise PeerUnavailable(f"RLlib's figure is Atari on the CPU only here, not {where}")
        import ale_py
        import gymnasium as gym
        import ray
        from ray import tune
        from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

        from rlamd.distributed.local import local_ray

        s, wrap, on_ray = settings, wrap_atari_for_new_api_stack, ExitStack()
        gym.register_envs(ale_py)
        tune.register_env(_ATARI_ENV, lambda _: wrap(gym.make(s.gym_id), dim=84, framestack=4))
        on_ray.enter_context(local_ray(ray, 2))
        training = {"train_batch_size_per_learner": s.per_rollout, "num_epochs": s.epochs}
        training |= {"minibatch_size": s.per_rollout // s.minibatches, "lr": s.lr}
        training |= {"clip_param": s.clip, "vf_clip_param": 10.0, "entropy_coeff": s.ent_coef}
        training |= {"vf_loss_coeff": s.vf_coef, "grad_clip": s.max_grad_norm}
        training |= {"gamma": s.gamma, "lambda_": s.gae_lambda}
        model = {"conv_filters": [[32, 8, 4], [64, 4, 2], [64, 3, 1]], "conv_activation": "relu"}
        model |= {"head_fcnet_hiddens": [512], "vf_share_layers": True}
        config = _config("ppo", _ATARI_ENV, s.num_envs, 0, training, model)
        algo = config.env_runners(rollout_fragment_length=s.num_steps).build_algo()

        def close() -> None:
            algo.stop()
            on_ray.close()

        meta = {"num_envs": s.num_envs, "version": ray.__version__, "precision": "fp32"}
        run = lambda: sum(_trained(algo) for _ in range(iters))  # noqa: E731
        return Throughput("RLlib PPO (fp32)", run, close, meta)

    def race_train(self, args: Any, stop: Any, evals: Any) -> None:
        """Train with the tuned example, evaluating after each iteration past a due step."""
        rec = self.recipe(args.env, args.algo)
        import ray
        import torch

        from rlamd.distributed.local import local_ray
        from rlamd.envs import parse_env_id

        gpus = 1 if torch.device(args.device).type == "cuda" else 0
        game = parse_env_id(args.env).game
        config = _config(args.algo, game, rec.n_envs, args.seed, **rec.kwargs)

        def act(obs: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                out = algo.get_module().forward_inference({"obs": obs.float()})
            logits = out.get("action_dist_inputs", out.get("qf_preds"))
            if "actions" in out:
                actions = out["actions"]
            elif args.algo == "ppo":
                actions = torch.distributions.Categorical(logits=logits).sample()
            else:
                actions = out.get("qf_preds", logits).argmax(-1)
            n = int((logits if logits is not None else actions).shape[-1])
            return evals.explore(actions.cpu().numpy(), n)

        steps, total = 0, args.steps or rec.steps
        with local_ray(ray, args.threads):
            algo = config.learners(num_gpus_per_learner=gpus).build_algo()
            try:
                while steps < total and not stop.is_set():
                    steps += _trained(algo)
                    evals.maybe(steps, act)
            finally:
                algo.stop()


PEER = RLlib()
