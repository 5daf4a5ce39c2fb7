"""Sample Factory 2.1.1 (asynchronous PPO, APPO) as a peer, in its own interpreter.

It pins ``gymnasium<1.0`` and ``numpy<2``, so it lives in its own venv
(``bash scripts/setup.sh --bench-peers`` makes ``.venv-peers/samplefactory``; or
``--peer-python samplefactory=PATH``) and only ever runs as a child process
(:mod:`rlamd.bench.peers.sf_child`, started by path so it imports nothing of rlamd).

Settings are its own defaults, as its docs give them: on Atari the ``sf_examples.atari``
defaults, chosen to match CleanRL (8 workers x 1 env, rollout 128, batch 256, 4 epochs x
4 minibatches, lr 2.5e-4 linearly decayed, clip 0.1, synchronous; its docs call them "not
tuned for throughput" and give a faster set for 16 workers x 8 envs, sized for a bigger
machine than 2 cores); on CartPole the command its ``sf_examples/train_gym_env.py``
documents (``num_workers`` defaulting to the core count). Two switches are the bench's:
the device, and ``summaries_use_frameskip=False`` so env steps count agent decisions, as
rlamd counts them. ``use_rnn=False`` everywhere (both examples' own choice), so a
stateless policy can play the race's evaluations.

Races: the child exports a TorchScript policy at each evaluation step; this process (in
rlamd's venv) plays it on rlamd's env with the race's protocol while training goes on.
Throughput: the child's progress lines are read while it runs, and it is held stopped
(SIGSTOP) between its timed windows so it never runs beside another contender.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from rlamd.bench.peer import (
    BasePeer,
    PeerUnavailable,
    PPOSettings,
    Recipe,
    Throughput,
    peer_python,
    require,
)
from rlamd.bench.peer import recipe as find_recipe

__all__ = ["PEER", "RECIPES"]

_CHILD = Path(__file__).with_name("sf_child.py")
_DOCS = "alex-petrenko/sample-factory 2.1.1"
RECIPES: dict[tuple[str, str], Recipe] = {
    ("atari", "ppo"): Recipe(8, 10_000_000, {"algo": "APPO"},
        f"{_DOCS} sf_examples/atari/atari_params.py (CleanRL-matching defaults)", "own defaults"),
    ("CartPole-v1", "ppo"): Recipe((os.cpu_count() or 1) * 20, 10_000_000, {
        "algo": "APPO", "use_rnn": False, "num_envs_per_worker": 20,
        "policy_workers_per_policy": 2, "recurrence": 1, "with_vtrace": False,
        "batch_size": 512, "reward_scale": 0.1,
    }, f"{_DOCS} sf_examples/train_gym_env.py (its CartPole command)", "own defaults"),
}  # fmt: skip


def _sf_env(env: str) -> tuple[str, str]:
    """(Sample Factory's env name, family) for rlamd's env name."""
    from rlamd.envs import parse_env_id

    parsed = parse_env_id(env)
    if parsed.family == "atari":
        if parsed.sticky:
            raise PeerUnavailable(f"{env}: Sample Factory's Atari envs are NoFrameskip-v4 only")
        return "atari_" + parsed.game.replace("_", ""), "atari"
    return parsed.game, "classic"


def _argv(rec: Recipe, env: str, folder: Path, seed: int, steps: int, device: str, every: int):
    sf_env, family = _sf_env(env)
    cmd = [peer_python("samplefactory"), str(_CHILD), "--sf-env", sf_env, "--family", family]
    cmd += ["--dir", str(folder), "--eval-every", str(every), "--"]
    cmd += [f"--{k}={v}" for k, v in rec.kwargs.items()]
    cmd += [f"--train_dir={folder / 'sf'}", "--experiment=run", "--restart_behavior=overwrite"]
    cmd += [f"--seed={seed}", f"--train_for_env_steps={steps}", "--summaries_use_frameskip=False"]
    cmd += ["--device=" + ("gpu" if device.startswith("cuda") else "cpu"), "--with_wandb=False"]
    return [*cmd, "--keep_checkpoints=4", "--heartbeat_reporting_interval=100000"]


class _Child:
    """The child process and its progress: (time, env steps) from each progress line."""

    def __init__(
        self, cmd: list[str], log: Path, threads: int | None = None, group: bool = False
    ) -> None:
        """``group``: its own process group (held with SIGSTOP between throughput windows);
        else it stays in the caller's, so a race's SIGINT or SIGKILL of the group reaches it."""
        env = dict(os.environ)
        if threads:
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        self.log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, start_new_session=group)  # fmt: skip
        self.progress: list[tuple[float, int]] = []
        self.group = group
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("RLAMD_PROGRESS "):
                got = json.loads(line.split(" ", 1)[1])
                self.progress.append((time.monotonic(), int(got["steps"])))
            else:
                self.log.write(line)

    def steps(self) -> int:
        return self.progress[-1][1] if self.progress else 0

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig) if self.group else self.proc.send_signal(sig)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()
        self.log.close()


class SampleFactory(BasePeer):
    name, label, colour = "samplefactory", "Sample Factory", "#d68910"
    measurements = frozenset({"ppo", "race"})

    def unavailable(self) -> str | None:
        python = peer_python(self.name)
        try:
            require("sample_factory", "make its venv with `bash scripts/setup.sh --bench-peers` "
                    "or pass --peer-python samplefactory=PATH", python)  # fmt: skip
        except PeerUnavailable as exc:
            return str(exc)
        return None

    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput:
        """APPO with its own defaults for the env; each ``run()`` is one window of running."""
        key = "atari" if settings.family == "atari" else settings.gym_id
        rec = RECIPES.get((key, "ppo"))
        if rec is None or (reason := self.unavailable()) is not None:
            raise PeerUnavailable(reason or f"no Sample Factory settings for {settings.gym_id}")
        from rlamd.envs import parse_env_id

        env = "breakout" if settings.family == "atari" else parse_env_id(settings.gym_id).game
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="rlamd-sf-"))
        child = _Child(
            _argv(rec, env, folder, 0, 10**9, str(device), 0), folder / "log.txt", group=True
        )
        deadline = time.monotonic() + 300
        while child.steps() < 2 * settings.per_rollout:  # warm-up: started, past the first updates
            if child.proc.poll() is not None or time.monotonic() > deadline:
                child.close()
                raise PeerUnavailable(f"Sample Factory did not start (log: {folder / 'log.txt'})")
            time.sleep(0.2)
        child.signal(signal.SIGSTOP)
        window = max(10.0, iters * 6.0)

        def run() -> float:
            """One window of running: env steps/s between its first and last progress line
            (its learner reports once per batch), else over the whole window."""
            child.signal(signal.SIGCONT)
            t0, s0, n0 = time.monotonic(), child.steps(), len(child.progress)
            time.sleep(window)
            child.signal(signal.SIGSTOP)
            inside = child.progress[n0:]
            if len(inside) >= 2 and inside[-1][0] > inside[0][0]:
                (ta, sa), (tb, sb) = inside[0], inside[-1]
                return (sb - sa) / (tb - ta)
            return (child.steps() - s0) / (time.monotonic() - t0)

        meta = {"num_envs": rec.n_envs, "precision": "fp32", "window_s": window, **rec.to_dict()}
        return Throughput("Sample Factory APPO (own defaults)", run, child.close, meta, per="self")

    def race_skip(self, env: str, algo: str) -> str | None:
        if find_recipe(RECIPES, env, algo) is None:
            return f"Sample Factory races PPO (APPO) on Atari and CartPole only, not {env} / {algo}"
        return self.unavailable()

    def race_command(self, proto: Any, algo: str, seed: int, folder: Path):
        from rlamd.bench.race_child import child_command

        rec = find_recipe(RECIPES, proto.env, algo)
        assert rec is not None
        cmd = child_command(self.name, proto, algo, seed, folder)
        cmd += ["--peer-python", f"{self.name}={peer_python(self.name)}"]
        return cmd, {**rec.to_dict(), "steps": proto.steps or rec.steps}

    def race_train(self, args: Any, stop: threading.Event, evals: Any) -> None:
        """Start the child; play each exported policy on rlamd's env as it appears."""
        import torch

        rec = find_recipe(RECIPES, args.env, args.algo)
        if rec is None or (reason := self.unavailable()) is not None:
            raise PeerUnavailable(reason or f"no Sample Factory recipe for {args.env}")
        folder = Path(args.dir)
        steps = args.steps or rec.steps
        cmd = _argv(rec, args.env, folder, args.seed, steps, args.device, args.eval_every)
        child = _Child(cmd, folder / "sf_log.txt", args.threads)
        gen = torch.Generator().manual_seed(args.seed)
        try:
            while not stop.is_set() and child.proc.poll() is None:
                ready = sorted(folder.glob("policy_*.pt"))
                if not ready:
                    time.sleep(0.2)
                    continue
                for path in ready[:-1]:
                    path.unlink()  # an older export than the newest: never played
                net = torch.jit.load(str(ready[-1]))
                step = int(ready[-1].stem.split("_")[1])
                ready[-1].unlink()

                def act(obs: torch.Tensor, net=net) -> torch.Tensor:
                    with torch.no_grad():
                        logits = net(obs)
                    return torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)[:, 0]

                evals.maybe(step, act)
        finally:
            child.close()


PEER = SampleFactory()
