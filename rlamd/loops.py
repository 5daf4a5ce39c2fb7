"""The single-process training loops: collect, store, learn.

Shared by ``python -m rlamd.train`` and the benchmarks, so the benchmarks time exactly
what training runs. The loops see their agent and replay through the small Protocols
below, not through ``Any`` and ``hasattr``.
"""

from __future__ import annotations

import copy
import time
from typing import Protocol

import numpy as np
import torch

from rlamd.collector import Collector
from rlamd.envs import Step
from rlamd.profiling import span
from rlamd.replay import Buffer, ReplayBatch

__all__ = ["OffPolicyLoop", "OnPolicyLoop"]


class OffPolicyLearner(Protocol):
    """What the off-policy loop needs of its agent (DQN, SAC, TD3 in ``rlamd.agents``)."""

    def act(self, obs: torch.Tensor, *acting: float) -> torch.Tensor: ...
    def learn(self, buffer: Buffer, batch_size: int, *learning: float) -> torch.Tensor: ...
    def update_on(self, batch: ReplayBatch) -> torch.Tensor: ...
    def read_metrics(self) -> dict[str, float]: ...


class OffPolicySchedule(Protocol):
    """What the off-policy loop needs of its algorithm's settings: how much to learn, and
    the per-step numbers its agent acts and learns with (``DQNConfig``, and SAC's and
    TD3's ``OffPolicySettings``, in ``rlamd.agents``)."""

    batch_size: int
    learning_starts: int
    train_frequency: int
    """Env steps per update."""

    def acting(self, step: int, total_steps: int) -> tuple[float, ...]:
        """What ``agent.act`` takes after the observations at env step ``step`` (DQN: its
        epsilon; SAC and TD3: the share of uniformly random actions)."""
        ...

    def learning(self, step: int, total_steps: int) -> tuple[float, ...]:
        """What ``agent.learn`` takes after the buffer and batch size (the importance
        exponent beta of a prioritized replay)."""
        ...

    def charts(self, step: int, total_steps: int) -> dict[str, float]:
        """The schedules' values for the log (``charts/NAME``)."""
        ...


