"""``python -m rlamd.evaluate RUN_OR_CKPT``: the real game score of a trained agent.

Evaluation plays whole games (no life loss as episode end, no reward clipping), with a
small evaluation epsilon, and reports mean, std, min and max of the scores. ``--json``
prints one machine-readable object; ``--video DIR`` writes one GIF per episode of env 0
(Atari from its frames, other envs from ``render()``; an env that cannot render is
refused before anything is played).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from PIL import Image

from rlamd.algos import build_agent, get_algorithm
from rlamd.checkpoint import CheckpointError, find_checkpoint, load_checkpoint
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.config.values import HelpFormatter, help_text
from rlamd.device import DEVICE_HELP, DeviceError, resolve_device
from rlamd.envs import (
    AtariConfig,
    EnvConfig,
    EnvFault,
    make_env,
    parse_env_id,
    probe_env,
    render_problem,
)
from rlamd.envvars import check_environment
from rlamd.hostalloc import tune_host_allocator

__all__ = [
    "EVAL_MAX_STEPS",
    "Evaluation",
    "episode_quota",
    "evaluate_episodes",
    "evaluate_policy",
    "main",
]


EVAL_MAX_STEPS = 27_000
"""Steps an evaluation episode of an env without a time limit of its own may take (108,000
Atari frames at frame skip 4: the cap score tables use); ``env.eval_max_steps`` sets it."""
PROGRESS_EVERY_S = 10.0
"""A long evaluation says how far it is at least this often."""


class Evaluation(NamedTuple):
    """What an evaluation played."""

    scores: list[float]
    """Each counted episode's real score (an episode the cap cut: its score so far)."""
    cut: int
    """Counted episodes that the step cap cut (``cap`` steps without an end)."""
    cap: int | None
    """The step cap rlamd put on each episode (None: the env's own limit, or Atari's)."""
    steps: int
    """Env steps played."""
    asked: int
    """Episodes asked for: more than ``len(scores)`` when the play ran out of steps."""

    def note(self) -> str:
        """:meth:`remarks` in brackets after a space, to follow the scores ("" if none)."""
        remarks = self.remarks()
        return f" ({remarks})" if remarks else ""

    def remarks(self) -> str:
        """Episodes the cap cut, and the play that ran out before every episode ended."""
        said = []
        if self.cut:
            said.append(
                f"{self.cut} cut at {self.cap:,} steps without an end: env.eval_max_steps "
                "sets the cap"
            )
        if len(self.scores) < self.asked:
            fix = "a lower env.eval_max_steps cuts them sooner" if self.cap else "ask fewer"
            said.append(
                f"only {len(self.scores)} of {self.asked} episodes ended in the "
                f"{self.steps:,} steps an evaluation may play; {fix}"
            )
        return "; ".join(said)


def eval_seed(train_seed: int, step: int) -> int:
    """The env seed of the periodic evaluation at ``step`` of a run seeded ``train_seed``.

    Runs with different seeds play different evaluation episodes at the same step (their
    seeds are a prime 1,000,003 apart), so a spread over seeds holds the episodes' own
    variation, as SB3's and CleanRL's do. Kept below ale-py's C ``int`` limit, with room
    for the eval envs' ``seed + i``.
    """
    return (10_000 + step + 1_000_003 * train_seed) % (2**31 - 64)


