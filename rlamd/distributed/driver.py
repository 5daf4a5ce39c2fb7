"""``python -m rlamd.train ENV --ray``: place rollout workers and learners on a Ray cluster.

The driver (the process running ``rlamd.train``) owns no model it trains: it connects to
Ray, checks that the requested layout fits the cluster, places the actors, and moves
object references between them. The training loop, logging, evaluation and checkpoints
are the single-process ones (:func:`rlamd.runner.run`), fed by a :class:`RayEngine`.
What is scheduled between the actors is the algorithm's: its driver class
(:class:`rlamd.distributed.apex.ApexDriver`, :class:`rlamd.distributed.ppo_sync.SyncPPODriver`)
is registered under its name (:data:`rlamd.distributed.host.DRIVERS`).

DQN (Ape-X, Horgan et al. 2018, https://arxiv.org/abs/1803.00933): every rollout worker
runs its own vector env with its own epsilons, ships chunks with the initial priorities
it computed straight to a learner's replay shard (the driver handles only references),
and picks up the newest weights with its next chunk. Learners sample
``batch_size / num_learners`` rows each from their shard and all-reduce gradients, so
the update is one of ``batch_size`` rows, made ``1 / train_frequency`` times per env step
as in a single process; workers pause while the learners are behind that ratio.

PPO (synchronous): each iteration every worker collects ``num_steps`` steps with the
same weights and computes GAE; the rows are split between the learners, which
all-reduce every minibatch update; learner 0's weights go out once per iteration.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import ray
import torch
from ray.exceptions import ActorUnavailableError, ObjectLostError, RayActorError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rlamd.algos import PLUGINS_VARIABLE, build_agent, get_algorithm
from rlamd.algos.base import Policy
from rlamd.config.errors import ConfigError
from rlamd.config.sections import RunConfig

from . import apex, ppo_sync  # noqa: F401 - their drivers register themselves
from .cluster import alive_nodes, connect, nodes, wait_placed
from .cluster import where as _where
from .host import DRIVERS
from .plan import (
    LearnerFailed,
    WorkersFailed,
    actor_options,
    fmt_resources,
    learner_device_spec,
    plan_layout,
)
from .roles import Learner, RolloutWorker

__all__ = ["DRIVERS", "RayEngine", "connect"]

_WORKER_LOST = (RayActorError, ActorUnavailableError)
"""What a call to a rollout worker raises when the worker died (Ray restarts it)."""


@ray.remote
class _RayWorker(RolloutWorker):
    def __init__(self, cfg: RunConfig, index: int) -> None:
        with warnings.catch_warnings():  # Ray 2.x warns about its own use of actor_id here
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        super().__init__(cfg, index, restarted)

    where = staticmethod(_where)


@ray.remote
class _RayLearner(Learner):
    where = staticmethod(_where)


# ---------------------------------------------------------------------- engine
class RayEngine:
    """What :func:`rlamd.runner.run` steps on Ray: the :class:`rlamd.engine.Engine` interface.

    It places the actors and keeps what every algorithm shares (weights and their
    version, worker losses, learner failures, metrics); the algorithm's driver decides
    what flows between workers and learners.
    """

    def __init__(self, cfg: RunConfig, start_step: int, agent_state: dict | None, log) -> None:
        self.cfg, self.log = cfg, log
        self.train, self.rc = cfg.train, cfg.ray
        self.algo = get_algorithm(cfg.train.algo)
        driver_cls = DRIVERS.get(self.algo.name)
        if driver_cls is None:
            raise ConfigError(
                f"train.algo={self.algo.name!r} has no Ray driver (--ray); accepted: "
                f"{', '.join(DRIVERS)} with --ray, or {self.algo.name} without it"
            )
        # The layout's own rules (workers per learner, batch shares) were checked with the
        # settings (rlamd.config.checks), before anything started.
        W, L = self.rc.num_rollout_workers, self.rc.num_learners
        self.device = torch.device("cpu")
        """The driver's own device (it evaluates a CPU copy of the policy)."""
        self.groups: list = []
        self.learners: list = []
        self.workers: list = []
        self.how = connect(
            self.rc.address, L * self.rc.cpus_per_learner + W * self.rc.cpus_per_worker, log
        )
        try:
            self._place(agent_state, driver_cls.layout_lines(cfg))
        except BaseException:
            self.close()
            raise
        self.step = start_step
        """Env steps collected (the driver counts them as chunks or rollouts arrive)."""
        self.worker_restarts = 0
        """Rollout worker restarts seen: a failed call, or a new incarnation reporting."""
        self.lost_chunks = 0
        """Payloads dropped: a worker died with them, or their node left before a learner took them."""
        self.lost_nodes = 0
        """Nodes that left the cluster during the run (their actors were lost with them)."""
        self._nodes = alive_nodes()
        self._down: set[int] = set()
        self._incarnation: dict[int, int] = {}
        self.updates = int(agent_state.get("updates", 0)) if agent_state else 0
        self.latest: dict[str, float] = {}
        """Learner 0's newest metrics."""
        self._eval_agent = None
        self.weights: Any = self.learners[0].weights.remote()
        self.version = 0
        self.about = ("cluster.txt", self.detail + "\n")
        self.driver = driver_cls(self)

    # ------------------------------------------------------------------ placement
    def _place(self, agent_state: dict | None, algo_lines: list[str]) -> None:
        """Start the learners and workers in placement groups, join and load the learners."""
        rc = self.rc
        layout = plan_layout(rc, nodes())
        spec = learner_device_spec(self.train.device, layout["gpus"])
        lg = placement_group([layout["learner"]] * rc.num_learners, strategy="PACK")
        self.groups.append(lg)
        wait_placed(lg, "learners", rc.placement_timeout_s, layout)
        wg = placement_group([layout["worker"]] * rc.num_rollout_workers, strategy="SPREAD")
        self.groups.append(wg)
        wait_placed(wg, "rollout workers", rc.placement_timeout_s, layout)
        W, L, E = rc.num_rollout_workers, rc.num_learners, rc.envs_per_worker
        tag = os.urandom(3).hex()  # actor names: rlamd-learner-R-TAG, rlamd-worker-W-TAG
        for r in range(L):
            streams = len(range(r, W, L)) * E
            self.learners.append(
                _RayLearner.options(
                    num_cpus=rc.cpus_per_learner,
                    num_gpus=layout["gpus"],
                    max_restarts=0,
                    name=f"rlamd-learner-{r}-{tag}",
                    scheduling_strategy=PlacementGroupSchedulingStrategy(lg, r),
                    **actor_options((PLUGINS_VARIABLE,)),
                ).remote(self.cfg, r, L, spec, streams)
            )
        for w in range(W):
            self.workers.append(
                _RayWorker.options(
                    num_cpus=rc.cpus_per_worker,
                    max_restarts=rc.max_worker_restarts,
                    max_task_retries=0,
                    name=f"rlamd-worker-{w}-{tag}",
                    scheduling_strategy=PlacementGroupSchedulingStrategy(wg, w),
                    **actor_options((PLUGINS_VARIABLE,)),
                ).remote(self.cfg, w)
            )
        addr, port = ray.get(self.learners[0].rendezvous.remote())
        devices = self.get(
            [ln.join.remote(addr, port) for ln in self.learners], what="joining the process group"
        )
        if agent_state is not None:
            self.get(
                [ln.load.remote(agent_state) for ln in self.learners], what="loading the checkpoint"
            )
        self.detail = self._describe(layout, devices, addr, port, algo_lines)

    def _describe(
        self, layout: dict, devices: list, addr: str, port: int, algo_lines: list[str]
    ) -> str:
        """Log the learners' messages; return the cluster description (``cluster.txt``)."""
        rc = self.rc
        W, L = rc.num_rollout_workers, rc.num_learners
        described = self.get([ln.describe.remote() for ln in self.learners], what="starting")
        where_l = self.get([ln.where.remote() for ln in self.learners], what="starting")
        where_w = ray.get([w.where.remote() for w in self.workers])
        for msg in described[0]["messages"]:
            self.log(msg)
        backend = "nccl" if devices[0].startswith("cuda") else "gloo"
        group = (
            "no process group (one learner)"
            if L == 1
            else f"torch.distributed {backend} group of {L} at {addr}:{port}"
        )
        lines = [
            f"rlamd: Ray {ray.__version__}, {self.how}; {layout['where']}",
            f"rlamd: {L} learner(s), {group}:",
        ]
        for d, w in zip(described, where_l, strict=True):
            gpu = f", Ray GPU ids {','.join(w['gpus'])}" if w["gpus"] else ""
            shard = f", replay shard {d['replay']:,}" if d["replay"] else ""
            lines.append(
                f"rlamd:   learner {d['rank']} on {w['ip']} (pid {w['pid']}{gpu}): "
                f"{d['summary']}, precision {d['precision']}{shard}"
            )
        nodes = sorted({w["ip"] for w in where_w})
        lines.append(
            f"rlamd: {W} rollout worker(s) x {rc.envs_per_worker} envs on "
            f"{len({w['node'] for w in where_w})} node(s) ({', '.join(nodes)})"
        )
        return "\n".join(lines + algo_lines)

    def get(self, refs: list, what: str, lost: list | None = None) -> list:
        """Results of learner calls, in order; a dead learner becomes :class:`LearnerFailed`
        as soon as its call fails (not after the others time out in an all-reduce).

        With ``lost`` given, a call whose worker payload was lost with its node before the
        learner took it is appended to ``lost`` (result None) instead of raising.
        """
        results: dict = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                results[ready[0]] = ray.get(ready[0])
            except RayActorError as exc:
                self.check_nodes()
                raise LearnerFailed(
                    f"a learner died while {what}: {str(exc).splitlines()[0]}"
                ) from exc
            except ObjectLostError:
                if lost is None:
                    raise
                lost.append(ready[0])
                results[ready[0]] = None
        return [results[r] for r in refs]

    def wait(self, refs: list) -> list:
        """``ray.wait`` for one of ``refs``; nothing within ``ray.stall_timeout_s`` stops the
        run (:class:`WorkersFailed`) instead of waiting for ever on workers Ray cannot place."""
        ready, _ = ray.wait(refs, num_returns=1, timeout=self.rc.stall_timeout_s)
        if not ready:
            self.check_nodes()
            raise WorkersFailed(
                f"no rollout worker delivered anything for ray.stall_timeout_s="
                f"{self.rc.stall_timeout_s:g} s; restarting workers may find no room: "
                f"{fmt_resources(ray.available_resources())} free on {len(self._nodes)} node(s). "
                "Add nodes or raise ray.stall_timeout_s"
            )
        return ready

    def check_nodes(self) -> None:
        """Count and log the nodes that left the cluster since the last look."""
        alive = alive_nodes()
        for node, ip in self._nodes.items():
            if node not in alive:
                self.lost_nodes += 1
                self.log(
                    f"rlamd: node {ip} ({node[:8]}) left the Ray cluster (lost node "
                    f"{self.lost_nodes}); its rollout workers restart on the surviving "
                    "nodes where their resources fit"
                )
        self._nodes = alive

    # ------------------------------------------------------------------ shared by the drivers
    def collect(self, w: int, num_steps: int) -> tuple[Any, Any]:
        """Ask worker ``w`` for ``num_steps`` vector steps: ``(payload ref, info ref)``."""
        return (
            self.workers[w]
            .collect.options(num_returns=2)
            .remote(self.weights, self.version, num_steps)
        )

    def publish_weights(self) -> None:
        """Learner 0's newest weights go out with the workers' next calls."""
        self.weights = self.learners[0].weights.remote()
        self.version += 1

    def receive(self, w: int, info_ref: Any) -> Any | None:
        """Worker ``w``'s :class:`CollectInfo`, or None when the worker was lost (the loss is
        counted and Ray restarts it); either way the worker's restart bookkeeping is done."""
        try:
            info = ray.get(info_ref)
        except _WORKER_LOST as exc:
            self.worker_lost(w, exc)
            return None
        self.worker_back(w, info.incarnation)
        return info

    def worker_lost(self, w: int, exc: BaseException) -> None:
        """A call to worker ``w`` failed: its payload is dropped and Ray restarts it. Calls
        made while it restarts fail too; they count as the same restart."""
        self.lost_chunks += 1
        if w in self._down:
            time.sleep(0.2)
            return
        self._down.add(w)
        self._restarted(w, f"lost ({type(exc).__name__}); its payload in flight is dropped")
        self.check_nodes()

    def worker_back(self, w: int, incarnation: int) -> None:
        """Worker ``w`` delivered, from process ``incarnation`` (:class:`CollectInfo`). A new
        incarnation no failed call announced is a restart too: a call made while Ray
        restarts an actor waits for the new process instead of failing."""
        seen = self._incarnation.get(w)
        self._incarnation[w] = incarnation
        if w in self._down:
            self._down.discard(w)
        elif seen is not None and seen != incarnation:
            self._restarted(w, "was restarted by Ray between calls (no call failed)")
            self.check_nodes()

    def payload_lost(self, w: int) -> None:
        """Worker ``w``'s payload was lost with its node before a learner took it."""
        self.lost_chunks += 1
        self.log(
            f"rlamd: rollout worker {w}'s payload was lost before a learner took it "
            f"(lost payloads: {self.lost_chunks})"
        )

    def _restarted(self, w: int, what: str) -> None:
        self.worker_restarts += 1
        self.log(
            f"rlamd: rollout worker {w} {what}; Ray restarts it (restart {self.worker_restarts})"
        )
        limit = self.rc.max_worker_restarts
        if limit != -1 and self.worker_restarts > limit * self.rc.num_rollout_workers:
            raise WorkersFailed(
                f"rollout workers died {self.worker_restarts} times, more than "
                f"ray.max_worker_restarts={limit} per worker allows"
            )

    # ------------------------------------------------------------------ the engine interface
    def iterate(self) -> list[tuple[int, list]]:
        return self.driver.iterate()

    def metrics(self) -> dict[str, float]:
        out = dict(self.latest)
        out.pop("updates", None)
        out["ray/worker_restarts"] = float(self.worker_restarts)
        out["ray/lost_chunks"] = float(self.lost_chunks)
        self.check_nodes()
        out["ray/lost_nodes"] = float(self.lost_nodes)
        out["ray/weights_version"] = float(self.version)
        return {**out, **self.driver.metrics()}

    def agent_state(self) -> dict:
        self.driver.flush()
        return self.get([self.learners[0].state.remote()], what="checkpointing")[0]

    def extra_state(self) -> dict:
        return {}  # the agent is the whole state: replay shards are not checkpointed

    def restore(self, state: dict) -> list[str]:
        return []  # learners loaded the agent when they were placed

    def eval_policy(self) -> tuple[Policy, torch.device]:
        """A CPU copy of learner 0's policy, for evaluation on the driver."""
        cpu = torch.device("cpu")
        if self._eval_agent is None:
            self._eval_agent = build_agent(self.cfg, cpu)
        weights = self.get([self.learners[0].weights.remote()], what="evaluating")[0]
        self._eval_agent.policy_net.load_state_dict(weights)
        return self.algo.policy(self._eval_agent, self.cfg), cpu

    def forecast(self, step: int, sps: float) -> None:
        return None  # the cluster's speed is in the progress lines

    def close(self) -> None:
        for actor in [*self.workers, *self.learners]:
            try:
                ray.kill(actor)
            except Exception:
                pass
        for g in self.groups:
            try:
                remove_placement_group(g)
            except Exception:
                pass
        self.workers, self.learners, self.groups = [], [], []
        if self.how == "local":
            ray.shutdown()
