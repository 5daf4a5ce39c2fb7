"""The off-policy iteration: collect a vector step, store it, make the updates due.

Shared by ``python -m rlamd.train`` and the benchmarks, so the benchmarks time exactly
what training runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlamd.collector import Collector
from rlamd.envs import Step

__all__ = ["OffPolicyLoop", "OnPolicyLoop", "learn_from_replay"]


class OffPolicyLoop:
    """Collector -> replay -> learner, with ``num_envs / train_frequency`` updates per vector step.

    Args:
        collector: steps the env with the agent's epsilon-greedy policy.
        buffer: a ``ReplayBuffer`` or ``PrioritizedReplayBuffer``.
        agent: a :class:`rlamd.agents.dqn.DQN`.
        cfg: its ``DQNConfig`` (schedules, batch size, learning start).
        total_steps: the run's length (for the schedules).
        step: env steps already done (when resuming).
    """

    def __init__(self, collector: Collector, buffer: Any, agent: Any, cfg: Any, total_steps: int, step: int = 0) -> None:  # fmt: skip
        self.collector, self.buffer, self.agent, self.cfg = collector, buffer, agent, cfg
        self.total_steps, self.step = total_steps, step
        self.prioritized = hasattr(buffer, "update_priorities")
        self._per_step = collector.num_envs / cfg.train_frequency
        self._credit = 0.0
        self.epsilon = cfg.epsilon(step, total_steps)

    def iterate(self) -> Step:
        cfg, agent, buffer = self.cfg, self.agent, self.buffer
        eps = self.epsilon = cfg.epsilon(self.step, self.total_steps)
        obs, _, s = self.collector.step(lambda o: agent.act(o, eps))
        buffer.add(obs, s.actions, s.reward, s.terminated, s.done, s.final_obs)
        self.step += self.collector.num_envs
        if self.step >= cfg.learning_starts and len(buffer) >= cfg.batch_size:
            self._credit += self._per_step
            kwargs = {"beta": cfg.beta(self.step, self.total_steps)} if self.prioritized else {}
            while self._credit >= 1.0:
                self.learn(**kwargs)
                self._credit -= 1.0
        return s

    def learn(self, **kwargs: Any) -> None:
        """One update on a sampled batch, then its new priorities."""
        learn_from_replay(self.buffer, self.agent, self.cfg.batch_size, **kwargs)


def learn_from_replay(buffer: Any, agent: Any, batch_size: int, **kwargs: Any) -> None:
    """Sample ``batch_size`` transitions, update ``agent``, write back the new priorities
    (shared by the single-process loop and the Ray learners)."""
    batch = buffer.sample(batch_size, **kwargs)
    td = agent.update(batch)
    if hasattr(buffer, "update_priorities"):
        buffer.update_priorities(batch.indices, td)


class OnPolicyLoop:
    """Collector -> device rollout -> PPO update, ``num_steps`` vector steps per iteration.

    Per env step there is one host round trip (actions out; rewards and flags back, in one
    copy); observations, actions, log-probabilities and values stay on the device.
    """

    def __init__(
        self, collector: Collector, agent: Any, cfg: Any, total_steps: int, step: int = 0
    ) -> None:
        from rlamd.agents.ppo import Rollout

        self.collector, self.agent, self.cfg = collector, agent, cfg
        self.total_steps, self.step = total_steps, step
        obs = torch.from_numpy(collector.obs[:1])
        self.rollout = Rollout(
            cfg.num_steps, collector.num_envs, tuple(obs.shape[1:]), obs.dtype, collector.device
        )
        self.epsilon = 0.0  # for logging symmetry with the off-policy loop

    def iterate(self) -> list[Step]:
        steps = self.collect()
        self.agent.update(self.rollout, self.agent.value(self.collector.obs_tensor()))
        return steps

    def collect(self) -> list[Step]:
        """Fill the rollout with ``num_steps`` vector steps (a Ray rollout actor stops here)."""
        ro, agent, col = self.rollout, self.agent, self.collector
        device = col.device
        agent.set_progress(self.step / self.total_steps)
        ro.bootstrap.zero_()
        steps: list[Step] = []
        for t in range(ro.num_steps):
            out: dict[str, torch.Tensor] = {}

            def policy(o: torch.Tensor, out: dict = out) -> torch.Tensor:
                out["obs"] = o
                out["action"], out["logprob"], out["value"] = agent.act(o)
                return out["action"]

            _, chosen, s = col.step(policy)
            ro.obs[t] = out["obs"]
            ro.actions[t] = out["action"]
            ro.logprobs[t] = out["logprob"]
            forced = np.flatnonzero(chosen != s.actions)
            if forced.size:  # FIRE forced after a lost life: learn from what was executed
                rows = torch.from_numpy(forced).to(device)
                executed = torch.from_numpy(s.actions[forced]).to(device)
                ro.actions[t, rows] = executed
                ro.logprobs[t, rows] = agent.logprob(out["obs"][rows], executed)
            ro.values[t] = out["value"]
            flags = np.stack([s.reward, s.terminated, s.terminated | s.done]).astype(np.float32)
            ro.rewards[t], ro.terminated[t], ro.ended[t] = torch.from_numpy(flags).to(
                device, non_blocking=True
            )
            cut = np.flatnonzero(s.truncated & ~s.terminated)
            if cut.size:  # rare: bootstrap truncated episodes from their last observation
                final = torch.from_numpy(np.ascontiguousarray(s.final_obs[cut])).to(device)
                ro.bootstrap[t, torch.from_numpy(cut).to(device)] = agent.value(final)
            steps.append(s)
            self.step += col.num_envs
        return steps
