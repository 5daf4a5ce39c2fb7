"""TD3 on Hopper-v5: does rlamd's update stay SB3's over a whole run of real batches?

``tests/agents/test_sb3_parity.py`` holds rlamd's TD3 update equal to SB3's over 100 updates
of made-up batches. This runs SB3 2.9.2's TD3 as ``scripts/dqn_vs_sb3.py`` does (the RL Zoo's
settings, the same seed, the same evaluations), and beside it a *shadow*: rlamd's TD3 learner,
started from SB3's weights, that takes every batch SB3 takes and the same smoothing noise,
but never acts. SB3's run is untouched (the shadow draws nothing from SB3's random streams),
so its evaluations must repeat the stored race's. Every ``--every`` steps it prints how far
the shadow's actor, actor target and critics are from SB3's on 2,048 stored transitions
(largest difference over the mean size, as the parity test measures it), and every 10k
steps both policies' mean return on the same 10 evaluation episodes.

    .venv/bin/python results/td3_hopper_shadow/shadow.py --seed 1 --steps 12000 --every 250 \
        --control > results/td3_hopper_shadow/seed1.txt

``--control`` adds a second shadow, SB3's own TD3 with PyTorch's fused Adam (the same
formula, other rounding), fed the same way. ``seed1.txt`` (2026-12-07): after 250 updates
rlamd's critics are within 3e-5 of SB3's and the control's within 1e-6; then both part from
SB3 on the same timescale: the critics 1e-2 apart by 500 updates, 1e-1 by 2,000, and by
1,000 the largest action difference is 2, the box's width. A TD3 run on Hopper is chaotic at the rounding level: it
magnifies a change in the last bit within a few hundred updates, so two implementations
equal to rounding share a seed's first moments only, and agree, if at all, in distribution.
"""

import argparse
import copy
import statistics
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stable_baselines3 import TD3 as SB3TD3  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.logger import Logger  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.noise import NormalActionNoise  # noqa: E402

from rlamd.agents.td3 import TD3, TD3Config  # noqa: E402
from rlamd.evaluate import evaluate_policy as evaluate_policy_rlamd  # noqa: E402
from rlamd.precision import Precision  # noqa: E402
from rlamd.replay import ReplayBatch  # noqa: E402
from tests.agents.test_sb3_parity import _copy_td3, _OneBatch, _rel  # noqa: E402

ENV, CPU, NOISE = "Hopper-v5", torch.device("cpu"), 0.2
FP32 = Precision("fp32", CPU, max_grad_norm=None, grad_clamp=None)  # as the runs' TD3 section


def _batch(b, gamma: float) -> ReplayBatch:
    n = b.observations.shape[0]
    ones = torch.ones(n)
    return ReplayBatch(
        b.observations.float(),
        b.actions.float(),
        b.rewards[:, 0].float(),
        b.next_observations.float(),
        gamma * (1 - b.dones[:, 0].float()),
        ones,
        ones.long(),
    )


class Shadowed(SB3TD3):
    """SB3's TD3, whose every update is repeated with the same batch and smoothing noise by
    ``shadow`` (rlamd's learner) and, when set, ``twin`` (SB3's TD3 with fused Adam: a
    rounding-only difference, the control)."""

    shadow: TD3
    twin: SB3TD3 | None = None

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        taken, noise = [], []
        sample, normal_ = self.replay_buffer.sample, torch.Tensor.normal_

        def keep_sample(*a, **k):
            taken.append(sample(*a, **k))
            return taken[-1]

        def keep_normal(t, *a, **k):
            noise.append(normal_(t, *a, **k).clone())
            return t

        self.replay_buffer.sample = keep_sample
        torch.Tensor.normal_ = keep_normal
        try:
            super().train(gradient_steps, batch_size)
        finally:
            self.replay_buffer.sample = sample
            torch.Tensor.normal_ = normal_
        if self.twin is not None:
            _replay(self.twin, taken, noise, batch_size)
        randn = torch.randn
        for b, eps in zip(taken, noise, strict=True):
            torch.randn = lambda *a, e=eps, **k: e / NOISE  # the shadow's unit draw: SB3's
            try:
                self.shadow.learn(_OneBatch(_batch(b, self.gamma)), batch_size)
            finally:
                torch.randn = randn


def _replay(model: SB3TD3, batches: list, noise: list, batch_size: int) -> None:
    """``model.train`` on the given batches, its smoothing noise the given draws."""
    feed, draws = iter(batches), iter(noise)
    sample, normal_ = model.replay_buffer.sample, torch.Tensor.normal_
    model.replay_buffer.sample = lambda *a, **k: next(feed)
    torch.Tensor.normal_ = lambda t, *a, **k: t.copy_(next(draws))
    try:
        model.train(len(batches), batch_size)
    finally:
        model.replay_buffer.sample = sample
        torch.Tensor.normal_ = normal_


