"""Sample Factory's process, under its venv (imports nothing of rlamd): ``PYTHON sf_child.py
--sf-env ENV --dir DIR [--eval-every K] -- ARGS`` trains APPO with its own parser, envs and
wrappers (``atari_GAME``), printing ``{"steps": N}`` each training step; each passed multiple
of ``--eval-every`` writes a checkpoint that a thread exports as ``DIR/policy_STEPS.pt``
(TorchScript: observations -> action logits)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

_SAYING = threading.Lock()


def _say(doc: dict) -> None:
    """One JSON line to the bench, whole (two threads write them)."""
    with _SAYING:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def _make_env(name, cfg=None, env_config=None, render_mode=None):
    """Its own Atari env (``atari_GAME``), after registering ale-py's ids (each spawned worker
    needs them), else as its gym example makes one (module level: workers pickle it)."""
    import gymnasium as gym

    if not name.startswith("atari_"):
        return gym.make(name, render_mode=render_mode)
    from ale_py.registration import register_v0_v4_envs
    from sf_examples.atari.atari_utils import make_atari_env

    if "PongNoFrameskip-v4" not in gym.registry:
        register_v0_v4_envs()
    return make_atari_env(name, cfg, env_config, render_mode=render_mode)


def _config(sf_env: str, argv: list[str]):
    from sample_factory.envs.env_utils import register_env

    register_env(sf_env, _make_env)
    if sf_env.startswith("atari_"):
        from sf_examples.atari.train_atari import parse_atari_args

        return parse_atari_args(argv)
    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args

    parser, _ = parse_sf_args(argv=argv)
    return parse_full_cfg(parser, argv)


def _export(cfg, runner, path: Path, out: Path) -> None:
    """Learner checkpoint ``path`` as ``out/policy_STEPS.pt`` (TorchScript logits)."""
    import numpy as np
    import torch
    from sample_factory.model.actor_critic import create_actor_critic

    info = runner.env_info
    # Tensors and numbers; once an episode has ended, its best_performance is a numpy
    # float, which weights_only refuses unless numpy's scalar and dtypes are allowed.
    numbers = (np.float64, np.float32, np.int64, np.int32, np.bool_)
    allowed = [np.core.multiarray.scalar, np.dtype, *{type(np.dtype(t)) for t in numbers}]
    with torch.serialization.safe_globals(allowed):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    ac = create_actor_critic(cfg, info.obs_space, info.action_space)
    ac.load_state_dict(ckpt["model"])
    ac.eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ac = ac

        def forward(self, obs):
            head = self.ac.forward_head(self.ac.normalize_obs({"obs": obs}))
            core, _ = self.ac.forward_core(head, head[:, :1])
            out = self.ac.forward_tail(core, values_only=False, sample_actions=False)
            return out["action_logits"]

    space = info.obs_space["obs"]
    example = torch.zeros((8, *space.shape), dtype=torch.from_numpy(space.sample()).dtype)
    with torch.no_grad():
        traced = torch.jit.trace(Logits(), example, check_trace=False)
    tmp = out / f".policy_{ckpt['env_steps']}.tmp"
    traced.save(str(tmp))
    os.replace(tmp, out / f"policy_{ckpt['env_steps']:012d}.pt")


def _exporting(cfg, runner, out: Path) -> None:
    """Forever: each new learner checkpoint exported once (the ``--eval-every`` thread)."""
    folder, seen = Path(cfg.train_dir) / cfg.experiment / "checkpoint_p0", set()
    while True:
        for path in sorted(folder.glob("checkpoint_*.pth")):
            if path.name not in seen:
                seen.add(path.name)
                try:
                    _export(cfg, runner, path, out)
                except Exception as exc:  # a checkpoint rotated away while read
                    _say({"warning": f"export of {path.name} failed: {exc}"})
        time.sleep(0.2)


def main() -> int:
    p = argparse.ArgumentParser(prog="sf_child.py")
    p.add_argument("--sf-env", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("sf_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    from sample_factory.algo.runners.runner import AlgoObserver
    from sample_factory.algo.utils.misc import ExperimentStatus
    from sample_factory.train import make_runner

    sf_args = [a for a in args.sf_args if a != "--"]
    cfg, runner = make_runner(_config(args.sf_env, [f"--env={args.sf_env}", *sf_args]))
    every, due = args.eval_every, [args.eval_every]

    class Progress(AlgoObserver):
        def on_training_step(self, runner, training_iteration_since_resume: int) -> None:
            steps = int(runner.env_steps.get(0, 0))
            _say({"steps": steps})
            if every and steps >= due[0]:
                runner._save_policy()  # the learner writes a checkpoint; the exporter follows
                due[0] = (steps // every + 1) * every

    runner.register_observer(Progress())
    if every:
        threading.Thread(target=_exporting, args=(cfg, runner, out), daemon=True).start()
    status = runner.init()
    if status == ExperimentStatus.SUCCESS:
        status = runner.run()
    return 0 if status in (ExperimentStatus.SUCCESS, ExperimentStatus.INTERRUPTED) else 1


if __name__ == "__main__":
    sys.exit(main())