def episode_quota(episodes: int, num_envs: int) -> np.ndarray:
    """How many episodes each of ``num_envs`` envs plays into an evaluation of ``episodes``:
    fixed before anything is played (they sum to ``episodes``, as SB3's ``evaluate_policy``
    splits them). Taking instead the first ``episodes`` to finish would favour short
    episodes, which on a task like Hopper are the failed ones: 2 of 10 episodes so chosen
    pulled a bimodal policy's mean down by about a sixth (``results/eval_quota/``)."""
    return np.array([(episodes + i) // num_envs for i in range(num_envs)], dtype=np.int64)


def evaluate_policy(
    policy: Callable[[torch.Tensor], torch.Tensor], env_name: str, episodes: int, **kwargs
) -> list[float]:
    """:func:`evaluate_episodes`' scores."""
    return evaluate_episodes(policy, env_name, episodes, **kwargs).scores


def _cap(env_name: str, module: str | None, env_cfg: EnvConfig | None) -> int | None:
    """The step cap evaluation puts on a non-Atari env: ``env.eval_max_steps``, else none
    where the env has a limit of its own, else :data:`EVAL_MAX_STEPS`."""
    cfg = env_cfg or EnvConfig()
    if cfg.eval_max_steps is not None:
        return cfg.eval_max_steps
    if cfg.max_episode_steps is not None or probe_env(env_name, module).max_episode_steps:
        return None
    return EVAL_MAX_STEPS


def evaluate_episodes(
    policy: Callable[[torch.Tensor], torch.Tensor],
    env_name: str,
    episodes: int,
    *,
    device: torch.device,
    seed: int = 10_000,
    atari=None,
    num_envs: int | None = None,
    video_dir: Path | None = None,
    max_steps: int = 2_000_000,
    module: str | None = None,
    env_cfg: EnvConfig | None = None,
    say: Callable[[str], None] | None = None,
) -> Evaluation:
    """Play ``episodes`` whole episodes with ``policy``: their real scores and what was cut.

    Each env plays its :func:`episode_quota`. ``video_dir`` gets one GIF per episode env 0
    counts: Atari from its frames, every other env from ``render()`` (check first with
    :func:`rlamd.envs.render_problem`). ``module`` and ``env_cfg`` make the env as the run
    did (``train.env_module``, the ``env`` section). An episode of an env without an end
    is cut at the cap (:func:`_cap`) and counted with its score so far; play stops at
    ``max_steps`` env steps in all. ``say`` hears progress every :data:`PROGRESS_EVERY_S` s.
    """
    is_atari = parse_env_id(env_name, module).family == "atari"
    eval_atari = (atari or AtariConfig()).for_evaluation() if is_atari else None
    cap = None if is_atari else _cap(env_name, module, env_cfg)
    if cap is not None:
        env_cfg = replace(env_cfg or EnvConfig(), max_episode_steps=cap)
    n = num_envs or min(episodes, 8)
    render = video_dir is not None and not is_atari
    env = make_env(
        env_name, num_envs=n, atari=eval_atari, module=module, env_cfg=env_cfg, render=render
    )
    collector = Collector(env, device, seed)
    scores: list[float] = []
    cut = 0
    quota = episode_quota(episodes, n)
    played = np.zeros(n, dtype=np.int64)
    video = _Video(video_dir, env, int(quota[0])) if video_dir is not None else None
    steps, told = 0, time.monotonic()
    try:
        while (played < quota).any() and steps < max_steps:
            _, _, s = collector.step(policy)
            steps += n
            if video is not None:
                video.step(s)
            for i in np.flatnonzero(s.done):
                if played[i] < quota[i]:
                    scores.append(float(s.episode_return[i]))
                    cut += bool(cap and s.truncated[i] and s.episode_length[i] >= cap)
                played[i] += 1
            if say is not None and time.monotonic() - told >= PROGRESS_EVERY_S:
                told = time.monotonic()
                say(
                    f"rlamd: evaluating: {len(scores)} of {episodes} episodes done, {steps:,} steps"
                )
    finally:
        collector.close()
    return Evaluation(scores, cut, cap, steps, episodes)


class _Video:
    """GIFs of env 0's first ``quota`` episodes: rendered frames where the env records
    them (``VecEnv.recorder``), else the newest frame of each observation (Atari)."""

    def __init__(self, folder: Path, env, quota: int) -> None:
        self.folder, self.recorder, self.quota = folder, env.recorder, quota
        self.frames: list[np.ndarray] = []
        self.written = 0

    def step(self, s) -> None:
        if self.written >= self.quota:
            return
        if self.recorder is not None:
            for frames in self.recorder.take():
                self._write(frames)
            return
        self.frames.append((s.final_obs if s.done[0] else s.obs)[0])
        if s.done[0]:
            self._write(self.frames)
            self.frames = []

    def _write(self, frames: list[np.ndarray]) -> None:
        if self.written < self.quota and frames:
            _write_gif(self.folder / f"episode_{self.written:03d}.gif", frames)
            self.written += 1


def _write_gif(path: Path, frames: list[np.ndarray]) -> None:
    """Frames to an animated GIF: ``(H, W, 3)`` RGB renders (scaled to at most 400 pixels
    wide), or stacks / single gray frames (the newest, scaled 3x)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = []
    for f in frames:
        if f.ndim == 3 and f.shape[-1] in (3, 4):
            img = Image.fromarray(np.ascontiguousarray(f[..., :3]))
            if img.width > 400:
                img = img.resize((400, max(1, img.height * 400 // img.width)), Image.BILINEAR)
        else:
            gray = f[-1] if f.ndim == 3 else f  # newest frame of a stack
            img = Image.fromarray(gray).resize(
                (gray.shape[1] * 3, gray.shape[0] * 3), Image.NEAREST
            )
        images.append(img)
    images[0].save(path, save_all=True, append_images=images[1:], duration=33, loop=0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rlamd.evaluate",
        description=help_text(__doc__.splitlines()[0]),
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "run",
        metavar="RUN_OR_CKPT",
        help="a checkpoint file, a run folder, or a run name under --logdir",
    )
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default: 10)")
    p.add_argument(
        "--video", metavar="DIR", default=None, help="write a GIF per episode of env 0 to DIR"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--seed", type=int, default=10_000, help="env seed (default: 10000)")
    p.add_argument(
        "--epsilon",
        type=float,
        default=None,
        help="the share of random actions during evaluation, for an algorithm that takes "
        "one (default: the agent's eval_epsilon)",
    )
    p.add_argument("--logdir", default="runs", help="where run names are looked up (default: runs)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads torch may use (default: torch's own, one per core)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tune_host_allocator()
    for flag, value in (("--episodes", args.episodes), ("--threads", args.threads)):
        if value is not None and value < 1:
            print(f"error: {flag} {value}; accepted: an integer >= 1", file=sys.stderr)
            return 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        check_environment()
        path = find_checkpoint(args.run, args.logdir)
        state = load_checkpoint(path, advice="evaluate another checkpoint or train a new one")
        device = resolve_device(args.device)
        cfg = RunConfig.from_dict(state["config"])
        agent = build_agent(cfg, device, agent_state=state["agent"])
    except (CheckpointError, DeviceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problem = _video_problem(args.video, cfg)
    if problem is not None:
        print(f"error: --video {args.video}: {problem}", file=sys.stderr)
        return 2
    train = cfg.train
    try:
        policy = get_algorithm(train.algo).policy(agent, cfg, args.epsilon)
    except ValueError as exc:  # an algorithm that takes no --epsilon
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        played = evaluate_episodes(
            policy,
            train.env,
            args.episodes,
            device=device,
            seed=args.seed,
            atari=cfg.atari,
            video_dir=Path(args.video) if args.video else None,
            module=train.env_module,
            env_cfg=cfg.env,
            say=lambda text: print(text, file=sys.stderr, flush=True),
        )
    except EnvFault as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rlamd: evaluation interrupted; nothing was written", file=sys.stderr)
        return 130
    _report(args, path, cfg, int(state["step"]), played)
    return 0


def _video_problem(video: str | None, cfg: RunConfig) -> str | None:
    """Why ``--video`` cannot be written, before anything is played (None: it can)."""
    if not video:
        return None
    folder = Path(video)
    if folder.exists() and not folder.is_dir():
        return "that is a file; accepted: a folder (new or existing) for the GIFs"
    train = cfg.train
    if parse_env_id(train.env, train.env_module).family != "atari":
        problem = render_problem(train.env, train.env_module, cfg.env)
        if problem is not None:
            return (
                f"{train.env} cannot draw frames: {problem}; accepted: an env that renders "
                "with render_mode='rgb_array' (or leave out --video)"
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create that folder ({exc.strerror or exc}); accepted: a folder it can write"
    return None


def _report(args, path: Path, cfg: RunConfig, step: int, played: Evaluation) -> None:
    scores, train = played.scores, cfg.train
    result = {
        "checkpoint": str(path),
        "env": train.env,
        "algo": train.algo,
        "step": step,
        "episodes": len(scores),
        "mean": statistics.fmean(scores) if scores else float("nan"),
        "std": statistics.pstdev(scores) if scores else float("nan"),
        "min": min(scores) if scores else float("nan"),
        "max": max(scores) if scores else float("nan"),
        "scores": scores,
        "cut": played.cut,
        "asked": played.asked,
    }
    if args.json:
        print(json.dumps(result))
    elif not scores:
        print(f"{train.env} ({train.algo}, step {step:,}): no episode finished{played.note()}")
    else:
        print(
            f"{train.env} ({train.algo}, step {step:,}): {len(scores)} episodes, "
            f"score {result['mean']:.2f} +/- {result['std']:.2f} (min {result['min']:.1f}, "
            f"max {result['max']:.1f}){played.note()}"
        )


if __name__ == "__main__":
    sys.exit(main())
