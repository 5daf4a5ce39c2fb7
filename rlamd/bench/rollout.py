"""Env steps/s of Ray rollout actors: 1, 2 and 4 actors against one in-process collector.

Each actor is the rollout worker of ``--ray`` DQN runs: its own Breakout vector env, a
CPU copy of the Q-network acting with Ape-X epsilons, and the chunk's initial
priorities computed before it ships. The baseline is the same worker in this process
with the same single thread (no Ray, no object store), measured in the same run. Scaling is bounded by the cores:
on a 2-core machine 4 actors share 2 cores.
"""

from __future__ import annotations

import os
import time

import torch

from .common import Figure, measure, print_table

__all__ = ["run_rollout_suite"]


def _sections(game: str, envs: int, chunk: int, workers: int):
    from rlamd.train import sections_from_dicts

    return sections_from_dicts({
        "train": {"env": game, "algo": "dqn", "device": "cpu", "seed": 1},
        "ray": {"num_rollout_workers": workers, "envs_per_worker": envs, "chunk_steps": chunk},
    })  # fmt: skip


def run_rollout_suite(
    game: str = "breakout",
    actors: tuple[int, ...] = (1, 2, 4),
    envs_per_worker: int = 4,
    chunk_steps: int = 32,
    rounds: int = 4,
    repeats: int = 3,
    notes: list[str] | None = None,
) -> list[Figure]:
    try:
        import ray
    except ImportError:
        if notes is not None:
            notes.append("rollout skipped: Ray not installed (bash scripts/setup.sh --ray)")
        return []
    from rlamd.distributed.driver import _RayWorker
    from rlamd.distributed.roles import RolloutWorker

    per_chunk = chunk_steps * envs_per_worker
    sections = _sections(game, envs_per_worker, chunk_steps, max(actors))
    local = RolloutWorker(sections, 0)

    def in_process() -> int:
        for _ in range(rounds):
            local.collect(None, 0, chunk_steps)
        return rounds * per_chunk

    # One thread, as an actor with one CPU gets (Ray sets OMP_NUM_THREADS=1 there).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        figures = [measure(f"rollout/in_process/{envs_per_worker}envs", "env steps/s", in_process,
                           repeats=repeats, actors=0, envs_per_worker=envs_per_worker)]  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    local.close()
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=max(os.cpu_count() or 1, max(actors)),
            include_dashboard=False,
            log_to_driver=False,
        )
    try:
        for n in actors:
            workers = [_RayWorker.options(num_cpus=1).remote(sections, i) for i in range(n)]

            def on_ray(workers=workers) -> int:
                # Every actor keeps ``rounds`` chunks queued; the driver only waits.
                refs = [w.collect.options(num_returns=2).remote(None, 0, chunk_steps)[1]
                        for _ in range(rounds) for w in workers]  # fmt: skip
                ray.get(refs)
                return len(refs) * per_chunk

            figures.append(measure(f"rollout/ray/{n}actors", "env steps/s", on_ray, repeats=repeats,
                                   actors=n, envs_per_worker=envs_per_worker))  # fmt: skip
            for w in workers:
                ray.kill(w)
            time.sleep(0.5)
    finally:
        if started:
            ray.shutdown()
    base = figures[0].median
    one = figures[1].median
    rows = [("in-process worker, 1 thread", str(envs_per_worker), f"{base:,.0f}", "1.00", "-")]
    for f in figures[1:]:
        f.meta["ratio_to_in_process"] = f.median / base
        f.meta["scaling_vs_1_actor"] = f.median / one
        rows.append((f"{f.meta['actors']} Ray actor(s)", str(f.meta["actors"] * envs_per_worker),
                     f"{f.median:,.0f}", f"{f.median / base:.2f}", f"{f.median / one:.2f}"))  # fmt: skip
    print(f"\nrollout: {game}, Ray rollout actors x {envs_per_worker} envs, DQN acting + priorities, "
          f"chunks of {chunk_steps} steps; {os.cpu_count()} cores; median of {repeats}")  # fmt: skip
    print_table(rows, ("collector", "envs", "env steps/s", "vs in-process", "vs 1 actor"))
    return figures
