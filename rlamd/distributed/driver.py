"""``python -m rlamd.train ENV --ray``: place rollout workers and learners on a Ray cluster.

The driver (the process running ``rlamd.train``) owns no model it trains: it connects to
Ray, checks that the requested layout fits the cluster, places the actors, and moves
object references between them. The training loop, logging, evaluation and checkpoints
are the single-process ones (:func:`rlamd.train.run`), fed by a :class:`RayEngine`.

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
import socket
import time
import warnings
from typing import Any

import ray
import torch
from ray.exceptions import ActorUnavailableError, RayActorError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rlamd.config import ConfigError

from .config import (
    ClusterFitError,
    LearnerFailed,
    WorkersFailed,
    fmt_resources,
    learner_device_spec,
    plan_layout,
)
from .roles import Learner, RolloutWorker

__all__ = ["RayEngine", "connect"]

_WORKER_LOST = (RayActorError, ActorUnavailableError)
_UPDATES_PER_CALL = 1000


# ---------------------------------------------------------------------- cluster
def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes, when nothing listens at a ``host:port`` address
    (Ray itself keeps retrying an unreachable head for several minutes)."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return  # "auto", ray:// client addresses: Ray checks those itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"nothing answers at --ray-address {address} ({exc.strerror or exc}); is the head "
            "running (`ray start --head --port PORT`) and the port open from here?"
        ) from exc


def connect(address: str | None, needed_cpus: float, log) -> str:
    """Join ``address`` (or RAY_ADDRESS, or a running cluster), else start a local one.

    A local cluster started here gets at least ``needed_cpus`` logical CPUs, so a laptop
    can run every actor (oversubscribed, and said so).
    """
    if ray.is_initialized():
        return "already connected"
    env = {"RAY_DEDUP_LOGS": "1"}
    for k, v in env.items():
        os.environ.setdefault(k, v)
    if address and address != "local":
        _check_reachable(address)
        try:
            ray.init(address=address, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"could not join the Ray cluster at --ray-address {address!r}: {str(exc).splitlines()[0]}. "
                "Start one with `ray start --head`, give the head's host:port, or leave --ray-address "
                "out to join RAY_ADDRESS / a running cluster or else start a local one"
            ) from exc
        return f"joined {address}"
    if address is None:
        try:  # RAY_ADDRESS (set in `ray job submit` jobs), else a cluster started on this node
            ray.init(address=None if os.environ.get("RAY_ADDRESS") else "auto", log_to_driver=True)
            return "joined the running cluster"
        except (ConnectionError, RuntimeError, ValueError):
            pass
    cores = os.cpu_count() or 1
    cpus = max(cores, int(needed_cpus + 0.999))
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=True)
    note = f" (more than this machine's {cores} cores: actors share them)" if cpus > cores else ""
    log(f"rlamd: started a local Ray cluster with {cpus} CPUs{note}")
    return "local"


def _nodes() -> list[dict[str, float]]:
    return [dict(n["Resources"]) for n in ray.nodes() if n.get("Alive")]


def _wait_placed(group, what: str, timeout: float, layout: dict) -> None:
    ready, _ = ray.wait([group.ready()], timeout=timeout)
    if not ready:
        remove_placement_group(group)
        raise ClusterFitError(
            f"Ray could not place the {what} within {timeout:g} s: asked for {layout['asked']}; "
            f"{layout['where']}, of which {fmt_resources(ray.available_resources())} is free now "
            "(other jobs may hold the rest). Raise ray.placement_timeout_s or free resources"
        )


def _where() -> dict:
    """The calling actor's node, address, pid and Ray GPU ids (for the logged layout)."""
    return {"node": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid(), "gpus": [str(g) for g in ray.get_gpu_ids()]}  # fmt: skip


@ray.remote
class _RayWorker(RolloutWorker):
    def __init__(self, sections: dict[str, Any], index: int) -> None:
        with warnings.catch_warnings():  # Ray 2.x warns about its own use of actor_id here
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        super().__init__(sections, index, restarted)

    where = staticmethod(_where)


@ray.remote
class _RayLearner(Learner):
    where = staticmethod(_where)


