"""The Ray layer's pieces that run without Ray: shards fed per worker, Ape-X priorities,
the layout plan, and gradient averaging between learner processes (gloo)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from rlamd.algos.dqn_apex import chunk_td_errors
from rlamd.config.sections import RayConfig
from rlamd.distributed import ClusterFitError
from rlamd.distributed.plan import learner_device_spec, plan_layout
from rlamd.distributed.sync import run_group
from rlamd.replay import PrioritizedReplayBuffer

from ..replay.helpers import CountingEnv
from .helpers import group_member, whole_batch


def test_adding_each_workers_streams_alone_equals_adding_all_at_once():
    """A learner's shard gets each rollout worker's envs in its own call, in any order."""
    env = CountingEnv(4, seed=1)
    kw = dict(obs_shape=(2,), obs_dtype=torch.float32, n_step=3, gamma=0.9, seed=0)
    together = PrioritizedReplayBuffer(4 * 40, 4, **kw)
    apart = PrioritizedReplayBuffer(4 * 40, 4, **kw)
    groups = [np.array([2, 0]), np.array([3, 1])]
    for step in range(150):
        obs, a, r, term, _trunc, done, final, _ = env.step()
        pos_all = together.add(obs, a, r, term, done, final)
        for g in groups[:: 1 if step % 2 else -1]:
            pos = apart.add(obs[g], a[g], r[g], term[g], done[g], final[g], streams=g)
            assert (pos == pos_all[g]).all()
    for name in ("frames", "actions", "rewards", "flags"):
        assert torch.equal(getattr(together.storage, name), getattr(apart.storage, name)), name
    assert (together.storage._active == apart.storage._active).all()
    assert len(together) == len(apart) > 0
    idx = torch.from_numpy(together.storage.active_indices())
    a_win, b_win = together.storage.window(idx), apart.storage.window(idx)
    for x, y in zip(a_win, b_win, strict=True):
        assert torch.equal(x, y)


def test_streams_must_be_distinct_and_in_range():
    buf = PrioritizedReplayBuffer(100, 4, (2,), torch.float32)
    z = np.zeros(2)
    with pytest.raises(
        ValueError, match=r"streams=\[1, 1\]; accepted: distinct stream numbers in 0..3"
    ):
        buf.add(np.zeros((2, 2), np.float32), z, z, z, z, streams=[1, 1])
    with pytest.raises(ValueError, match="0..3"):
        buf.add(np.zeros((1, 2), np.float32), z[:1], z[:1], z[:1], z[:1], streams=[4])


def _brute_td(q, fv, a, r, term, done, gamma, n):
    T, E = a.shape
    out = np.zeros((T, E))
    for t in range(T):
        for e in range(E):
            g, boot = 0.0, None
            for k in range(n):
                j = t + k
                if j >= T:
                    boot = gamma**k * q[T, e].max()
                    break
                g += gamma**k * r[j, e]
                if term[j, e]:
                    boot = 0.0
                    break
                if done[j, e]:
                    boot = gamma ** (k + 1) * fv[j, e]
                    break
            if boot is None:
                boot = gamma**n * q[t + n, e].max()
            out[t, e] = abs(q[t, e, a[t, e]] - (g + boot))
    return out


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_chunk_priorities_equal_brute_force_n_step_td_errors(n_step):
    rng = np.random.default_rng(n_step)
    T, E, A = 12, 3, 4
    q = rng.normal(size=(T + 1, E, A)).astype(np.float32)
    fv = rng.normal(size=(T, E)).astype(np.float32)
    a = rng.integers(0, A, (T, E))
    r = rng.normal(size=(T, E)).astype(np.float32)
    term = rng.random((T, E)) < 0.15
    done = term & (rng.random((T, E)) < 0.5) | (
        rng.random((T, E)) < 0.1
    )  # life losses and truncations too
    got = chunk_td_errors(*(torch.from_numpy(x) for x in (q, fv, a, r, term, done)), 0.9, n_step)
    np.testing.assert_allclose(
        got.numpy(), _brute_td(q, fv, a, r, term, done, 0.9, n_step), rtol=1e-5, atol=1e-5
    )


def test_ape_x_epsilons_spread_over_all_envs_of_all_workers():
    from rlamd.algos.dqn_apex import apex_epsilons
    from rlamd.config.sections import RunConfig

    cfg = RunConfig(ray=RayConfig(num_rollout_workers=3, envs_per_worker=2))
    eps = [e for w in range(3) for e in apex_epsilons(cfg, w)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert all(x > y for x, y in itertools.pairwise(eps))  # distinct, decreasing
    one = RunConfig(ray=RayConfig(num_rollout_workers=1, envs_per_worker=1))
    assert apex_epsilons(one, 0) == [pytest.approx(0.4)]
    # the spread's settings are DQN's (they were [ray] ones)
    wide = dataclasses.replace(cfg, dqn=dataclasses.replace(cfg.dqn, apex_alpha=1.0))
    assert apex_epsilons(wide, 2)[1] == pytest.approx(0.4**2)


NODE = {"CPU": 4.0, "GPU": 1.0}


def test_layout_fits_and_takes_one_gpu_per_learner_when_the_cluster_has_gpus():
    plan = plan_layout(RayConfig(num_rollout_workers=4, num_learners=2), [NODE, NODE])
    assert plan["gpus"] == 1.0 and plan["learner"] == {"CPU": 1.0, "GPU": 1.0}
    assert plan_layout(RayConfig(), [{"CPU": 8.0}])["gpus"] == 0.0


def test_layout_that_does_not_fit_says_what_was_asked_and_what_the_cluster_has():
    with pytest.raises(ClusterFitError) as err:
        plan_layout(RayConfig(num_rollout_workers=8, num_learners=2), [NODE])
    text = str(err.value)
    assert "8 rollout workers x 1 CPU + 2 learners x (1 CPU, 1 GPU) = 10 CPU, 2 GPU" in text
    assert "the cluster has 4 CPU, 1 GPU on 1 node(s)" in text and "--num-rollout-workers" in text
    with pytest.raises(ClusterFitError, match=r"no node can hold one learner \(1 CPU, 2 GPU\)"):
        plan_layout(RayConfig(gpus_per_learner=2, num_rollout_workers=1), [NODE, NODE])


def test_learner_device_follows_its_gpu_share():
    assert learner_device_spec("auto", 0.5) == "cuda"
    assert learner_device_spec("hip", 1) == "hip"
    assert learner_device_spec("auto", 0) == "cpu"
    with pytest.raises(ValueError, match="--gpus-per-learner 1"):
        learner_device_spec("cuda", 0)
    with pytest.raises(ValueError, match="--gpus-per-learner 0"):
        learner_device_spec("cpu", 1)


def test_ray_settings_are_checked():
    with pytest.raises(ValueError, match="ray.num_learners=0"):
        RayConfig(num_learners=0)
    with pytest.raises(ValueError, match="above 1 Ray accepts only whole GPUs"):
        RayConfig(gpus_per_learner=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_two_learner_processes_on_halves_match_one_learner_on_the_whole_batch(algo):
    """gloo between two processes; the same check runs between Ray actors under -m ray."""
    two = run_group(group_member, 2, algo)
    assert torch.equal(two[0], two[1])  # identical parameters after every update
    before, one = whole_batch(algo)
    assert (one - before).abs().max() > 1e-3  # the updates moved the weights
    torch.testing.assert_close(two[0], one, rtol=1e-5, atol=1e-6)


def test_the_driver_passes_the_plugin_variable_to_its_actors(monkeypatch):
    from rlamd.algos import PLUGINS_VARIABLE
    from rlamd.distributed.plan import actor_options

    monkeypatch.delenv(PLUGINS_VARIABLE, raising=False)
    assert actor_options((PLUGINS_VARIABLE,)) == {}  # the job's runtime env stays as it is
    monkeypatch.setenv(PLUGINS_VARIABLE, "my_algos:register")
    assert actor_options((PLUGINS_VARIABLE, "RLAMD_UNSET")) == {
        "runtime_env": {"env_vars": {PLUGINS_VARIABLE: "my_algos:register"}}
    }
    driver = (Path(__file__).parents[2] / "rlamd" / "distributed" / "driver.py").read_text()
    assert driver.count("**actor_options((PLUGINS_VARIABLE,))") == 2  # learners and workers
