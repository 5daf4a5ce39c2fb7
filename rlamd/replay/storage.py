"""Transition storage on the learner's device, with each frame stored once.

A vector env of ``S`` envs writes ``S`` interleaved streams. Each stream owns a ring of
``C = capacity // S`` records in one flat tensor (record ``(s, t)`` at ``s*C + t``)::

    stream 0: | f0 a0 r0 | f1 a1 r1 | f2 a2 r2 END | F | f0' a0' r0' FIRST | ...
    stream 1: | ...

A record holds the newest frame of the observation an action was taken in, the action,
the reward and flags. Stacks of ``k`` frames are rebuilt at sample time from the ``k``
records ending at ``t``, with frames from before an episode's FIRST record zeroed (as
the env does after a reset). ``next_obs`` is the stack ending at the record after the
n-step window: the next transition's record, or, when the episode ended, an extra FINAL
record holding the last frame (``final_obs``), so truncated episodes bootstrap
correctly. Nothing is stored twice, so a 1M-transition Atari replay is ~7.07 GB.

Which records may be sampled is tracked on the host (env flags arrive there anyway) and
handed to a sampler as index writes; sampling itself runs entirely on the device.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .layout import (
    END,
    FIRST,
    NOT_SAMPLEABLE,
    TERMINAL,
    Window,
    layout,
    min_records_per_stream,
    records_per_stream,
    unsampleable_per_stream,
    zeros,
)
from .nstep import gamma_powers, nstep_window

__all__ = [
    "TransitionStorage",
    "Window",
    "min_records_per_stream",
    "unsampleable_per_stream",
]


class TransitionStorage:
    """Per-stream ring storage; see the module docstring.

    Args:
        capacity: total records over all streams (> 0).
        num_streams: envs writing in parallel.
        obs_shape: one env's observation shape, e.g. ``(4, 84, 84)`` or ``(4,)``.
        obs_dtype: observation dtype (``torch.uint8`` for Atari).
        frame_stack: ``k`` > 1 stores only the newest of ``k`` stacked frames
            (``obs_shape[0] == k``); 1 stores whole observations.
        num_actions: discrete actions: for their dtype (uint8 up to 256, else int32).
        n_step, gamma: n-step return settings.
        device: where the tensors live.
        action_shape: one action's shape: ``()`` for a discrete action (the default),
            ``(d,)`` for a ``Box`` of ``d`` floats, or any other shape.
        action_dtype: the stored action dtype (default: from ``num_actions`` when
            ``action_shape`` is ``()``, else float32). A sampled batch holds discrete
            actions as int64 and continuous ones in this dtype.
    """

    def __init__(
        self,
        capacity: int,
        num_streams: int,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        *,
        frame_stack: int = 1,
        num_actions: int = 256,
        n_step: int = 1,
        gamma: float = 0.99,
        device: torch.device | str = "cpu",
        action_shape: tuple[int, ...] = (),
        action_dtype: torch.dtype | None = None,
    ) -> None:
        per_stream = records_per_stream(
            capacity, num_streams, obs_shape, frame_stack, n_step, gamma
        )
        self.device = torch.device(device)
        self.num_streams, self.per_stream = num_streams, per_stream
        self.capacity = per_stream * num_streams
        self.obs_shape, self.obs_dtype = tuple(obs_shape), obs_dtype
        self.frame_stack, self.n_step, self.gamma = frame_stack, n_step, gamma
        self.num_actions = num_actions
        self.action_shape = tuple(action_shape)
        frame_shape, action_dtype = layout(
            self.obs_shape, frame_stack, num_actions, self.action_shape, action_dtype
        )
        self.action_dtype = action_dtype
        self._np_obs_dtype = torch.empty(0, dtype=obs_dtype).numpy().dtype
        self._np_action_dtype = torch.empty(0, dtype=action_dtype).numpy().dtype
        dev = self.device
        self.frames = zeros((self.capacity, *frame_shape), obs_dtype, dev)
        self.actions = zeros((self.capacity, *self.action_shape), action_dtype, dev)
        self.rewards = zeros((self.capacity,), torch.float32, dev)
        self.flags = zeros((self.capacity,), torch.uint8, dev)
        self._gamma_pow = gamma_powers(gamma, n_step, dev)
        self._steps = torch.arange(n_step, device=dev)
        self._back = torch.arange(-(frame_stack - 1), 1, device=dev)
        # Host bookkeeping: ring positions, sampleable records, transitions awaiting
        # their n-step window, and whether a stream has written its history frames yet.
        self._base = np.arange(num_streams, dtype=np.int64) * per_stream
        self._empty()

    def _empty(self) -> None:
        """Host bookkeeping of a storage that holds nothing (the arrays keep their bytes)."""
        n = self.num_streams
        self._ptr, self._pending = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        self._active = np.zeros(self.capacity, dtype=bool)
        self._started, self._next_first = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        self.size = 0

    # ------------------------------------------------------------------ writing
    @classmethod
    def record_bytes(
        cls,
        obs_shape: tuple[int, ...],
        obs_dtype: torch.dtype,
        frame_stack: int,
        num_actions: int,
        action_shape: tuple[int, ...] = (),
        action_dtype: torch.dtype | None = None,
    ) -> int:
        """Bytes of one record (frame, action, float32 reward, uint8 flags) for this layout."""
        frame_shape, action_dtype = layout(
            obs_shape, frame_stack, num_actions, action_shape, action_dtype
        )
        frame = math.prod(frame_shape) * torch.empty(0, dtype=obs_dtype).element_size()
        action = math.prod(action_shape) * torch.empty(0, dtype=action_dtype).element_size()
        return frame + action + 4 + 1

    def bytes_per_record(self) -> int:
        tensors = (self.frames, self.actions, self.rewards, self.flags)
        return sum(t[0].numel() * t.element_size() for t in tensors)

    def _claim(self, streams: np.ndarray) -> np.ndarray:
        """Next record position for each stream in ``streams``; retires what it overwrites."""
        pos = self._base[streams] + self._ptr[streams]
        self._ptr[streams] = (self._ptr[streams] + 1) % self.per_stream
        return pos

    def _write(
        self,
        pos: np.ndarray,
        frames: np.ndarray | torch.Tensor,
        flags: np.ndarray,
        actions: np.ndarray | None = None,
        rewards: np.ndarray | None = None,
    ) -> None:
        dev = self.device
        index = torch.from_numpy(pos).to(dev, non_blocking=True)
        self.frames.index_copy_(0, index, torch.as_tensor(frames).to(dev, self.obs_dtype))
        self.flags.index_copy_(0, index, torch.from_numpy(flags.astype(np.uint8)).to(dev))
        if actions is not None:
            if self.actions.is_floating_point():
                acts = torch.from_numpy(np.asarray(actions, dtype=self._np_action_dtype))
            else:
                acts = torch.from_numpy(np.asarray(actions).astype(np.int64))
            acts = acts.reshape(-1, *self.action_shape).to(dev)
            self.actions.index_copy_(0, index, acts.to(self.actions.dtype))
        if rewards is not None:
            rew = torch.from_numpy(np.asarray(rewards, dtype=np.float32)).to(dev)
            self.rewards.index_copy_(0, index, rew)

    def _retire(self, pos: np.ndarray) -> np.ndarray:
        """Records made unsampleable by writing at ``pos``: ``pos`` itself and the next
        ``k - 1`` records of the stream, whose stacks reach back into ``pos``."""
        stream, t = np.divmod(pos, self.per_stream)
        ahead = (t[:, None] + np.arange(self.frame_stack)) % self.per_stream
        gone = (stream[:, None] * self.per_stream + ahead).reshape(-1)
        gone = gone[self._active[gone]]
        self._active[gone] = False
        self.size -= gone.size
        return gone

    def _newest(self, obs: np.ndarray) -> np.ndarray:
        return obs[:, -1] if self.frame_stack > 1 else obs

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        done: np.ndarray,
        final_obs: np.ndarray | None = None,
        streams: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Store one vector step and return ``(retired, activated, positions)``.

        Args:
            obs: observations the actions were taken in, ``(S, *obs_shape)``.
            actions: ``(S, *action_shape)`` (``(S,)`` for discrete actions).
            rewards: ``(S,)``.
            terminated: ``(S,)`` bool, no bootstrapping past this step.
            done: ``(S,)`` bool, the episode ended and the env was reset.
            final_obs: ``(S, *obs_shape)``, the last observations of ended episodes (rows
                where ``done``); needed whenever ``done`` has a True.
            streams: which streams the ``S`` rows belong to (default: all, in order). A
                replay shard fed by several rollout actors adds each actor's envs alone.

        Returns:
            Flat indices of the records retired and activated (sampleable now), and the
            record written for each row (its priority can be set once it is active).
        """
        streams = self._check_streams(streams)
        obs = self._check_step(streams.size, obs, actions, rewards, terminated, done)
        done = np.asarray(done, dtype=bool)
        terminated = np.asarray(terminated, dtype=bool)
        retired: list[np.ndarray] = []
        self._write_history(streams, obs, retired)

        pos = self._claim(streams)
        retired.append(self._retire(pos))
        flags = (
            np.where(self._next_first[streams], FIRST, 0)
            | np.where(terminated, TERMINAL, 0)
            | np.where(done, END, 0)
        )
        self._write(pos, self._newest(obs), flags, actions, rewards)
        self._next_first[streams] = done
        act = self._complete_windows(streams, pos, done, final_obs, retired)
        act = act[~self._active[act]]
        self._active[act] = True
        self.size += act.size
        return np.concatenate(retired), act, pos

    def end_episodes(self) -> None:
        """Abandon every stream's episode in progress: its transitions still waiting for
        their n-step window never become sampleable, and the next step starts an episode.
        A resumed run resets its envs, so a replay restored from a checkpoint must not join
        the episodes it saved half-way to the new ones (returns and next observations
        taken from another episode)."""
        self._pending[:] = 0
        self._next_first[:] = True

    def _check_streams(self, streams: np.ndarray | None) -> np.ndarray:
        """``streams`` as distinct stream numbers (all streams, in order, when None)."""
        if streams is None:
            return np.arange(self.num_streams)
        streams = np.asarray(streams, dtype=np.int64).reshape(-1)
        if (
            streams.size == 0
            or streams.min() < 0
            or streams.max() >= self.num_streams
            or np.unique(streams).size != streams.size
        ):
            raise ValueError(
                f"streams={streams.tolist()}; accepted: distinct stream numbers in "
                f"0..{self.num_streams - 1}"
            )
        return streams

    def _check_step(
        self,
        S: int,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        done: np.ndarray,
    ) -> np.ndarray:
        """Refuse a step whose shapes or observation dtype do not fit ``S`` rows of this
        buffer; returns ``obs`` as an array."""
        obs = np.asarray(obs)
        if obs.shape != (S, *self.obs_shape):
            raise ValueError(
                f"obs has shape {obs.shape}; this buffer stores "
                f"({S}, {', '.join(map(str, self.obs_shape))}) ({S} streams of {self.obs_shape})"
            )
        if obs.dtype != self._np_obs_dtype:
            raise ValueError(f"obs dtype {obs.dtype} does not match the buffer's {self.obs_dtype}")
        want = (S, *self.action_shape)
        if np.shape(actions) != want:
            raise ValueError(f"actions has shape {np.shape(actions)}; expected {want}")
        for name, arr in (
            ("rewards", rewards),
            ("terminated", terminated),
            ("done", done),
        ):
            if np.shape(arr) != (S,):
                raise ValueError(f"{name} has shape {np.shape(arr)}; expected ({S},)")
        return obs

    def _write_history(
        self, streams: np.ndarray, obs: np.ndarray, retired: list[np.ndarray]
    ) -> None:
        """The first time a stream writes, its observation may carry history frames
        (e.g. a buffer created mid-episode): store them as unsampleable records."""
        fresh = np.flatnonzero(~self._started[streams])
        if not fresh.size:
            return
        new = streams[fresh]
        for j in range(self.frame_stack - 1):
            pos = self._claim(new)
            retired.append(self._retire(pos))
            self._write(pos, obs[fresh, j], np.full(new.size, NOT_SAMPLEABLE))
        self._started[new] = True

    def _complete_windows(
        self,
        streams: np.ndarray,
        pos: np.ndarray,
        done: np.ndarray,
        final_obs: np.ndarray | None,
        retired: list[np.ndarray],
    ) -> np.ndarray:
        """Records whose n-step window the step at ``pos`` completed (duplicates and
        already active ones included); writes the FINAL records of ended episodes.

        The transition at p - n has its whole n-step window now; an ended episode
        completes every transition still waiting.
        """
        self._pending[streams] += 1
        ripe = np.flatnonzero(~done & (self._pending[streams] > self.n_step))
        base = self._base[streams]
        activated = [base[ripe] + (pos[ripe] - base[ripe] - self.n_step) % self.per_stream]
        self._pending[streams[ripe]] = self.n_step
        ended = np.flatnonzero(done)
        if ended.size:
            if final_obs is None:
                raise ValueError("final_obs is required for steps where an episode ended")
            for row in ended:
                back = np.arange(self._pending[streams[row]])
                t = (pos[row] - base[row] - back) % self.per_stream
                activated.append(base[row] + t)
            self._pending[streams[ended]] = 0
            fpos = self._claim(streams[ended])
            retired.append(self._retire(fpos))
            self._write(
                fpos,
                self._newest(np.asarray(final_obs)[ended]),
                np.full(ended.size, NOT_SAMPLEABLE),
            )
        return np.concatenate(activated)

    # ------------------------------------------------------------------ reading
    def read_actions(self, index: torch.Tensor) -> torch.Tensor:
        """Actions of flat records ``index``: int64 when discrete, else the stored dtype."""
        acts = self.actions[index]
        return acts if acts.is_floating_point() else acts.long()

    def stacks(self, index: torch.Tensor) -> torch.Tensor:
        """Observations ending at flat records ``index``: ``(B, *obs_shape)``, on the device."""
        if self.frame_stack == 1:
            return self.frames[index]
        C = self.per_stream
        stream = torch.div(index, C, rounding_mode="floor")
        pos = stream[:, None] * C + (index - stream * C)[:, None].add(self._back).remainder(C)
        frames = self.frames[pos]  # (B, k, H, W)
        first = (self.flags[pos] & FIRST) > 0
        # Zero the frames before the last FIRST record of each window.
        later_first = first.flip(1).cumsum(1).flip(1) - first.to(torch.long)
        keep = (later_first == 0).to(frames.dtype)
        return frames * keep.view(*keep.shape, *([1] * (frames.dim() - 2)))

    def window(self, index: torch.Tensor) -> Window:
        """n-step return, discount and bootstrap record for each flat index (device ops)."""
        C = self.per_stream
        stream = torch.div(index, C, rounding_mode="floor")
        t = index - stream * C
        if self.n_step == 1:  # the record's own reward: nstep_window's sum of one term
            last, returns, steps = index, self.rewards[index].to(torch.float32), 1
        else:
            pos = stream[:, None] * C + (t[:, None] + self._steps).remainder(C)  # (B, n)
            stop = (self.flags[pos] & (TERMINAL | END)) > 0
            returns, steps = nstep_window(self.rewards[pos], stop, self._gamma_pow)  # m >= 1
            last = pos.gather(1, (steps - 1)[:, None]).squeeze(1)
        terminal = (self.flags[last] & TERMINAL) > 0
        discounts = self._gamma_pow[steps] * (~terminal).to(torch.float32)
        next_index = stream * C + (t + steps).remainder(C)
        return Window(returns, discounts, next_index)

    # ------------------------------------------------------------------ state
    def state_dict(self, include_contents: bool = True) -> dict:
        state: dict = {
            "capacity": self.capacity,
            "num_streams": self.num_streams,
            "obs_shape": list(self.obs_shape),
            "action_shape": list(self.action_shape),
            "frame_stack": self.frame_stack,
            "n_step": self.n_step,
            "gamma": self.gamma,
        }
        if include_contents:
            state["contents"] = {
                "frames": self.frames.cpu(),
                "actions": self.actions.cpu(),
                "rewards": self.rewards.cpu(),
                "flags": self.flags.cpu(),
                "ptr": torch.from_numpy(self._ptr.copy()),
                "active": torch.from_numpy(self._active.copy()),
                "pending": torch.from_numpy(self._pending.copy()),
                "started": torch.from_numpy(self._started.copy()),
                "next_first": torch.from_numpy(self._next_first.copy()),
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        """Take saved records; a state without contents (configuration only) just empties
        this storage, whatever its configuration was (a resumed run may resize the replay).

        Raises:
            ValueError: saved contents of another shape (capacity, streams, n-step...).
        """
        if state.get("contents") is None:
            self._empty()
            return
        for key in ("capacity", "num_streams", "frame_stack", "n_step"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"replay state has {key}={state[key]}, this buffer has {getattr(self, key)}"
                )
        if tuple(state["obs_shape"]) != self.obs_shape:
            raise ValueError(
                f"replay state has obs_shape={tuple(state['obs_shape'])}, "
                f"this buffer has {self.obs_shape}"
            )
        saved_actions = tuple(state.get("action_shape", ()))
        if saved_actions != self.action_shape:
            raise ValueError(
                f"replay state has action_shape={saved_actions}, "
                f"this buffer has {self.action_shape}"
            )
        contents = state["contents"]
        for name in ("frames", "actions", "rewards", "flags"):
            getattr(self, name).copy_(contents[name].to(self.device))
        self._ptr[:] = contents["ptr"].numpy()
        self._active[:] = contents["active"].numpy()
        self._pending[:] = contents["pending"].numpy()
        self._started[:] = contents["started"].numpy()
        self._next_first[:] = contents["next_first"].numpy()
        self.size = int(self._active.sum())

    def active_indices(self) -> np.ndarray:
        return np.flatnonzero(self._active)