def _outputs(net, obs: torch.Tensor, act: torch.Tensor) -> dict[str, torch.Tensor]:
    """The four networks' outputs of SB3's TD3 or rlamd's, critics as ``(2, B)``."""
    with torch.no_grad():
        if isinstance(net, TD3):
            q, qt = net.critic.q(obs, act), net.critic.target(obs, act)
            return {"actor": net.actor(obs), "actor_target": net.actor_target(obs),
                    "critics": q, "critic_targets": qt}  # fmt: skip
        return {
            "actor": net.actor(obs),
            "actor_target": net.actor_target(obs),
            "critics": torch.cat(net.critic(obs, act), 1).T,
            "critic_targets": torch.cat(net.critic_target(obs, act), 1).T,
        }


def _gaps(theirs: dict, ours: dict) -> str:
    return "  ".join(f"{k} {_rel(ours[k], theirs[k]):.1e}" for k in theirs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--every", type=int, default=5_000)
    p.add_argument("--control", action="store_true", help="also SB3 with fused Adam")
    args = p.parse_args()
    torch.set_num_threads(1)
    env = gym.make(ENV)
    n = env.action_space.shape[0]
    kw = {"learning_rate": 1e-3, "batch_size": 256, "policy_kwargs": {"net_arch": [400, 300]}}
    noise = NormalActionNoise(np.zeros(n), 0.1 * np.ones(n))
    model = Shadowed(
        "MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, learning_starts=10_000,
        action_noise=noise, **kw,
    )  # fmt: skip
    model.set_logger(Logger(folder=None, output_formats=[]))
    rng = torch.get_rng_state()  # the others' own initial weights draw from it: put it back
    model.shadow = TD3(TD3Config(), env.observation_space.shape, n, CPU, FP32, seed=args.seed)
    if args.control:
        model.twin = SB3TD3(
            "MlpPolicy",
            gym.make(ENV),
            device="cpu",
            buffer_size=1,
            policy_kwargs=kw["policy_kwargs"],
        )
        model.twin.set_logger(Logger(folder=None, output_formats=[]))
        model.twin.policy.load_state_dict(model.policy.state_dict())
        for part in (model.twin.actor, model.twin.critic):
            part.optimizer = torch.optim.Adam(part.parameters(), lr=1e-3, fused=True)
    torch.set_rng_state(rng)
    _copy_td3(model, model.shadow)
    start = copy.deepcopy(model.actor)
    eval_env = Monitor(gym.make(ENV))
    eval_env.reset(seed=10_000 + args.seed)
    probe = np.random.default_rng(0)
    print(f"SB3 TD3 on {ENV}, seed {args.seed}, with rlamd's learner as its shadow", flush=True)

    class Marks(BaseCallback):
        def _on_step(self) -> bool:
            step, rb = self.num_timesteps, model.replay_buffer
            if step % args.every == 0 and model._n_updates:
                i = probe.integers(0, rb.pos, 2048)
                obs = torch.as_tensor(rb.observations[i, 0]).float()
                act = torch.as_tensor(rb.actions[i, 0]).float()
                theirs = _outputs(model, obs, act)
                with torch.no_grad():
                    moved = _rel(theirs["actor"], start(obs))
                print(f"step {step:>6}  updates {model._n_updates:>6}  SB3's actor moved "
                      f"{moved:.1e}", flush=True)  # fmt: skip
                print(f"  rlamd:       {_gaps(theirs, _outputs(model.shadow, obs, act))}")
                if model.twin is not None:
                    print(f"  fused Adam:  {_gaps(theirs, _outputs(model.twin, obs, act))}")
            if step % 10_000 == 0:
                race, _ = evaluate_policy(model, eval_env, n_eval_episodes=10)
                both = [_returns(net, step) for net in (model.actor, model.shadow.actor)]
                print(
                    f"step {step:>6}  evaluation: SB3 {race:.1f} (as the race); on one set of"
                    f" 10 episodes SB3 {both[0]:.1f}, shadow {both[1]:.1f}",
                    flush=True,
                )
            return True

    model.learn(args.steps, callback=Marks())


def _returns(actor: torch.nn.Module, step: int) -> float:
    """``actor``'s mean return on 10 episodes on one env, reset with the seed ``step`` and
    then on its own (so both policies play from the same start states)."""
    with torch.no_grad():
        scores = evaluate_policy_rlamd(
            lambda obs: actor(obs.float()), ENV, 10, device=CPU, seed=step, num_envs=1
        )
    return statistics.mean(scores)


if __name__ == "__main__":
    main()
