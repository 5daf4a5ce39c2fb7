"""The thread budget: how cores are split, where the budget comes from, what is applied."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from rlamd.threads import (
    OPENMP_ENV,
    ThreadPlan,
    apply_threads,
    cores_available,
    describe,
    plan_threads,
    prepare_env,
    ray_cpus,
    threads_for_load,
)


@pytest.mark.parametrize(
    ("cores", "num_envs", "env_threads"),
    [(1, 8, 1), (2, 8, 2), (4, 8, 4), (16, 8, 8), (64, 1, 1), (3, 2, 2)],
)
def test_plan_splits_the_budget(cores, num_envs, env_threads):
    plan = plan_threads(cores, num_envs)
    assert plan.cores == cores and plan.source == "train.threads"
    # Acting and env stepping alternate, so each phase may use the whole budget, but no
    # more env threads than envs (an extra thread would only idle).
    assert plan.env_threads == env_threads
    assert plan.torch_threads == cores and plan.numba_threads == cores
    assert plan.wait_policy.startswith("brief spin")


def test_default_budget_is_the_affinity_mask():
    assert cores_available() == len(os.sched_getaffinity(0))
    assert plan_threads(None, 8).cores == cores_available()
    plan = plan_threads(None, 8, available=3)
    assert (plan.cores, plan.source, plan.env_threads, plan.torch_threads) == (
        3,
        "affinity mask",
        3,
        3,
    )


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux affinity masks")
def test_affinity_mask_is_counted_not_the_machine():
    # A child pinned to one core must see a budget of 1 even on a bigger machine.
    code = "from rlamd.threads import plan_threads; print(plan_threads(None, 8).cores)"
    first = sorted(os.sched_getaffinity(0))[0]
    out = subprocess.run(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{first}}}); {code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1"


@pytest.mark.parametrize(
    ("resources", "budget"),
    [
        ({"CPU": 1.0}, 1),
        ({"CPU": 2.0, "GPU": 1.0}, 2),
        ({"CPU": 0.5}, 1),
        ({}, 1),
        ({"CPU": 6.0}, 6),
    ],
)
def test_ray_num_cpus_is_the_budget(resources, budget):
    plan = plan_threads(ray_cpus(resources), num_envs=4, source="ray num_cpus")
    assert plan.cores == budget and plan.source == "ray num_cpus"
    assert plan.env_threads == min(4, budget) and plan.torch_threads == budget


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_bad_budget_is_refused_with_what_is_accepted(bad):
    with pytest.raises(ValueError, match=r"threads=.*accepted: an integer >= 1"):
        plan_threads(bad, 8)


def test_bad_ray_cpus_and_num_envs_are_refused():
    with pytest.raises(ValueError, match="accepted: a number >= 0"):
        ray_cpus({"CPU": -1.0})
    with pytest.raises(ValueError, match="num_envs=0; accepted"):
        plan_threads(2, 0)


def test_apply_sets_torch_threads():
    before = torch.get_num_threads()
    try:
        target = 1 if before != 1 else 2
        apply_threads(ThreadPlan(target, "test", 1, target, 1, "PASSIVE"))
        assert torch.get_num_threads() == target
    finally:
        torch.set_num_threads(before)


def test_prepare_env_keeps_the_users_choice():
    env: dict[str, str] = {"GOMP_SPINCOUNT": "5"}
    assert prepare_env(env)
    assert env["GOMP_SPINCOUNT"] == "5"
    assert env["KMP_BLOCKTIME"] == OPENMP_ENV["KMP_BLOCKTIME"]
    fresh: dict[str, str] = {}
    prepare_env(fresh)
    assert fresh["GOMP_SPINCOUNT"] == "20000" and "OMP_WAIT_POLICY" not in fresh


def test_describe_is_one_line_with_the_split():
    line = describe(plan_threads(2, 8, source="ray num_cpus"))
    assert "\n" not in line
    assert "threads 2 (ray num_cpus)" in line and "envs 2" in line and "torch 2" in line


@pytest.mark.parametrize(
    ("budget", "others", "cores", "want"),
    [
        (2, 0.0, 2, 2),
        (2, 0.3, 2, 2),
        (2, 1.0, 2, 1),
        (2, 2.0, 2, 1),
        (8, 2.2, 8, 6),
        (4, 0.0, 8, 4),
    ],
)
def test_threads_follow_other_processes_load(budget, others, cores, want):
    assert threads_for_load(budget, others, cores) == want
