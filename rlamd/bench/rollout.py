"""Env steps/s of Ray rollout actors, and each transition's bytes in the object store.

Each actor is the ``--ray`` DQN rollout worker (Breakout, a CPU Q-network with Ape-X
epsilons, initial priorities), for both chunk encodings in one run: ``stacks`` (every
observation's 4x84x84) and ``frames`` (newest frames plus stacks where the chain breaks,
``ray.ship_frames``). Baseline: the same worker in this process with one thread.
"""

from __future__ import annotations

import os
import pickle
import time

import torch

from .common import Figure, measure, report

__all__ = ["run_rollout_suite"]

ENCODINGS = ("stacks", "frames")
GAME, ACTORS, ENVS, CHUNK = "breakout", (1, 2, 4), 4, 32
"""Breakout; 1, 2 and 4 actors (4 share the development machine's 2 cores); 4 envs each;
chunks of 32 steps."""


def _in_process(sections, rounds: int, repeats: int) -> list[Figure]:
    """Per encoding: bytes/transition and a single-threaded in-process worker's steps/s."""
    from rlamd.distributed.roles import RolloutWorker

    figures, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # as an actor with one CPU gets (Ray sets OMP_NUM_THREADS=1)
    try:
        for enc in ENCODINGS:
            local = RolloutWorker(sections[enc], 0)
            sizes = []
            for _ in range(rounds):
                payload, info = local.collect(None, 0, CHUNK)
                sizes.append(len(pickle.dumps(payload, protocol=5)) / info.env_steps)
            figures.append(
                Figure.of(f"rollout/{enc}/bytes_per_transition", "bytes", sizes, encoding=enc)
            )

            def run(local=local) -> int:
                for _ in range(rounds):
                    local.collect(None, 0, CHUNK)
                return rounds * CHUNK * ENVS

            meta = {"actors": 0, "envs_per_worker": ENVS, "encoding": enc}
            name = f"rollout/{enc}/in_process/{ENVS}envs"
            figures.append(measure(name, "env steps/s", run, repeats=repeats, **meta))
            local.close()
    finally:
        torch.set_num_threads(threads)
    return figures


def _on_ray(ray, sections, rounds: int, repeats: int) -> list[Figure]:
    """Per actor count and encoding: Ray rollout actors' env steps/s."""
    from rlamd.distributed.driver import _RayWorker

    figures = []
    for n in ACTORS:
        for enc in ENCODINGS:
            workers = [_RayWorker.options(num_cpus=1).remote(sections[enc], i) for i in range(n)]

            def run(workers=workers) -> int:  # every actor keeps ``rounds`` chunks queued
                refs = [
                    w.collect.options(num_returns=2).remote(None, 0, CHUNK)[1]
                    for _ in range(rounds)
                    for w in workers
                ]
                ray.get(refs)
                return len(refs) * CHUNK * ENVS

            meta = {"actors": n, "encoding": enc, "envs_per_worker": ENVS}
            name = f"rollout/{enc}/ray/{n}actors"
            figures.append(measure(name, "env steps/s", run, repeats=repeats, **meta))
            for w in workers:
                ray.kill(w)
            time.sleep(0.5)
    return figures


def run_rollout_suite(rounds: int = 4, repeats: int = 3, notes: list[str] | None = None):
    """Figures per encoding: bytes/transition, in-process and Ray actors' env steps/s."""
    from rlamd.config.sections import RunConfig

    try:
        import ray
    except ImportError:
        if notes is not None:
            notes.append("rollout skipped: Ray not installed (bash scripts/setup.sh --ray)")
        return []
    train = {"env": GAME, "algo": "dqn", "device": "cpu", "seed": 1}
    ray_cfg = {"num_rollout_workers": max(ACTORS), "envs_per_worker": ENVS, "chunk_steps": CHUNK}
    sections = {
        e: RunConfig.from_dict({"train": train, "ray": ray_cfg | {"ship_frames": e == "frames"}})
        for e in ENCODINGS
    }
    figures = _in_process(sections, rounds, repeats)
    started = not ray.is_initialized()
    if started:
        cpus = max(os.cpu_count() or 1, max(ACTORS))
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        figures += _on_ray(ray, sections, rounds, repeats)
    finally:
        if started:
            ray.shutdown()
    _table(figures, ACTORS, repeats)
    return figures


def _table(figures: list[Figure], actors: tuple[int, ...], repeats: int) -> None:
    """Bytes per transition and env steps/s per encoding, with the ratios into meta."""
    by = {f.name: f for f in figures}
    base = by[f"rollout/stacks/in_process/{ENVS}envs"].median
    rows, labels = [], {"bytes_per_transition": "bytes per transition"}
    labels[f"in_process/{ENVS}envs"] = "in-process worker, 1 thread: env steps/s"
    labels |= {f"ray/{n}actors": f"{n} Ray actor(s) x {ENVS} envs: env steps/s" for n in actors}
    for key, label in labels.items():
        a, b = by[f"rollout/stacks/{key}"], by[f"rollout/frames/{key}"]
        b.meta["ratio_to_stacks"] = b.median / a.median
        if a.unit != "bytes":
            for f in (a, b):
                f.meta["ratio_to_in_process_stacks"] = f.median / base
        first = "-" if a.unit == "bytes" else f"{base:,.0f}"
        cells = (f"{a.median:,.0f}", f"{b.median:,.0f}", f"{b.median / a.median:.2f}")
        rows.append((label, first, *cells))
    head = f"rollout: {GAME}, DQN acting + priorities, chunks of {CHUNK} steps, stacks vs frames "
    head += f"measured in this run; {os.cpu_count()} cores; median of {repeats}"
    report(head, rows, ("", "in-process (stacks)", "stacks", "frames", "frames / stacks"))
