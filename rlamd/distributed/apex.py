"""Ape-X scheduling for DQN on Ray (Horgan et al. 2018, https://arxiv.org/abs/1803.00933).

Every rollout worker runs its own vector env with its own epsilons and ships chunks,
with the initial priorities it computed, straight to a learner's replay shard (the
driver handles only references); it picks up the newest weights with its next chunk.
Learners sample ``batch_size / num_learners`` rows each from their shard and all-reduce
gradients, so an update is one of ``batch_size`` rows, made ``1 / train_frequency``
times per env step as in a single process; workers pause while the learners are behind
that ratio. The worker and learner halves are :class:`rlamd.algos.dqn_apex.ApexSource` and
:class:`rlamd.algos.dqn_apex.ReplayShard`; the Ape-X settings are DQN's (``dqn.chunk_steps``,
``dqn.weights_every``, ``dqn.apex_epsilon``, ...).
"""

from __future__ import annotations

import time

from rlamd.algos.dqn_apex import apex_epsilons
from rlamd.config.sections import RunConfig

from .host import DriverHost, register_driver

__all__ = ["ApexDriver"]

_UPDATES_PER_CALL = 1000


class ApexDriver:
    """Moves DQN chunks from workers to learner shards and asks learners for updates."""

    @staticmethod
    def layout_lines(cfg: RunConfig) -> list[str]:
        rc = cfg.ray
        eps = [e for i in range(rc.num_rollout_workers) for e in apex_epsilons(cfg, i)]
        lines = [
            f"rlamd: Ape-X epsilons {min(eps):.2g}..{max(eps):.2g} over {len(eps)} envs; "
            f"chunks of {cfg.dqn.chunk_steps} steps"
        ]
        if cfg.train.save_replay:
            lines.append(
                "rlamd: note: --save-replay is not supported with --ray; checkpoints "
                "hold the agent only"
            )
        return lines

    def __init__(self, engine: DriverHost) -> None:
        self.e = engine
        rc, dqn = engine.rc, engine.cfg.dqn
        self.pending: dict = {}
        self.idle: list[int] = []
        self.sent = [0] * rc.num_learners
        self.add_refs: list = []
        self.fed_by: dict = {}
        """Feed call -> the worker whose chunk it carries."""
        self.train_refs: list | None = None
        self.credit = 0.0
        self._since_weights = 0
        self._metrics_t = 0.0
        self._train_n = 0
        per_batch = dqn.batch_size // rc.num_learners
        # Enough sent to every shard that it can fill a batch (each stream holds back up
        # to n_step + frame_stack + 2 records that are not sampleable yet).
        frames = engine.cfg.atari.frame_stack
        self.warmup = [
            len(range(r, rc.num_rollout_workers, rc.num_learners))
            * rc.envs_per_worker
            * (dqn.n_step + frames + 2)
            + per_batch
            for r in range(rc.num_learners)
        ]
        # Workers wait while the learners owe more than two rounds of chunks' updates.
        chunk = dqn.chunk_steps * rc.envs_per_worker
        self.max_credit = 2 * rc.num_rollout_workers * chunk / dqn.train_frequency + 1
        for w in range(rc.num_rollout_workers):
            self._launch(w)

    def _launch(self, w: int) -> None:
        data, info = self.e.collect(w, self.e.cfg.dqn.chunk_steps)
        self.pending[info] = (w, data)

    def iterate(self) -> list[tuple[int, list]]:
        e, rc, dqn = self.e, self.e.rc, self.e.cfg.dqn
        waiting = list(self.pending) + (self.train_refs or [])
        if not waiting:  # every worker paused and nothing to train: resume them
            self._resume_idle()
            waiting = list(self.pending)
        ready = e.wait(waiting)
        out = []
        for ref in ready:
            if self.train_refs and ref in self.train_refs:
                self._finish_train()
                continue
            w, data = self.pending.pop(ref)
            info = e.receive(w, ref)
            if info is None:
                self._launch(w)
                continue
            r = w % rc.num_learners
            first = (w // rc.num_learners) * rc.envs_per_worker
            ref = e.learners[r].feed.remote(data, first)
            self.add_refs.append(ref)
            self.fed_by[ref] = w
            self.sent[r] += info.env_steps
            e.step += info.env_steps
            warm = all(s >= m for s, m in zip(self.sent, self.warmup, strict=True))
            if e.step >= dqn.learning_starts and warm:
                self.credit += info.env_steps / dqn.train_frequency
            out.append((info.env_steps, info.episodes))
            if self.credit > self.max_credit:
                self.idle.append(w)
            else:
                self._launch(w)
        self._start_train()
        return out

    def _resume_idle(self) -> None:
        for w in self.idle:
            self._launch(w)
        self.idle.clear()

    def _start_train(self) -> None:
        if self.train_refs is not None or self.credit < 1:
            return
        n = min(int(self.credit), _UPDATES_PER_CALL)
        self.credit -= n
        e = self.e
        beta = e.cfg.dqn.beta(e.step, e.train.steps)
        # Metrics cost learner 0 one device sync: ask for them about once a second.
        want = time.monotonic() - self._metrics_t >= 1.0
        if want:
            self._metrics_t = time.monotonic()
        self.train_refs = [
            ln.step.remote(n, beta, metrics=want and r == 0) for r, ln in enumerate(e.learners)
        ]
        self._train_n = n

    def _finish_train(self) -> None:
        e = self.e
        refs, self.train_refs = self.train_refs or [], None
        lost: list = []
        results = e.get(refs + self.add_refs, what="training", lost=lost)
        for ref in lost:  # a chunk left on a node that died before its learner took it
            e.payload_lost(self.fed_by[ref])
        self.add_refs, self.fed_by = [], {}
        e.updates += self._train_n
        e.latest.update(results[0] or {})
        self._since_weights += self._train_n
        if self._since_weights >= e.cfg.dqn.weights_every or e.version == 0:
            e.publish_weights()
            self._since_weights = 0
        if self.credit <= self.max_credit:
            self._resume_idle()
        self._start_train()

    def flush(self) -> None:
        """Wait for the updates in flight (before a checkpoint)."""
        if self.train_refs is not None:
            self._finish_train()

    def metrics(self) -> dict[str, float]:
        return {"ray/paused_workers": float(len(self.idle))}


register_driver("dqn", ApexDriver)