class OffPolicyLoop:
    """Collector -> replay -> learner, with ``num_envs / train_frequency`` updates per vector step.

    The loop knows no algorithm: the agent acts with ``schedule.acting(step)`` and learns
    with ``schedule.learning(step)``, so DQN, SAC and TD3 share it.

    Args:
        collector: steps the env with the agent's exploring policy.
        buffer: a :class:`~rlamd.replay.Buffer` (uniform or prioritized sampler).
        agent: the learner (:class:`OffPolicyLearner`).
        schedule: its algorithm's :class:`OffPolicySchedule`.
        total_steps: the run's length.
        step: env steps already done (when resuming).
    """

    def __init__(
        self,
        collector: Collector,
        buffer: Buffer,
        agent: OffPolicyLearner,
        schedule: OffPolicySchedule,
        total_steps: int,
        step: int = 0,
    ) -> None:
        self.collector, self.buffer, self.agent = collector, buffer, agent
        self.schedule = self.cfg = schedule
        """(``cfg``: the name the DQN benchmarks read.)"""
        self.total_steps, self.step = total_steps, step
        self._credit = 0
        """Env steps not yet paid for by an update (an integer, so the cadence never drifts)."""
        self._min_fill = schedule.batch_size
        self.overlap = collector.device.type == "cuda" and collector.env.can_overlap
        """Learn while the envs step: on a GPU, where the CPU would otherwise wait; on a
        CPU the env threads and torch's would only compete for the same cores."""

    def iterate(self) -> list[Step]:
        """Act, step the envs, store the step, and make the updates due.

        With ``overlap`` the updates due run while the envs step (ale-py's C++ threads; the
        GPU learns meanwhile), on the replay as it was before this step's transitions.
        """
        cfg, agent, buffer = self.schedule, self.agent, self.buffer
        acting = cfg.acting(self.step, self.total_steps)
        self.collector.send(lambda o: agent.act(o, *acting))
        if self.overlap:
            self._learn()
        obs, _, s = self.collector.recv()
        with span("add"):
            buffer.add(obs, s.actions, s.reward, s.terminated, s.done, s.final_obs)
        self.step += self.collector.num_envs
        if self.step >= cfg.learning_starts and len(buffer) >= self._min_fill:
            self._credit += self.collector.num_envs
        if not self.overlap:
            self._learn()
        return [s]

    def _learn(self) -> None:
        """The updates the credit allows (``num_envs / train_frequency`` per vector step)."""
        cfg = self.schedule
        if self._credit < cfg.train_frequency:
            return
        learning = cfg.learning(self.step, self.total_steps)
        # The one learn step on every device (a captured graph on GPUs, eager here).
        while self._credit >= cfg.train_frequency:
            with span("learn"):
                self.agent.learn(self.buffer, cfg.batch_size, *learning)
            self._credit -= cfg.train_frequency

    @property
    def learning_starts(self) -> int:
        """Env steps before the first update."""
        return self.schedule.learning_starts

    def describe(self) -> str:
        return f"replay {self.buffer.capacity:,}"

    def memory_bytes(self) -> float:
        """What the replay holds on its device."""
        return self.buffer.capacity * self.buffer.nbytes_per_transition()

    def learning_sps(self, env_sps: float) -> float:
        """Env steps/s once updates run, from the measured acting speed ``env_sps`` and
        a timed update (of a copy of the agent, on a made-up batch: the run is untouched)."""
        st, b = self.buffer.storage, self.schedule.batch_size
        obs = torch.zeros((b, *st.obs_shape), dtype=st.obs_dtype, device=self.buffer.device)
        ones = torch.ones(b, device=obs.device)
        batch = ReplayBatch(
            obs,
            st.read_actions(torch.zeros(b, dtype=torch.long, device=obs.device)).zero_(),
            ones,
            obs,
            ones,
            ones,
            torch.arange(b, device=obs.device),
        )
        # The copy shares the agent's callbacks (its log line goes to the run's logger).
        shared = {
            id(v): v
            for v in vars(self.agent).values()
            if callable(v) and not isinstance(v, torch.nn.Module)
        }
        agent = copy.deepcopy(self.agent, memo=shared)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            agent.update_on(batch)
            times.append(time.perf_counter() - start)
        per_update = sorted(times[1:])[0]
        return 1.0 / (1.0 / env_sps + per_update / self.schedule.train_frequency)

    def metrics(self) -> dict[str, float]:
        return {**self.schedule.charts(self.step, self.total_steps), **self.agent.read_metrics()}

    def state_dict(self, include_replay: bool) -> dict:
        return {
            "replay": self.buffer.state_dict(include_contents=include_replay),
            "credit": self._credit,
        }

    def load_state_dict(self, state: dict) -> list[str]:
        """Restore the replay and the update credit (so ``train_frequency`` keeps its
        phase); a replay saved without its contents is refilled to ``learning_starts``
        transitions before the updates go on (exploration keeps its step), so the first
        updates do not overfit a few thousand new transitions."""
        cfg = self.schedule
        replay = state.get("replay")
        if replay is not None:
            self.buffer.load_state_dict(replay)
            self.buffer.storage.end_episodes()  # the resumed run resets its envs
        if len(self.buffer):
            # What was owed when it was saved (checkpoints before 2026-12-08 lack it): at
            # most one vector step's worth beyond an update (a GPU pays at the next step).
            carry = cfg.train_frequency - 1 + self.collector.num_envs
            self._credit = min(int(state.get("credit", 0)), carry)
            return [f"rlamd: replay restored from the checkpoint: {len(self.buffer):,} transitions"]
        self._credit = 0  # nothing is owed to an empty replay
        self._min_fill = max(cfg.batch_size, min(cfg.learning_starts, self.buffer.capacity))
        return [
            "rlamd: the checkpoint holds no replay contents (the run had no --save-replay); "
            f"refilling the replay to {self._min_fill:,} transitions before updating again"
        ]