# ---------------------------------------------------------------------- engine
class RayEngine:
    """What :func:`rlamd.train.run` steps on Ray: same interface as the local engine."""

    def __init__(self, sections: dict[str, Any], start_step: int, agent_state: dict | None, log) -> None:  # fmt: skip
        self.sections, self.log = sections, log
        train, rc = sections["train"], sections["ray"]
        self.train, self.rc, self.algo = train, rc, train.algo
        W, L = rc.num_rollout_workers, rc.num_learners
        if W < L:
            raise ConfigError(f"ray.num_rollout_workers={W} < ray.num_learners={L}: every learner needs a rollout worker of its own; accepted: --num-rollout-workers >= --num-learners")  # fmt: skip
        if train.algo == "dqn" and sections["dqn"].batch_size % L:
            raise ConfigError(f"dqn.batch_size={sections['dqn'].batch_size} must be a multiple of ray.num_learners={L} "
                              "(each learner takes an equal share of every batch)")  # fmt: skip
        if train.algo == "ppo" and W % L:
            raise ConfigError(f"ray.num_rollout_workers={W} must be a multiple of ray.num_learners={L} for PPO "
                              "(each learner takes an equal share of every rollout)")  # fmt: skip
        self.groups: list = []
        self.learners: list = []
        self.workers: list = []
        self.how = connect(rc.address, L * rc.cpus_per_learner + W * rc.cpus_per_worker, log)
        try:
            self._place(agent_state)
        except BaseException:
            self.close()
            raise
        self.step = start_step
        self.worker_restarts = 0
        self.lost_chunks = 0
        self._down: set[int] = set()
        self.updates = int(agent_state.get("updates", 0)) if agent_state else 0
        self._metrics: dict[str, float] = {}
        self._eval_agent = None
        self._weights: Any = self.learners[0].weights.remote()
        self.version = 0
        if self.algo == "dqn":
            self._dqn_init()

    # ------------------------------------------------------------------ placement
    def _place(self, agent_state: dict | None) -> None:
        rc, train = self.rc, self.train
        layout = plan_layout(rc, _nodes())
        spec = learner_device_spec(train.device, layout["gpus"])
        lg = placement_group([layout["learner"]] * rc.num_learners, strategy="PACK")
        self.groups.append(lg)
        _wait_placed(lg, "learners", rc.placement_timeout_s, layout)
        wg = placement_group([layout["worker"]] * rc.num_rollout_workers, strategy="SPREAD")
        self.groups.append(wg)
        _wait_placed(wg, "rollout workers", rc.placement_timeout_s, layout)
        W, L, E = rc.num_rollout_workers, rc.num_learners, rc.envs_per_worker
        tag = os.urandom(3).hex()  # actor names: rlamd-learner-R-TAG, rlamd-worker-W-TAG
        for r in range(L):
            streams = len(range(r, W, L)) * E
            self.learners.append(_RayLearner.options(
                num_cpus=rc.cpus_per_learner, num_gpus=layout["gpus"], max_restarts=0,
                name=f"rlamd-learner-{r}-{tag}",
                scheduling_strategy=PlacementGroupSchedulingStrategy(lg, r),
            ).remote(self.sections, r, L, spec, streams))  # fmt: skip
        for w in range(W):
            self.workers.append(_RayWorker.options(
                num_cpus=rc.cpus_per_worker, max_restarts=rc.max_worker_restarts, max_task_retries=0,
                name=f"rlamd-worker-{w}-{tag}",
                scheduling_strategy=PlacementGroupSchedulingStrategy(wg, w),
            ).remote(self.sections, w))  # fmt: skip
        addr, port = ray.get(self.learners[0].rendezvous.remote())
        devices = self._get(
            [ln.join.remote(addr, port) for ln in self.learners], what="joining the process group"
        )
        if agent_state is not None:
            self._get(
                [ln.load.remote(agent_state) for ln in self.learners], what="loading the checkpoint"
            )
        described = self._get([ln.describe.remote() for ln in self.learners], what="starting")
        where_l = self._get([ln.where.remote() for ln in self.learners], what="starting")
        where_w = ray.get([w.where.remote() for w in self.workers])
        for msg in described[0]["messages"]:
            self.log(msg)
        group = "no process group (one learner)" if L == 1 else (
            f"torch.distributed {'nccl' if devices[0].startswith('cuda') else 'gloo'} group of {L} at {addr}:{port}")  # fmt: skip
        lines = [f"rlamd: Ray {ray.__version__}, {self.how}; {layout['where']}",
                 f"rlamd: {L} learner(s), {group}:"]  # fmt: skip
        for d, w in zip(described, where_l, strict=True):
            gpu = f", Ray GPU ids {','.join(w['gpus'])}" if w["gpus"] else ""
            lines.append(f"rlamd:   learner {d['rank']} on {w['ip']} (pid {w['pid']}{gpu}): {d['summary']}, "
                         f"precision {d['precision']}" + (f", replay shard {d['replay']:,}" if d["replay"] else ""))  # fmt: skip
        nodes = sorted({w["ip"] for w in where_w})
        lines.append(f"rlamd: {W} rollout worker(s) x {rc.envs_per_worker} envs on {len({w['node'] for w in where_w})} "
                     f"node(s) ({', '.join(nodes)})")  # fmt: skip
        if self.algo == "dqn":
            eps = [e for i in range(W) for e in rc.epsilons(i)]
            lines.append(f"rlamd: Ape-X epsilons {min(eps):.2g}..{max(eps):.2g} over {len(eps)} envs; "
                         f"chunks of {rc.chunk_steps} steps")  # fmt: skip
            if self.sections["train"].save_replay:
                lines.append(
                    "rlamd: note: --save-replay is not supported with --ray; checkpoints hold the agent only"
                )
        self.layout_text = "\n".join(lines)

    def _get(self, refs: list, what: str) -> list:
        """Results of learner calls, in order; a dead learner becomes :class:`LearnerFailed`
        as soon as its call fails (not after the others time out in an all-reduce)."""
        results: dict = {}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                results[ready[0]] = ray.get(ready[0])
            except RayActorError as exc:
                raise LearnerFailed(
                    f"a learner died while {what}: {str(exc).splitlines()[0]}"
                ) from exc
        return [results[r] for r in refs]

    @property
    def detail(self) -> str:
        return self.layout_text

    # ------------------------------------------------------------------ DQN
    def _dqn_init(self) -> None:
        rc, cfg = self.rc, self.sections["dqn"]
        self.pending: dict = {}
        self.idle: list[int] = []
        self.sent = [0] * rc.num_learners
        self.add_refs: list = []
        self.train_refs: list | None = None
        self.credit = 0.0
        self._since_weights = 0
        self._metrics_t = 0.0
        self.per_batch = cfg.batch_size // rc.num_learners
        # Enough sent to every shard that it can fill a batch (each stream holds back up
        # to n_step + frame_stack + 2 records that are not sampleable yet).
        frames = self.sections["atari"].frame_stack
        self.warmup = [len(range(r, rc.num_rollout_workers, rc.num_learners)) * rc.envs_per_worker
                       * (cfg.n_step + frames + 2) + self.per_batch for r in range(rc.num_learners)]  # fmt: skip
        # Workers wait while the learners owe more than two rounds of chunks' updates.
        self.max_credit = (
            2 * rc.num_rollout_workers * rc.chunk_steps * rc.envs_per_worker / cfg.train_frequency
            + 1
        )
        for w in range(rc.num_rollout_workers):
            self._launch(w)

    def _launch(self, w: int) -> None:
        data, info = (
            self.workers[w]
            .collect.options(num_returns=2)
            .remote(self._weights, self.version, self.rc.chunk_steps)
        )
        self.pending[info] = (w, data)

    def _worker_lost(self, w: int, exc: BaseException) -> None:
        """A call to worker ``w`` failed: its chunk is dropped and Ray restarts it. Calls
        made while it restarts fail too; they count as the same restart."""
        self.lost_chunks += 1
        if w in self._down:
            time.sleep(0.2)
            return
        self._down.add(w)
        self.worker_restarts += 1
        self.log(f"rlamd: rollout worker {w} lost ({type(exc).__name__}); Ray restarts it "
                 f"(restart {self.worker_restarts}); its chunk in flight is dropped")  # fmt: skip
        limit = self.rc.max_worker_restarts
        if limit != -1 and self.worker_restarts > limit * self.rc.num_rollout_workers:
            raise WorkersFailed(f"rollout workers died {self.worker_restarts} times, more than "
                                f"ray.max_worker_restarts={limit} per worker allows")  # fmt: skip

    def _worker_back(self, w: int) -> None:
        self._down.discard(w)

    def _dqn_iterate(self) -> list[tuple[int, list]]:
        cfg, rc = self.sections["dqn"], self.rc
        waiting = list(self.pending) + (self.train_refs or [])
        if not waiting:  # every worker paused and nothing to train: should not happen; resume them
            for w in self.idle:
                self._launch(w)
            self.idle.clear()
            waiting = list(self.pending)
        ready, _ = ray.wait(waiting, num_returns=1, timeout=600)
        out = []
        for ref in ready:
            if self.train_refs and ref in self.train_refs:
                self._finish_train()
                continue
            w, data = self.pending.pop(ref)
            try:
                info = ray.get(ref)
            except _WORKER_LOST as exc:
                self._worker_lost(w, exc)
                self._launch(w)
                continue
            self._worker_back(w)
            r = w % rc.num_learners
            first = (w // rc.num_learners) * rc.envs_per_worker
            self.add_refs.append(self.learners[r].add.remote(data, first))
            self.sent[r] += info.env_steps
            self.step += info.env_steps
            if self.step >= cfg.learning_starts and all(
                s >= m for s, m in zip(self.sent, self.warmup, strict=True)
            ):
                self.credit += info.env_steps / cfg.train_frequency
            out.append((info.env_steps, info.episodes))
            if self.credit > self.max_credit:
                self.idle.append(w)
            else:
                self._launch(w)
        self._start_train()
        return out

    def _start_train(self) -> None:
        if self.train_refs is not None or self.credit < 1:
            return
        n = min(int(self.credit), _UPDATES_PER_CALL)
        self.credit -= n
        cfg = self.sections["dqn"]
        beta = cfg.beta(self.step, self.train.steps)
        # Metrics cost learner 0 one device sync: ask for them about once a second.
        want = time.monotonic() - self._metrics_t >= 1.0
        if want:
            self._metrics_t = time.monotonic()
        self.train_refs = [
            ln.train.remote(n, beta, want and r == 0) for r, ln in enumerate(self.learners)
        ]
        self._train_n = n

    def _finish_train(self) -> None:
        refs, self.train_refs = self.train_refs, None
        results = self._get(refs + self.add_refs, what="training")
        self.add_refs = []
        self.updates += self._train_n
        self._metrics.update(results[0] or {})
        self._since_weights += self._train_n
        if self._since_weights >= self.rc.weights_every or self.version == 0:
            self._weights = self.learners[0].weights.remote()
            self.version += 1
            self._since_weights = 0
        if self.credit <= self.max_credit:
            for w in self.idle:
                self._launch(w)
            self.idle.clear()
        self._start_train()

    # ------------------------------------------------------------------ PPO
    def _ppo_iterate(self) -> list[tuple[int, list]]:
        rc, T = self.rc, self.sections["ppo"].num_steps
        data: list = [None] * rc.num_rollout_workers
        infos: list = [None] * rc.num_rollout_workers
        todo = list(range(rc.num_rollout_workers))
        while todo:
            calls = {w: self.workers[w].collect.options(num_returns=2).remote(self._weights, self.version, T) for w in todo}  # fmt: skip
            todo = []
            for w, (d, i) in calls.items():
                try:
                    infos[w], data[w] = ray.get(i), d
                    self._worker_back(w)
                except _WORKER_LOST as exc:
                    self._worker_lost(w, exc)
                    todo.append(w)
        steps = sum(i.env_steps for i in infos)
        progress = self.step / self.train.steps
        L = rc.num_learners
        refs = [
            ln.learn.remote(progress, r == 0, *data[r::L]) for r, ln in enumerate(self.learners)
        ]
        results = self._get(refs, what="training")
        self._metrics.update(results[0])
        self.updates = int(self._metrics.pop("updates", self.updates))
        self._weights = self.learners[0].weights.remote()
        self.version += 1
        self.step += steps
        return [(i.env_steps, i.episodes) for i in infos]

    # ------------------------------------------------------------------ the engine interface
    def iterate(self) -> list[tuple[int, list]]:
        return self._dqn_iterate() if self.algo == "dqn" else self._ppo_iterate()

    def metrics(self) -> dict[str, float]:
        out = dict(self._metrics)
        out.pop("updates", None)
        out["ray/worker_restarts"] = float(self.worker_restarts)
        out["ray/lost_chunks"] = float(self.lost_chunks)
        out["ray/weights_version"] = float(self.version)
        if self.algo == "dqn":
            out["ray/paused_workers"] = float(len(self.idle))
        return out

    def agent_state(self) -> dict:
        if self.algo == "dqn" and self.train_refs is not None:
            self._finish_train()
        return self._get([self.learners[0].state.remote()], what="checkpointing")[0]

    def eval_policy(self):
        """A CPU copy of learner 0's policy, for evaluation on the driver."""
        from rlamd.train import build_agent

        if self._eval_agent is None:
            self._eval_agent, self._make_policy = build_agent(self.sections, torch.device("cpu"))
        weights = self._get([self.learners[0].weights.remote()], what="evaluating")[0]
        self._eval_agent.policy_net.load_state_dict(weights)
        return self._make_policy(None), torch.device("cpu")

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
