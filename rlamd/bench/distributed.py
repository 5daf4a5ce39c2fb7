"""Scale-out. ``rollout``: the ``--ray`` DQN rollout worker's env steps/s (Breakout) on one
thread here and as Ray actors, and bytes per transition shipped, as ``stacks`` (4x84x84 each)
and ``frames`` (``dqn.ship_frames``). ``allreduce`` (as rccl-tests' ``all_reduce_perf``): two
Ray learners grouped as ``--num-learners 2`` does (``nccl`` with GPUs, else ``gloo``; no Ray:
two gloo processes); per float32 size from 8 B: time, algbw and busbw (algbw x 2(n-1)/n)."""

from __future__ import annotations

import os
import pickle
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from rlamd.config.sections import RunConfig
from rlamd.distributed.local import local_ray
from rlamd.distributed.roles import RolloutWorker
from rlamd.distributed.sync import run_group, time_allreduce

from .common import Figure, measure, repeat, report

__all__ = ["rollout_sections", "run_allreduce_suite", "run_rollout_suite"]


ENCODINGS = ("stacks", "frames")
GAME, ACTORS, ENVS, CHUNK = "breakout", (1, 2, 4), 4, 32  # actors; envs each; steps a chunk


def _in_process(sections, rounds: int, repeats: int) -> list[Figure]:
    """Per encoding: bytes/transition and a single-threaded in-process worker's steps/s."""
    figures, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # as an actor with one CPU gets (Ray sets OMP_NUM_THREADS=1)
    try:
        for enc in ENCODINGS:
            local, sizes = RolloutWorker(sections[enc], 0), []
            for payload, info in (local.collect(None, 0, CHUNK) for _ in range(rounds)):
                sizes.append(len(pickle.dumps(payload, protocol=5)) / info.env_steps)
            name = f"rollout/{enc}/bytes_per_transition"
            figures.append(Figure.of(name, "bytes", sizes, encoding=enc))
            run = repeat(partial(local.collect, None, 0, CHUNK), rounds, rounds * CHUNK * ENVS)
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
                chunk = [w.collect.options(num_returns=2) for w in workers]
                refs = [c.remote(None, 0, CHUNK)[1] for _ in range(rounds) for c in chunk]
                ray.get(refs)
                return len(refs) * CHUNK * ENVS

            meta = {"actors": n, "encoding": enc, "envs_per_worker": ENVS}
            name = f"rollout/{enc}/ray/{n}actors"
            figures.append(measure(name, "env steps/s", run, repeats=repeats, **meta))
            for w in workers:
                ray.kill(w)
            time.sleep(0.5)
    return figures


def rollout_sections(note: Callable[[str], None] | None = None) -> dict[str, RunConfig]:
    """The rollout worker's settings per encoding (``note`` hears a setting at an old place)."""
    train = {"env": GAME, "algo": "dqn", "device": "cpu", "seed": 1}
    ray_cfg = {"num_rollout_workers": max(ACTORS), "envs_per_worker": ENVS}
    sections: dict[str, RunConfig] = {}
    for e in ENCODINGS:
        dqn = {"chunk_steps": CHUNK, "ship_frames": e == "frames"}
        sections[e] = RunConfig.from_dict({"train": train, "ray": ray_cfg, "dqn": dqn}, note)
    return sections


def run_rollout_suite(
    rounds: int = 4, repeats: int = 3, notes: list[str] | None = None
) -> list[Figure]:
    """Figures per encoding: bytes/transition, in-process and (with Ray) actors' env steps/s."""
    sections = rollout_sections()
    figures, actors = _in_process(sections, rounds, repeats), ACTORS
    try:
        import ray
    except ImportError:
        actors, why = (), "rollout: Ray not installed, its actors skipped (setup.sh --ray)"
        (notes if notes is not None else []).append(why)
    if actors:
        with local_ray(ray, max(os.cpu_count() or 1, max(ACTORS))):
            figures += _on_ray(ray, sections, rounds, repeats)
    _table(figures, actors, repeats)
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


def _member(rank: int, world: int, sizes: list[int], iters: int):
    return time_allreduce(torch.device("cpu"), sizes, iters)


def run_allreduce_suite(max_bytes: int = 256 * 2**20, iters: int = 10, notes: list | None = None):
    """Figures per message size: bus bandwidth of a 2-rank float32 all-reduce (GB/s)."""
    world, sizes = 2, [8 << i for i in range(max(0, (max_bytes // 8).bit_length()))]
    try:
        import ray
    except ImportError:
        why = "Ray not installed, measured between two local processes (gloo)"
        (notes if notes is not None else []).append(f"allreduce: {why} instead of two Ray learners")
        results, backend = run_group(_member, world, sizes, iters)[0], "gloo"
        where = "two processes"
    else:
        from rlamd.distributed.driver import _RayLearner

        where = "two Ray learner actors"
        with local_ray(ray, 4):
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 2 else 0.0
            train = {"env": "cartpole", "device": "auto" if gpus else "cpu"}
            sections = RunConfig.from_dict({"train": train})
            spec, new = "cuda" if gpus else "cpu", _RayLearner.options(num_cpus=1, num_gpus=gpus)
            learners = [new.remote(sections, r, 2, spec, 2) for r in range(2)]
            try:
                addr, port = ray.get(learners[0].rendezvous.remote())
                devices = ray.get([ln.join.remote(addr, port) for ln in learners])
                results = ray.get([ln.allreduce_times.remote(sizes, iters) for ln in learners])[0]
            finally:
                for ln in learners:
                    ray.kill(ln)
        backend = "nccl" if devices[0].startswith("cuda") else "gloo"
    figures, rows, factor = [], [], 2 * (world - 1) / world
    for nbytes, times in results:
        t = statistics.median(times)
        algbw, busbw = nbytes / t / 1e9, [nbytes / x / 1e9 * factor for x in times]
        meta = {"bytes": nbytes, "time_us": t * 1e6, "algbw": algbw, "ranks": world}
        name = f"allreduce/{backend}/{nbytes}B"
        figures.append(Figure.of(name, "GB/s busbw", busbw, **meta, between=where))
        rows.append((f"{nbytes:,}", f"{t * 1e6:,.1f}", f"{algbw:.3g}", f"{algbw * factor:.3g}"))
    name = "RCCL/NCCL" if backend == "nccl" else "gloo (CPU)"
    head = f"allreduce: {world} ranks ({where}), {name}, float32, median of {iters}"
    report(head, rows, ("bytes", "time (us)", "algbw (GB/s)", "busbw (GB/s)"))
    return figures
