"""PPO env steps/s on Breakout, learning included: rlamd, SB3, RLlib and the raw env ceiling.

Hyperparameters for every framework: 8 envs x 128 steps, 4 epochs, 4 minibatches (256),
lr 2.5e-4, clip 0.1, entropy 0.01, value 0.5, max grad norm 0.5, gamma 0.99, lambda 0.95
(CleanRL ppo_atari; Huang et al. 2022), the Nature CNN, on the bench's device (SB3
too: ``device=`` the same device; RLlib only on the CPU). RLlib (new API stack)
runs its env runner and learner in this process (no remote actors), with its own Atari
wrappers (``wrap_atari_for_new_api_stack``, 84x84, 4 frames). The raw ``AtariVectorEnv``
with 8 envs and random actions is the ceiling no learner can pass. Every contender is
built first, then all are timed in interleaved rounds (rlamd, SB3, RLlib, raw, rlamd, ...).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .common import (
    Contender,
    Figure,
    distinct_precisions,
    interleave,
    note_ratio,
    print_table,
    ratio,
    timed,
)
from .peers import PeerUnavailable, rllib_ppo, sb3_atari

__all__ = ["run_ppo_suite"]

GAME, GYM_ID = "breakout", "BreakoutNoFrameskip-v4"


def _rlamd_loop(num_envs: int, precision: str, device: torch.device):
    from rlamd.algos import build_agent
    from rlamd.collector import Collector
    from rlamd.config.sections import RunConfig, TrainConfig
    from rlamd.envs import make_env
    from rlamd.loops import OnPolicyLoop

    env = make_env(GAME, num_envs=num_envs)
    train = TrainConfig(
        env=GAME, algo="ppo", num_envs=num_envs, precision=precision, device=str(device)
    )
    cfg = RunConfig(train=train)
    agent = build_agent(cfg, device, env)
    return OnPolicyLoop(Collector(env, device, seed=0), agent, cfg.ppo, train.steps), agent


def _rllib_config(module, n: int):
    """RLlib's PPO config with this bench's settings for ``n`` envs (see the module docstring)."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (
        module.PPOConfig()
        .environment("rlamd_bench_breakout", clip_rewards=True)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=n, rollout_fragment_length=128)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=128 * n,
            minibatch_size=128 * n // 4,
            num_epochs=4,
            lr=2.5e-4,
            clip_param=0.1,
            vf_clip_param=10.0,
            entropy_coeff=0.01,
            vf_loss_coeff=0.5,
            grad_clip=0.5,
            gamma=0.99,
            lambda_=0.95,
        )
        .rl_module(
            model_config=DefaultModelConfig(
                conv_filters=[[32, 8, 4], [64, 4, 2], [64, 3, 1]],
                conv_activation="relu",
                head_fcnet_hiddens=[512],
                vf_share_layers=True,
            )
        )
        .debugging(seed=0)
    )


# A contender and what closes it once every round has run.
_Built = tuple[Contender, Callable[[], None]]


def _rllib_contender(n: int, iters: int) -> _Built:
    """RLlib PPO with the same settings; env steps counted from RLlib's own results."""
    module = rllib_ppo()
    import ale_py
    import gymnasium as gym
    import ray
    from ray import tune
    from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack

    gym.register_envs(ale_py)

    def make(cfg):
        env = gym.make(GYM_ID)  # no frame skip: the wrapper skips 4 frames and max-pools
        return wrap_atari_for_new_api_stack(env, dim=84, framestack=4)

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tune.register_env("rlamd_bench_breakout", make)
    algo = _rllib_config(module, n).build_algo()

    def run_rllib() -> int:
        done = 0
        for _ in range(iters):
            result = algo.train()
            done += int(result["env_runners"]["num_env_steps_sampled"])
        return done

    def close() -> None:
        algo.stop()
        if started:
            ray.shutdown()

    meta = {"num_envs": n, "version": ray.__version__}
    return Contender(f"ppo/rllib_fp32/{n}envs", "env steps/s", timed(run_rllib), meta), close


def _sb3_contender(n: int, device: torch.device, iters: int) -> _Built:
    """SB3 PPO with the same settings; raises :class:`PeerUnavailable` when SB3 cannot run."""
    model = sb3_atari("ppo", n, str(device))

    def run_sb3() -> int:
        model.learn(total_timesteps=iters * 128 * n, reset_num_timesteps=False)
        return iters * 128 * n

    meta = {"num_envs": n, "device": str(device)}
    run = timed(run_sb3, device=device)
    return Contender(f"ppo/sb3_fp32/{n}envs", "env steps/s", run, meta), model.get_env().close


