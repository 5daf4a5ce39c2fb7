"""PPO env steps/s on a classic-control task, learning included: rlamd against SB3.

CartPole-v1 with 8 envs, both with the same settings: 128 steps per env and rollout,
4 epochs x 4 minibatches of 256, lr 1e-3, clip 0.2, no entropy bonus, gamma 0.99,
lambda 0.95, separate 64x64 tanh MLPs for the policy and the value (SB3's ``MlpPolicy``;
rlamd's classic preset). rlamd runs through :class:`rlamd.engine.LocalEngine`, exactly as
``python -m rlamd.train cartpole --algo ppo`` does (its thread budget included); SB3 with
its defaults. The two are measured in turns, repeat by repeat, so a busy neighbour slows
both alike.
"""

from __future__ import annotations

import torch

from .common import Figure, measure, print_table
from .peers import PeerUnavailable, sb3

__all__ = ["run_classic_suite"]

GYM_ID, ENVS, STEPS = "CartPole-v1", 8, 128
SETTINGS = {
    "ppo.num_steps": STEPS,
    "ppo.num_minibatches": 4,
    "ppo.update_epochs": 4,
    "ppo.lr": 1e-3,
    "ppo.clip_coef": 0.2,
    "ppo.ent_coef": 0.0,
}


def _rlamd_engine(device: torch.device, precision: str):
    from rlamd.config.layers import resolve
    from rlamd.engine import LocalEngine

    flags = {
        "train": {
            "env": "cartpole",
            "algo": "ppo",
            "num_envs": ENVS,
            "device": str(device),
            "precision": precision,
            "steps": 10**9,
        }
    }
    cfg = resolve(flags, sets=[f"{k}={v}" for k, v in SETTINGS.items()])
    return LocalEngine(cfg, 0, None, log=lambda _line: None)


def _sb3_model(device: torch.device):
    """SB3's PPO with the settings above; raises :class:`PeerUnavailable` without SB3."""
    module = sb3()
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(GYM_ID, n_envs=ENVS, seed=0)
    return module.PPO(
        "MlpPolicy",
        env,
        n_steps=STEPS,
        batch_size=STEPS * ENVS // 4,
        n_epochs=4,
        learning_rate=1e-3,
        clip_range=0.2,
        ent_coef=0.0,
        gamma=0.99,
        gae_lambda=0.95,
        device=str(device),
        seed=0,
        verbose=0,
    )


def _interleaved(runs: dict[str, tuple], iters: int, repeats: int) -> dict[str, Figure]:
    """Each contender's figure, measured one repeat at a time in turn."""
    samples: dict[str, list[Figure]] = {k: [] for k in runs}
    for _ in range(repeats):
        for key, (name, fn, meta) in runs.items():
            samples[key].append(measure(name, "env steps/s", fn, repeats=1, warmup=0, **meta))
    out = {}
    for key, figs in samples.items():
        values = sorted(f.median for f in figs)
        first = figs[0]
        out[key] = Figure(
            first.name,
            first.unit,
            values[len(values) // 2],
            values[0],
            values[-1],
            [f.median for f in figs],
            first.meta,
        )
    return out


def _contenders(
    device: torch.device, precisions: tuple[str, ...], peers: bool, iters: int, notes: list[str]
) -> tuple[dict[str, tuple], list]:
    """``{key: (figure name, fn, meta)}`` for rlamd per precision and SB3 (warmed up), and
    what closes them."""
    per_call = iters * STEPS * ENVS
    runs: dict[str, tuple] = {}
    closers = []
    for precision in precisions:
        engine = _rlamd_engine(device, precision)
        engine.iterate()  # warm-up: the first rollout and update
        mode = engine.agent.precision.mode
        closers.append(engine.close)

        def run_rlamd(engine=engine) -> int:
            for _ in range(iters):
                engine.iterate()
            return per_call

        meta = {"num_envs": ENVS, "precision": mode}
        runs[f"rlamd_{mode}"] = (f"classic/rlamd_{mode}/{ENVS}envs", run_rlamd, meta)
    if not peers:
        return runs, closers
    try:
        model = _sb3_model(device)
    except PeerUnavailable as exc:
        notes.append(f"Stable-Baselines3 skipped: {exc}")
        return runs, closers
    model.learn(STEPS * ENVS)  # warm-up
    closers.append(model.get_env().close)

    def run_sb3() -> int:
        model.learn(total_timesteps=per_call, reset_num_timesteps=False)
        return per_call

    meta = {"num_envs": ENVS, "precision": "fp32"}
    runs["sb3"] = (f"classic/sb3_fp32/{ENVS}envs", run_sb3, meta)
    return runs, closers


def run_classic_suite(
    iters: int = 4,
    repeats: int = 5,
    device: torch.device | str = "cpu",
    precisions: tuple[str, ...] = ("auto",),
    peers: bool = True,
    notes: list[str] | None = None,
) -> list[Figure]:
    """rlamd (each of ``precisions``) and SB3, ``iters`` rollouts per repeat, in turns."""
    device = torch.device(device)
    notes = [] if notes is None else notes
    runs, closers = _contenders(device, precisions, peers, iters, notes)
    try:
        figures = _interleaved(runs, iters, repeats)
    finally:
        for close in closers:
            close()
    base = next(iter(figures.values()))
    rows = []
    for key, f in figures.items():
        if "sb3" in figures and key != "sb3":
            f.meta["ratio_to_sb3"] = f.median / figures["sb3"].median
        span = f"{f.min:,.0f}-{f.max:,.0f}"
        rows.append((key, f"{f.median:,.0f}", span, f"{f.median / base.median:.2f}"))
    print(
        f"\nclassic on {device}: PPO on {GYM_ID}, {ENVS} envs x {STEPS} steps, 4 epochs x 4 "
        f"minibatches, learning included (median of {repeats} interleaved repeats of {iters} "
        "rollouts; ratio = steps/s / the first row's)"
    )
    print_table(rows, ("framework", "env steps/s", "range", "ratio"))
    for f in figures.values():
        if "ratio_to_sb3" in f.meta:
            print(f"rlamd {f.meta['precision']}: {f.meta['ratio_to_sb3']:.2f}x SB3's env steps/s")
    return list(figures.values())
