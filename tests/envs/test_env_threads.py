"""make_env(threads=...) sets the worker threads of ale-py's C++ vector env."""

from __future__ import annotations

import gc
import os

import pytest

from rlamd.envs import AtariConfig, make_env

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts /proc threads")


def _os_threads() -> int:
    gc.collect()  # ale-py joins its workers when the C++ env is freed, not on close()
    return len(os.listdir("/proc/self/task"))


def _started(threads: int) -> int:
    # ale-py starts no more workers than the machine has hardware threads.
    return min(threads, os.cpu_count() or 1)


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_reach_the_ale_vector_env(threads):
    before = _os_threads()
    env = make_env("breakout", num_envs=4, threads=threads)
    try:
        assert _os_threads() - before == _started(threads)
    finally:
        env.close()


def test_threads_override_the_config_and_none_keeps_it(monkeypatch):
    import ale_py.vector_env

    asked: list[int] = []
    real = ale_py.vector_env.AtariVectorEnv

    def spy(*args, **kwargs):
        asked.append(kwargs["num_threads"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ale_py.vector_env, "AtariVectorEnv", spy)
    make_env("breakout", num_envs=4, atari=AtariConfig(num_threads=2)).close()
    make_env("breakout", num_envs=4, threads=1, atari=AtariConfig(num_threads=2)).close()
    make_env("breakout", num_envs=1).close()
    assert asked == [2, 1, 1]


def test_default_is_one_thread_per_env_up_to_the_affinity_mask():
    before = _os_threads()
    env = make_env("breakout", num_envs=8)
    try:
        assert _os_threads() - before == _started(min(8, len(os.sched_getaffinity(0))))
    finally:
        env.close()


def test_classic_tasks_ignore_threads():
    env = make_env("cartpole", num_envs=2, threads=4)
    env.close()


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="threads=.*accepted: an integer >= 1"):
        make_env("breakout", num_envs=2, threads=bad)
    with pytest.raises(ValueError, match="num_threads=-1; accepted"):
        AtariConfig(num_threads=-1)