def _rlamd_contender(n: int, precision: str, device: torch.device, iters: int) -> _Built:
    """rlamd's env steps/s through the training loop, learning included."""
    loop, agent = _rlamd_loop(n, precision, device)

    def run() -> int:
        for _ in range(iters):
            loop.iterate()
        return iters * loop.rollout.num_steps * loop.collector.num_envs

    mode = agent.precision.mode
    meta = {"device": str(device), "num_envs": n, "precision": mode}
    name = f"ppo/rlamd_{mode}/{n}envs"
    return Contender(name, "env steps/s", timed(run, device=device), meta), loop.collector.close


def _raw_contender(n: int) -> _Built:
    """The raw vector env with random actions: the ceiling no learner can pass."""
    from rlamd.bench.env import _raw

    raw = _raw(GAME, n)
    raw.reset(seed=0)
    acts = [np.random.default_rng(0).integers(0, 4, n) for _ in range(256)]

    def run_raw() -> int:
        for a in acts:
            raw.step(a)
        return len(acts) * len(acts[0])

    name = f"ppo/raw_env_ceiling/{n}envs"
    return Contender(name, "env steps/s", timed(run_raw), {"num_envs": n}), raw.close


def _peer_contenders(
    n: int, device: torch.device, iters: int, notes: list[str]
) -> list[tuple[str, str, _Built]]:
    """(row label, peer key, contender) for SB3 and RLlib, each skipped with a note when
    it cannot run (RLlib off the CPU: its learner runs on the CPU here, not comparable)."""
    out = []
    try:
        out.append(("SB3 PPO (fp32)", "sb3", _sb3_contender(n, device, iters)))
    except PeerUnavailable as exc:
        notes.append(f"Stable-Baselines3 skipped: {exc}")
    try:
        if device.type != "cpu":
            raise PeerUnavailable(f"RLlib's figure is CPU-only in this bench (device {device})")
        out.append(("RLlib PPO (fp32)", "rllib", _rllib_contender(n, iters)))
    except PeerUnavailable as exc:
        notes.append(f"RLlib skipped: {exc}")
    return out


def _measure_count(
    n: int,
    device: torch.device,
    iters: int,
    repeats: int,
    precisions: tuple[str, ...],
    peers: bool,
    notes: list[str],
) -> tuple[list[Figure], list[tuple[str, ...]]]:
    """Every contender for ``n`` envs, interleaved; their figures and table rows."""
    built: list[tuple[str, str, _Built]] = []
    try:
        for precision in distinct_precisions(precisions, device):
            built.append(("rlamd", "", _rlamd_contender(n, precision, device, iters)))
        built += _peer_contenders(n, device, iters, notes) if peers else []
        built.append(("raw AtariVectorEnv (no learning)", "raw", _raw_contender(n)))
        figures = interleave([c for _, _, (c, _) in built], repeats=repeats)
    finally:
        for _, _, (_, close) in built:
            close()
    base, rows = figures[0], []
    for (who, peer, _), f in zip(built, figures, strict=True):
        r = ratio(f, base)
        if peer in ("sb3", "rllib"):
            note_ratio(base, f"ratio_to_{peer}", ratio(base, f))
        label = f"rlamd ({f.meta['precision']})" if who == "rlamd" else who
        rows.append((label, str(n), f"{f.median:,.0f}", r.cell()))
    return figures, rows


def run_ppo_suite(
    iters: int = 3,
    repeats: int = 3,
    device: torch.device | str = "cpu",
    env_counts: tuple[int, ...] = (8,),
    precisions: tuple[str, ...] = ("auto", "fp32"),
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    device = torch.device(device)
    figures: list[Figure] = []
    rows: list[tuple[str, ...]] = []
    notes = [] if notes is None else notes
    for n in env_counts:
        got, got_rows = _measure_count(n, device, iters, repeats, precisions, peers, notes)
        figures += got
        rows += got_rows
    print(
        f"\nppo on {device}: Breakout, 128 steps x envs per rollout, 4 epochs x 4 minibatches "
        f"(median of {repeats} interleaved rounds x {iters} rollouts; ratio = steps/s / rlamd "
        f"{precisions[0]}'s, median per round (min-max))"
    )
    print_table(rows, ("framework", "envs", "env steps/s", "ratio"))
    for f in figures:
        for peer, name in (("sb3", "SB3"), ("rllib", "RLlib")):
            if f"ratio_to_{peer}" in f.meta:
                lo, hi = f.meta[f"ratio_to_{peer}_range"]
                print(
                    f"rlamd {f.meta['precision']} with {f.meta['num_envs']} envs: "
                    f"{f.meta[f'ratio_to_{peer}']:.2f}x {name}'s env steps/s "
                    f"(rounds {lo:.2f}-{hi:.2f})"
                )
    return figures
