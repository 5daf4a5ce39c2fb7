"""Engines: what the run loop (:mod:`rlamd.runner`) steps.

An engine hides *where* training happens. :class:`LocalEngine` keeps the collector,
the replay (or rollout) and the learner in this process;
:class:`rlamd.distributed.driver.RayEngine` spreads them over a Ray cluster. Both
implement :class:`Engine` fully, so the loop, logs, checkpoints and resume are one code
path for both.
"""

from __future__ import annotations

import json
import resource
from collections.abc import Callable
from typing import NamedTuple, Protocol

import torch

from rlamd.algos import build_agent, get_algorithm
from rlamd.algos.base import Policy
from rlamd.collector import Collector
from rlamd.config.sections import RunConfig
from rlamd.device import describe_device, resolve_device
from rlamd.envs import env_notes, make_env
from rlamd.machine import machine_info
from rlamd.precision import configure_tf32
from rlamd.threads import LoadWatch, apply_threads, plan_threads
from rlamd.threads import describe as describe_threads

__all__ = ["Engine", "Forecast", "LocalEngine", "device_memory_mb"]

Episodes = list[tuple[float, int]]
"""(real score, length) of each episode that ended."""


class Forecast(NamedTuple):
    """What a run can expect, from the speeds measured in its first seconds."""

    line: str
    """One line for the log."""
    remaining: Callable[[int], float]
    """Seconds left at a given step (the progress lines' ETA)."""


class Engine(Protocol):
    """The interface :func:`rlamd.runner.run` drives."""

    updates: int
    """Learner updates so far (the run's, resumed ones included)."""
    detail: str
    """Lines for the log: device or cluster layout, algorithm, replay."""
    about: tuple[str, str]
    """``(file name, text)`` written into the run folder (device.json, cluster.txt)."""
    device: torch.device
    """Where this process computes (the learner's device locally; the CPU on a Ray driver)."""

    def iterate(self) -> list[tuple[int, Episodes]]:
        """Train a little: ``(env steps, finished episodes)`` per vector step or chunk."""
        ...

    def metrics(self) -> dict[str, float]:
        """Metrics since the last call, for TensorBoard and the progress line."""
        ...

    def agent_state(self) -> dict:
        """The agent's whole state (on the CPU where it crosses processes)."""
        ...

    def extra_state(self) -> dict:
        """What else a checkpoint holds (RNG, replay); ``{}`` if nothing."""
        ...

    def restore(self, state: dict) -> list[str]:
        """Take the non-agent parts of a checkpoint; returns lines saying what came back."""
        ...

    def eval_policy(self) -> tuple[Policy, torch.device]:
        """A policy for evaluation and the device it runs on."""
        ...

    def forecast(self, step: int, sps: float) -> Forecast | None:
        """What to expect (duration, memory), where that is worth saying."""
        ...

    def close(self) -> None: ...


def device_memory_mb(device: torch.device) -> float:
    """Memory the run holds on ``device`` (the process's peak RSS on the CPU), in MiB."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class LocalEngine:
    """Collector, replay (or rollout) and learner in this process.

    Args:
        cfg: the run's configuration.
        start_step: env steps already done (when resuming).
        agent_state: the agent's state from a checkpoint, or None.
        log: where messages go (the run's logger once it exists).
    """

    def __init__(self, cfg: RunConfig, start_step: int, agent_state: dict | None, log) -> None:
        train = cfg.train
        self.cfg, self.algo, self._log = cfg, get_algorithm(train.algo), log
        self.device = resolve_device(train.device)
        self.info = describe_device(self.device)
        plan = plan_threads(train.threads, train.num_envs)
        apply_threads(plan)
        env = make_env(
            train.env,
            num_envs=train.num_envs,
            atari=cfg.atari,
            threads=plan.env_threads,
            module=train.env_module,
            env_cfg=cfg.env,
        )
        # Fewer torch threads while other processes hold cores: OpenMP splits every op
        # evenly and waits for its slowest thread (docs/ARCHITECTURE.md, rule 7).
        cpu_auto = train.threads is None and self.device.type == "cpu"
        self._watch = LoadWatch(plan) if cpu_auto else None
        configure_tf32(train.tf32, self.device)
        self.agent = build_agent(cfg, self.device, env, agent_state, log)
        self.collector = Collector(env, self.device, seed=train.seed + start_step)
        self.loop = self.algo.local_loop(cfg, self.collector, self.agent, start_step, log)
        self.detail = (
            f"rlamd: {self.info.summary()} | precision {self.agent.precision.mode}\n"
            f"rlamd: {train.algo} on {train.env} x{train.num_envs}, {self.loop.describe()}\n"
            + describe_threads(plan)
            + (", adapted to other processes' load" if self._watch else "")
            + "".join(f"\nrlamd: note: {n}" for n in env_notes(train.env, train.env_module))
        )
        self.about = ("device.json", json.dumps(machine_info(self.device, self.info), indent=2))

    @property
    def updates(self) -> int:
        return self.agent.updates

    def iterate(self) -> list[tuple[int, Episodes]]:
        if self._watch is not None:
            self._watch.update()
        n = self.collector.num_envs
        return [(n, s.finished()) for s in self.loop.iterate()]

    def metrics(self) -> dict[str, float]:
        """The loop's metrics, the memory held, and what came from the env non-finite (said
        in a line naming the envs, when anything did)."""
        health = self.collector.health
        line = health.take()
        if line is not None:
            self._log(line)
        return {
            **self.loop.metrics(),
            "system/device_memory_mb": device_memory_mb(self.device),
            "env/nonfinite_observations": float(health.total_obs),
            "env/nonfinite_rewards": float(health.total_reward),
        }

    def agent_state(self) -> dict:
        return self.agent.state_dict()

    def extra_state(self) -> dict:
        return {
            "torch_rng": torch.get_rng_state(),
            **self.loop.state_dict(include_replay=self.cfg.train.save_replay),
        }

    def restore(self, state: dict) -> list[str]:
        if "torch_rng" in state:
            torch.set_rng_state(state["torch_rng"])
        return self.loop.load_state_dict(state)

    def eval_policy(self) -> tuple[Policy, torch.device]:
        return self.algo.policy(self.agent, self.cfg), self.device

    def forecast(self, step: int, sps: float) -> Forecast | None:
        """On a CPU: how long the run will take and what the replay holds (a 10M-step Atari
        DQN runs for most of two days there), and what fits a CPU better."""
        if self.device.type != "cpu":
            return None
        train = self.cfg.train
        learning = self.loop.learning_sps(sps)
        starts = self.loop.learning_starts

        def remaining(at: int) -> float:
            before = max(0, min(starts, train.steps) - at)
            return before / sps + max(0, train.steps - at - before) / learning

        if starts > step:
            speed = f"about {sps:,.0f} env steps/s before learning starts and {learning:,.0f} after"
        else:
            speed = f"about {learning:,.0f} env steps/s with learning"
        memory = self.loop.memory_bytes()
        held = f"; the replay holds {_size(memory)} of host memory" if memory else ""
        hint = (
            "For a first result on a CPU: cartpole --algo ppo (learns in under a minute)."
            if train.family == "atari"
            else ""
        )
        line = (
            f"rlamd: no GPU: this CPU makes {speed} (measured), so the run's "
            f"{train.steps:,} steps take about {_duration(remaining(step))} more{held}. {hint}"
        ).rstrip()
        return Forecast(line, remaining)

    def close(self) -> None:
        self.collector.close()


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MiB"


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{seconds:.0f} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"
