"""Env steps/s of Ray rollout actors, and the bytes each transition costs the object store.

Each actor is the rollout worker of ``--ray`` DQN runs: its own Breakout vector env, a
CPU copy of the Q-network acting with Ape-X epsilons, and the chunk's initial
priorities computed before it ships. Both chunk encodings are measured in the same run:
``stacks`` (every observation's whole 4x84x84 stack) and ``frames`` (each env's newest
frame per step plus the stacks where the chain breaks, ``ray.ship_frames``; the learner
rebuilds the stacks). Bytes per transition are a pickled chunk's size over its
transitions (what the object store holds and a learner fetches). The baseline is the
same worker in this process with the same single thread (no Ray, no object store).
Scaling is bounded by the cores: on a 2-core machine 4 actors share 2 cores.
"""

from __future__ import annotations

import os
import pickle
import time

import torch

from .common import Figure, measure, print_table

__all__ = ["run_rollout_suite"]

ENCODINGS = ("stacks", "frames")
"""Chunk encodings compared: whole stacks (before) and newest frames (``ray.ship_frames``)."""


def _sections(game: str, envs: int, chunk: int, workers: int, frames: bool):
    from rlamd.config.sections import RunConfig

    return RunConfig.from_dict(
        {
            "train": {"env": game, "algo": "dqn", "device": "cpu", "seed": 1},
            "ray": {
                "num_rollout_workers": workers,
                "envs_per_worker": envs,
                "chunk_steps": chunk,
                "ship_frames": frames,
            },
        }
    )


def run_rollout_suite(
    game: str = "breakout",
    actors: tuple[int, ...] = (1, 2, 4),
    envs_per_worker: int = 4,
    chunk_steps: int = 32,
    rounds: int = 4,
    repeats: int = 3,
    notes: list[str] | None = None,
) -> list[Figure]:
    """Figures per encoding: bytes/transition, in-process and Ray actors' env steps/s."""
    try:
        import ray  # noqa: F401
    except ImportError:
        if notes is not None:
            notes.append("rollout skipped: Ray not installed (bash scripts/setup.sh --ray)")
        return []
    sections = {
        enc: _sections(game, envs_per_worker, chunk_steps, max(actors), enc == "frames")
        for enc in ENCODINGS
    }
    figures = _in_process_figures(sections, envs_per_worker, chunk_steps, rounds, repeats)
    figures += _ray_figures(sections, actors, envs_per_worker, chunk_steps, rounds, repeats)
    _report(figures, game, actors, envs_per_worker, chunk_steps, repeats)
    return figures


def _in_process_figures(
    sections: dict, envs_per_worker: int, chunk_steps: int, rounds: int, repeats: int
) -> list[Figure]:
    """Per encoding: bytes/transition and a single-threaded in-process worker's steps/s."""
    from rlamd.distributed.roles import RolloutWorker

    per_chunk = chunk_steps * envs_per_worker
    figures: list[Figure] = []
    threads = torch.get_num_threads()
    # One thread, as an actor with one CPU gets (Ray sets OMP_NUM_THREADS=1 there).
    torch.set_num_threads(1)
    try:
        for enc in ENCODINGS:
            local = RolloutWorker(sections[enc], 0)
            sizes = []
            for _ in range(rounds):
                payload, info = local.collect(None, 0, chunk_steps)
                sizes.append(len(pickle.dumps(payload, protocol=5)) / info.env_steps)
            figures.append(
                Figure(
                    f"rollout/{enc}/bytes_per_transition",
                    "bytes",
                    sorted(sizes)[len(sizes) // 2],
                    min(sizes),
                    max(sizes),
                    sizes,
                    {"encoding": enc},
                )
            )

            def in_process(local=local) -> int:
                for _ in range(rounds):
                    local.collect(None, 0, chunk_steps)
                return rounds * per_chunk

            figures.append(
                measure(
                    f"rollout/{enc}/in_process/{envs_per_worker}envs",
                    "env steps/s",
                    in_process,
                    repeats=repeats,
                    actors=0,
                    envs_per_worker=envs_per_worker,
                    encoding=enc,
                )
            )
            local.close()
    finally:
        torch.set_num_threads(threads)
    return figures


def _ray_figures(
    sections: dict,
    actors: tuple[int, ...],
    envs_per_worker: int,
    chunk_steps: int,
    rounds: int,
    repeats: int,
) -> list[Figure]:
    """Per actor count and encoding: Ray rollout actors' env steps/s."""
    import ray

    from rlamd.distributed.driver import _RayWorker

    per_chunk = chunk_steps * envs_per_worker
    figures: list[Figure] = []
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=max(os.cpu_count() or 1, max(actors)),
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        for n in actors:
            for enc in ENCODINGS:
                workers = [
                    _RayWorker.options(num_cpus=1).remote(sections[enc], i) for i in range(n)
                ]

                def on_ray(workers=workers) -> int:
                    # Every actor keeps ``rounds`` chunks queued; the driver only waits.
                    refs = [
                        w.collect.options(num_returns=2).remote(None, 0, chunk_steps)[1]
                        for _ in range(rounds)
                        for w in workers
                    ]
                    ray.get(refs)
                    return len(refs) * per_chunk

                figures.append(
                    measure(
                        f"rollout/{enc}/ray/{n}actors",
                        "env steps/s",
                        on_ray,
                        repeats=repeats,
                        actors=n,
                        encoding=enc,
                        envs_per_worker=envs_per_worker,
                    )
                )
                for w in workers:
                    ray.kill(w)
                time.sleep(0.5)
    finally:
        if started:
            ray.shutdown()
    return figures


def _report(
    figures: list[Figure],
    game: str,
    actors: tuple[int, ...],
    envs: int,
    chunk_steps: int,
    repeats: int,
) -> None:
    by = {f.name: f for f in figures}
    size = {enc: by[f"rollout/{enc}/bytes_per_transition"].median for enc in ENCODINGS}
    base = by[f"rollout/stacks/in_process/{envs}envs"].median
    rows = [
        (
            "bytes per transition",
            "-",
            *(f"{size[e]:,.0f}" for e in ENCODINGS),
            f"{size['frames'] / size['stacks']:.2f}",
        )
    ]
    by["rollout/frames/bytes_per_transition"].meta["ratio_to_stacks"] = (
        size["frames"] / size["stacks"]
    )
    keys = [f"in_process/{envs}envs", *(f"ray/{n}actors" for n in actors)]
    for key in keys:
        a, b = by[f"rollout/stacks/{key}"], by[f"rollout/frames/{key}"]
        for f in (a, b):
            f.meta["ratio_to_in_process_stacks"] = f.median / base
        b.meta["ratio_to_stacks"] = b.median / a.median
        what = (
            "in-process worker, 1 thread"
            if key.startswith("in_process")
            else (f"{a.meta['actors']} Ray actor(s) x {envs} envs")
        )
        rows.append(
            (
                f"{what}: env steps/s",
                f"{base:,.0f}",
                f"{a.median:,.0f}",
                f"{b.median:,.0f}",
                f"{b.median / a.median:.2f}",
            )
        )
    print(
        f"\nrollout: {game}, DQN acting + priorities, chunks of {chunk_steps} steps, "
        f"stacks vs frames measured in this run; {os.cpu_count()} cores; median of {repeats}"
    )
    print_table(rows, ("", "in-process (stacks)", "stacks", "frames", "frames / stacks"))
