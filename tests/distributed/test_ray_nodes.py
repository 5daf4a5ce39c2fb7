"""A node lost mid-run (``ray.cluster_utils.Cluster``: a head without CPUs and two nodes).

Losing the node of rollout workers only: Ray reschedules their placement-group bundles
and restarts them on the surviving node, the run counts and logs the loss, finishes, and
its checkpoint evaluates. Losing the learner's node: the run stops with its last
checkpoint kept and the resume command printed.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from rlamd.train import main

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

ARGS = {
    "dqn": ["--steps", "12000", "--checkpoint-every", "2000", "--set", "dqn.learning_starts=500"],
    "ppo": ["--steps", "12288", "--checkpoint-every", "2048"],
}


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    # 1 learner + 2 workers = 3 CPUs: either node alone holds them all.
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    nodes = [c.add_node(num_cpus=3) for _ in range(2)]
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c, nodes
    ray.shutdown()
    c.shutdown()


def _actor_nodes() -> dict[str, list[str]]:
    """'learner' / 'worker' -> node ids of this run's actors."""
    out: dict[str, list[str]] = {"learner": [], "worker": []}
    for a in ray.util.list_named_actors(all_namespaces=True):
        name = a["name"]
        for role in out:
            if name.startswith(f"rlamd-{role}-"):
                actor = ray.get_actor(name, namespace=a["namespace"])
                out[role].append(ray.get(actor.where.remote(), timeout=120)["node"])
    return out


def _remove_after_checkpoint(cluster, nodes, role, ckpt, done, removed) -> None:
    while not ckpt.exists() and not done.is_set():
        time.sleep(0.2)
    if done.is_set():
        return
    where = _actor_nodes()
    if role == "learner":
        target = where["learner"][0]
    else:  # a node with rollout workers and no learner
        target = next(n for n in where["worker"] if n not in where["learner"])
    node = next(n for n in nodes if n.node_id == target)
    removed["workers"] = where["worker"].count(target)
    cluster.remove_node(node)


def _train_losing(cluster, nodes, role, algo, tmp_path) -> tuple[int, dict]:
    args = [
        "cartpole",
        "--algo",
        algo,
        "--ray",
        "--num-rollout-workers",
        "2",
        "--envs-per-worker",
        "2",
        "--eval-every",
        "0",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "r",
        "--no-tensorboard",
        *ARGS[algo],
    ]
    done, removed = threading.Event(), {}
    remover = threading.Thread(
        target=_remove_after_checkpoint,
        args=(cluster, nodes, role, tmp_path / "r" / "checkpoint.pt", done, removed),
    )
    remover.start()
    try:
        status = main(args)
    finally:
        done.set()
        remover.join()
    return status, removed


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_losing_a_rollout_workers_node_reschedules_them_and_the_run_finishes(
    cluster, tmp_path, capsys, algo
):
    import torch

    from rlamd.evaluate import main as evaluate

    status, removed = _train_losing(*cluster, "worker", algo, tmp_path)
    out, err = capsys.readouterr()
    log = out + err
    assert status == 0, log[-3000:]
    assert removed["workers"] >= 1  # the removed node held rollout workers
    assert "left the Ray cluster (lost node 1)" in log, log[-3000:]
    assert "Ray restarts it (restart 1)" in log
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["step"] >= int(ARGS[algo][1])
    argv = ["r", "--logdir", str(tmp_path), "--episodes", "3", "--json", "--device", "cpu"]
    assert evaluate(argv) == 0
    assert "mean" in json.loads(capsys.readouterr().out)


def test_losing_the_learners_node_keeps_the_checkpoint_and_prints_the_resume_command(
    cluster, tmp_path, capsys
):
    status, _ = _train_losing(*cluster, "learner", "dqn", tmp_path)
    err = capsys.readouterr().err
    assert status == 1
    assert "a learner died" in err and "last checkpoint" in err
    assert f"--resume {tmp_path / 'r'} --ray" in err
    assert (tmp_path / "r" / "checkpoint.pt").exists()
