"""Sample Factory 2.1.1 (APPO) as a peer. It pins ``gymnasium<1.0`` and ``numpy<2``, so it
runs as a child (``sf_child.py``, by path, importing nothing of rlamd) under its own venv,
with its own defaults (``samplefactory.toml``; the bench sets the device; env steps are agent
decisions). The child exports TorchScript policies that the race plays on rlamd's env; for
throughput it is SIGSTOPped between timed windows."""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from rlamd.bench.child import Child, thread_env
from rlamd.bench.peer import BasePeer, PeerUnavailable, PPOSettings, Recipe, Throughput, peer_python

__all__ = ["PEER"]


def _start(rec: Recipe, args: Any, folder: Path, group: bool = False) -> Child:
    """Sample Factory's child training ``rec`` with a race child's ``args`` (rlamd's env name,
    seed, steps (0: the recipe's), device, eval every, threads) in ``folder``."""
    from rlamd.envs import parse_env_id

    parsed, steps = parse_env_id(args.env), args.steps or rec.steps
    if parsed.family == "atari" and parsed.sticky:
        raise PeerUnavailable(f"{args.env}: Sample Factory's Atari envs are NoFrameskip-v4 only")
    sf_env = "atari_" + parsed.game.replace("_", "") if parsed.family == "atari" else parsed.game
    child = Path(__file__).with_name("sf_child.py")
    cmd = [peer_python(PEER.name), str(child), "--sf-env", sf_env, "--dir", str(folder)]
    cmd += ["--eval-every", str(args.eval_every)]
    cmd += ["--", *(f"--{k}={v}" for k, v in rec.kwargs.items())]
    cmd += [f"--train_dir={folder / 'sf'}", "--experiment=run", "--restart_behavior=overwrite"]
    device = "gpu" if args.device.startswith("cuda") else "cpu"
    cmd += [f"--seed={args.seed}", f"--train_for_env_steps={steps}", f"--device={device}"]
    cmd += ["--summaries_use_frameskip=False", "--with_wandb=False", "--keep_checkpoints=4"]
    cmd += ["--heartbeat_reporting_interval=100000"]
    return Child(cmd, folder / "sf_log.txt", group=group, env=thread_env(args.threads))


class SampleFactory(BasePeer):
    name, label, colour = "samplefactory", "Sample Factory", "#d68910"
    measurements = frozenset({"ppo", "race"})
    how = "make its venv with `bash scripts/setup.sh --bench-peers` or pass --peer-python"
    requires, own_python = ("sample_factory", f"{how} samplefactory=PATH"), True
    no_recipe = "Sample Factory races PPO (APPO) on Atari and CartPole only, not {env} / {algo}"

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        """APPO with its own defaults for the env; each ``run()`` is one window of running."""
        env = "breakout" if settings.family == "atari" else settings.gym_id
        rec = self.recipe(env, "ppo")
        folder = Path(tempfile.mkdtemp(prefix="rlamd-sf-"))
        opts = {"env": env, "seed": 0, "steps": 10**9, "device": str(device), "threads": None}
        child = _start(rec, Namespace(**opts, eval_every=0), folder, group=True)
        steps, deadline = 0, time.monotonic() + 300
        while steps < 2 * settings.per_rollout:  # warm-up: started, past the first updates
            steps = max([steps, *(got.get("steps", 0) for _, got in child.drain())])
            if child.proc.poll() is not None or time.monotonic() > deadline:
                child.close()
                raise PeerUnavailable(f"Sample Factory did not start (log: {child.log_path})")
            time.sleep(0.2)
        child.signal(signal.SIGSTOP)
        window, last = max(10.0, iters * 6.0), [steps]

        def run() -> float:
            """Env steps/s between its first and last progress line in a window (its learner
            reports once per batch); a starved machine gets up to 5 more windows to report."""
            stale = child.drain()  # read after the last window stopped it: not this window's
            s0 = max([last[0], *(line.get("steps", 0) for _, line in stale)])
            child.signal(signal.SIGCONT)
            t0, got = time.monotonic(), []
            while len(got) < 2 and time.monotonic() < t0 + 6 * window:
                time.sleep(window if not got else 1.0)
                got += [(t, line["steps"]) for t, line in child.drain() if "steps" in line]
            child.signal(signal.SIGSTOP)
            last[0] = got[-1][1] if got else s0
            if len(got) >= 2 and got[-1][0] > got[0][0]:
                return (got[-1][1] - got[0][1]) / (got[-1][0] - got[0][0])
            return (last[0] - s0) / (time.monotonic() - t0)

        meta = {"num_envs": rec.n_envs, "precision": "fp32", "window_s": window, **rec.to_dict()}
        return Throughput("Sample Factory APPO (own defaults)", run, child.close, meta, per="self")

    def race_train(self, args: Any, stop: Any, evals: Any) -> None:
        """Start the child; play each exported policy on rlamd's env as it appears."""
        import torch

        rec, folder = self.recipe(args.env, args.algo), Path(args.dir)
        child = _start(rec, args, folder)
        gen = torch.Generator().manual_seed(args.seed)
        try:
            while not stop.is_set() and child.proc.poll() is None:
                _warn(child)
                ready = sorted(folder.glob("policy_*.pt"))
                if not ready:
                    time.sleep(0.2)
                    continue
                for path in ready[:-1]:
                    path.unlink()  # an older export than the newest: never played
                net = torch.jit.load(str(ready[-1]))
                ready[-1].unlink()

                def act(obs: torch.Tensor, net=net) -> torch.Tensor:
                    with torch.no_grad():
                        probs = torch.softmax(net(obs), -1)
                    return torch.multinomial(probs, 1, generator=gen)[:, 0]

                evals.maybe(int(ready[-1].stem.split("_")[1]), act)
        finally:
            child.close()
            _warn(child)  # what came after the last pass


def _warn(child: Child) -> None:
    """Its child's warnings (failed exports) as ``warning:`` lines: the race counts them."""
    for _, line in child.drain():
        if "warning" in line:
            print(f"warning: Sample Factory {line['warning']}", file=sys.stderr)


PEER = SampleFactory()
