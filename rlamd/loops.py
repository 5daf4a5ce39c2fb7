"""The off-policy iteration: collect a vector step, store it, make the updates due.

Shared by ``python -m rlamd.train`` and the benchmarks, so the benchmarks time exactly
what training runs.
"""

from __future__ import annotations

from typing import Any

from rlamd.collector import Collector
from rlamd.envs import Step

__all__ = ["OffPolicyLoop"]


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
        obs, actions, s = self.collector.step(lambda o: agent.act(o, eps))
        buffer.add(obs, actions, s.reward, s.terminated, s.done, s.final_obs)
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
        batch = self.buffer.sample(self.cfg.batch_size, **kwargs)
        td = self.agent.update(batch)
        if self.prioritized:
            self.buffer.update_priorities(batch.indices, td)
