"""Synchronous PPO on Ray.

Each iteration every rollout worker collects ``ppo.num_steps`` steps with the same
weights and computes GAE (:class:`rlamd.algos.ppo.RolloutRows`); the rows are split
evenly between the learners (:class:`rlamd.algos.ppo.RowsLearner`), which all-reduce
every minibatch update; learner 0's weights go out once per iteration.
"""

from __future__ import annotations

from rlamd.config.sections import RunConfig

from .host import DriverHost, register_driver

__all__ = ["SyncPPODriver"]


class SyncPPODriver:
    """One PPO iteration per call: collect everywhere, learn on every learner."""

    @staticmethod
    def layout_lines(cfg: RunConfig) -> list[str]:
        return []

    def __init__(self, engine: DriverHost) -> None:
        self.e = engine

    def _collect(self, workers: list[int], data: list, infos: list) -> None:
        """Rollouts of ``workers`` into ``data`` / ``infos``; a lost worker's rollout is
        collected again once Ray has restarted it."""
        e, T = self.e, self.e.cfg.ppo.num_steps
        todo = list(workers)
        while todo:
            pending = {}
            for w in todo:
                d, i = e.collect(w, T)
                pending[i] = (w, d)
            todo = []
            while pending:
                ref = e.wait(list(pending))[0]
                w, d = pending.pop(ref)
                info = e.receive(w, ref)
                if info is None:
                    todo.append(w)
                    continue
                infos[w], data[w] = info, d

    def iterate(self) -> list[tuple[int, list]]:
        e = self.e
        W, L = e.rc.num_rollout_workers, e.rc.num_learners
        data: list = [None] * W
        infos: list = [None] * W
        todo = list(range(W))
        while todo:
            self._collect(todo, data, infos)
            # Learner r takes workers r, r + L, ...; a rollout lost with its node before
            # its learner took it is collected again, so every learner steps on full rows.
            feeds = [e.learners[w % L].feed.remote(data[w], 0) for w in todo]
            lost: list = []
            e.get(feeds, what="training", lost=lost)
            todo = [w for w, f in zip(todo, feeds, strict=True) if f in lost]
            for w in todo:
                e.payload_lost(w)
        progress = e.step / e.train.steps
        steps = [ln.step.remote(progress, metrics=r == 0) for r, ln in enumerate(e.learners)]
        results = e.get(steps, what="training")
        e.latest.update(results[0])
        e.updates = int(e.latest.pop("updates", e.updates))
        e.publish_weights()
        e.step += sum(i.env_steps for i in infos)
        return [(i.env_steps, i.episodes) for i in infos]

    def flush(self) -> None:
        """Nothing in flight between iterations."""

    def metrics(self) -> dict[str, float]:
        return {}


register_driver("ppo", SyncPPODriver)
