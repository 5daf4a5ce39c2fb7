"""Two simulated nodes (``ray.cluster_utils.Cluster``) and a job through ``ray job submit``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlamd.train import main

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]


def test_two_node_cluster_places_rollout_workers_on_both_nodes_and_trains(tmp_path, capsys):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        args = [
            "cartpole",
            "--ray",
            "--num-rollout-workers",
            "2",
            "--envs-per-worker",
            "2",
            "--steps",
            "3000",
            "--eval-every",
            "0",
            "--logdir",
            str(tmp_path),
            "--run-name",
            "two",
            "--no-tensorboard",
            "--set",
            "dqn.learning_starts=500",
        ]
        assert main(args) == 0
        layout = (tmp_path / "two" / "cluster.txt").read_text()
        assert "on 2 node(s)" in layout and "the cluster has 4 CPU, 0 GPU on 2 node(s)" in layout
        assert "rlamd: done" in capsys.readouterr().out
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_layout_that_does_not_fit_is_refused_before_training(tmp_path, capsys):
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        args = ["cartpole", "--ray", "--num-rollout-workers", "4", "--logdir", str(tmp_path)]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert (
            "does not fit: asked for 4 rollout workers x 1 CPU + 1 learners x (1 CPU, 0 GPU) = 5 CPU"
            in err
        )
        assert "the cluster has 2 CPU, 0 GPU on 1 node(s)" in err
        assert not any(tmp_path.iterdir())  # refused before a run folder was made
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_job_submitted_to_a_local_head_succeeds(tmp_path):
    ray_cli = str(Path(sys.executable).parent / "ray")
    if not os.path.exists(ray_cli):
        ray_cli = shutil.which("ray") or pytest.skip("no ray command")
    # A fresh environment for the ray CLI: the in-process tests leave Ray variables behind.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_AUTH_MODE"] = "token"  # as the README's cluster section does
    port, dash = "6390", "8290"
    subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120)
    start = subprocess.run(
        [
            ray_cli,
            "start",
            "--head",
            "--num-cpus",
            "4",
            "--port",
            port,
            "--dashboard-port",
            dash,
            "--include-dashboard",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert start.returncode == 0, start.stderr
    try:
        job = subprocess.run(
            [
                ray_cli,
                "job",
                "submit",
                "--address",
                f"http://127.0.0.1:{dash}",
                "--working-dir",
                str(ROOT),
                "--",
                sys.executable,
                "-m",
                "rlamd.train",
                "cartpole",
                "--ray",
                "--steps",
                "2000",
                "--eval-every",
                "0",
                "--logdir",
                str(tmp_path),
                "--run-name",
                "job",
                "--set",
                "dqn.learning_starts=500",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
        assert "succeeded" in job.stdout and "rlamd: done" in job.stdout
        assert "joined the running cluster" in job.stdout
        assert (tmp_path / "job" / "checkpoint.pt").exists()
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120)


def test_unreachable_cluster_address_fails_in_seconds_and_creates_nothing(tmp_path, capsys):
    args = ["cartpole", "--ray", "--ray-address", "127.0.0.1:1", "--logdir", str(tmp_path)]
    assert main(args) == 2
    assert "nothing answers at --ray-address 127.0.0.1:1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