class OnPolicyLoop:
    """Collector -> device rollout -> PPO update, ``num_steps`` vector steps per iteration.

    Per env step there is one host round trip (observations in, actions out);
    observations, actions, log-probabilities and values stay on the device, and the
    rewards and episode flags gather on the host and go to the device in one copy per
    rollout (through pinned memory on a GPU). With
    ``cfg.norm_reward`` the rewards are scaled on the host as they arrive
    (:class:`rlamd.agents.normalize.ReturnScaler`), and the scaler is part of the loop's
    checkpointed state.
    """

    def __init__(self, collector: Collector, agent, cfg, total_steps: int, step: int = 0) -> None:
        from rlamd.agents.normalize import ReturnScaler
        from rlamd.agents.ppo import Rollout

        self.collector, self.agent, self.cfg = collector, agent, cfg
        self.total_steps, self.step = total_steps, step
        obs = torch.from_numpy(collector.obs[:1])
        actions = collector.env.actions
        self.rollout = Rollout(
            cfg.num_steps,
            collector.num_envs,
            tuple(obs.shape[1:]),
            obs.dtype,
            collector.device,
            action_size=actions.size if actions.continuous else None,
        )
        self._discrete = not actions.continuous
        # rewards, terminations, episode ends of the rollout, filled on the host
        flags = torch.zeros((3, cfg.num_steps, collector.num_envs))
        self._flags = flags.pin_memory() if collector.device.type == "cuda" else flags
        self.scaler = (
            ReturnScaler(collector.num_envs, cfg.gamma, cfg.norm_clip) if cfg.norm_reward else None
        )

    def iterate(self) -> list[Step]:
        steps = self.collect()
        with span("update"):
            self.agent.update(self.rollout, self.agent.value(self.collector.obs_tensor()))
        return steps

    learning_starts = 0
    """PPO learns from its first rollout."""

    def describe(self) -> str:
        """The rollout's shape, and the run's real length when ``train.steps`` is not a
        whole number of rollouts (PPO learns from whole rollouts only)."""
        ro = self.rollout
        size = ro.num_steps * ro.num_envs
        rollouts = -(-max(0, self.total_steps - self.step) // size)
        ends = self.step + rollouts * size
        text = f"rollout {ro.num_steps} x {ro.num_envs}"
        if ends != self.total_steps:
            text += (
                f" (whole rollouts of {size:,} steps: the run takes {ends:,} steps, "
                f"train.steps={self.total_steps:,} rounded up)"
            )
        return text

    def memory_bytes(self) -> float:
        return 0.0

    def learning_sps(self, env_sps: float) -> float:
        """The measured speed already includes the updates (call after an iteration)."""
        return env_sps

    def metrics(self) -> dict[str, float]:
        return self.agent.read_metrics()

    def state_dict(self, include_replay: bool) -> dict:
        return {} if self.scaler is None else {"reward_scaler": self.scaler.state_dict()}

    def load_state_dict(self, state: dict) -> list[str]:
        if self.scaler is not None and "reward_scaler" in state:
            self.scaler.load_state_dict(state["reward_scaler"])
        return []

    def collect(self) -> list[Step]:
        """Fill the rollout with ``num_steps`` vector steps (a Ray rollout actor stops here)."""
        ro, agent, col = self.rollout, self.agent, self.collector
        device = col.device
        agent.set_progress(self.step / self.total_steps)
        ro.bootstrap.zero_()
        flags = self._flags.numpy()
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
            forced = np.flatnonzero(chosen != s.actions) if self._discrete else ()
            if len(forced):  # FIRE forced after a lost life: learn from what was executed
                rows = torch.from_numpy(forced).to(device)
                executed = torch.from_numpy(s.actions[forced]).to(device)
                ro.actions[t, rows] = executed
                ro.logprobs[t, rows] = agent.logprob(out["obs"][rows], executed)
            ro.values[t] = out["value"]
            ended = s.terminated | s.done
            flags[0, t] = s.reward if self.scaler is None else self.scaler(s.reward, ended)
            flags[1, t], flags[2, t] = s.terminated, ended
            cut = np.flatnonzero(s.truncated & ~s.terminated)
            if cut.size:  # rare: bootstrap truncated episodes from their last observation
                final = torch.from_numpy(np.ascontiguousarray(s.final_obs[cut])).to(device)
                ro.bootstrap[t, torch.from_numpy(cut).to(device)] = agent.value(final)
            steps.append(s)
            self.step += col.num_envs
        for dest, src in zip((ro.rewards, ro.terminated, ro.ended), self._flags, strict=True):
            dest.copy_(src, non_blocking=True)
        return steps
