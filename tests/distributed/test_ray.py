"""``--ray`` on a local Ray (gloo between CPU learners). Run with ``pytest -m ray``
after ``bash scripts/setup.sh --dev --ray``."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch

from rlamd.train import main

from .helpers import dqn_batch, parameters_vector, ppo_rows, sections, share, whole_batch

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(address="local", num_cpus=6, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _evaluate(run: str, logdir, capsys) -> dict:
    from rlamd.evaluate import main as evaluate

    capsys.readouterr()
    assert (
        evaluate([run, "--logdir", str(logdir), "--episodes", "20", "--json", "--device", "cpu"])
        == 0
    )
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_two_ray_learners_on_halves_match_one_learner_on_the_whole_batch(algo):
    from rlamd.distributed.roles import Learner

    @ray.remote
    class _ProbedLearner(Learner):
        """A learner actor that also takes given batches and shows its parameters."""

        def update_batch(self, batch):
            self.agent.update_on(batch)

        def parameters(self):
            return parameters_vector(self)

    learners = [
        _ProbedLearner.options(num_cpus=1).remote(sections(algo), r, 2, "cpu", 2) for r in range(2)
    ]
    addr, port = ray.get(learners[0].rendezvous.remote())
    ray.get([ln.join.remote(addr, port) for ln in learners])
    if algo == "dqn":
        for i in range(3):
            ray.get(
                [ln.update_batch.remote(share(dqn_batch(i), r, 2)) for r, ln in enumerate(learners)]
            )
    else:
        ray.get([ln.feed.remote(share(ppo_rows(0), r, 2), 0) for r, ln in enumerate(learners)])
        ray.get([ln.step.remote(0.0) for ln in learners])
    two = ray.get([ln.parameters.remote() for ln in learners])
    for ln in learners:
        ray.kill(ln)
    assert torch.equal(two[0], two[1])
    before, one = whole_batch(algo)
    assert (one - before).abs().max() > 1e-3
    torch.testing.assert_close(two[0], one, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("algo", "evals", "best", "final"), [("dqn", 6, 195, 100), ("ppo", 3, 400, 300)]
)
def test_cartpole_learns_with_ray(tmp_path, capsys, algo, evals, best, final):
    """The classic presets (DQN 60k steps, PPO 150k) with 2 rollout workers x 4 envs.

    Ape-X DQN is asynchronous, so runs differ (more on a busy machine, where the workers
    act on older weights); DQN on CartPole also swings after it has learned (4 runs here:
    final greedy means 500, 500, 452, 182; one beside a training run: 132, 112, 160 at
    20k, 40k, 60k). Hence the bar: one of the run's ``evals`` evaluations (10 games each)
    reaches ``best``, and the final checkpoint still scores ``final`` (random play: about
    22).
    """
    args = [
        "cartpole",
        "--algo",
        algo,
        "--ray",
        "--logdir",
        str(tmp_path),
        "--run-name",
        algo,
        "--no-tensorboard",
        "--eval-every",
        str({"dqn": 10_000, "ppo": 50_000}[algo]),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "2 rollout worker(s) x 4 envs" in out
    rows = (tmp_path / algo / "evals.csv").read_text().splitlines()[1:]
    means = [float(r.split(",")[1]) for r in rows]
    assert len(means) == evals and max(means) >= best, means
    result = _evaluate(algo, tmp_path, capsys)
    assert result["mean"] >= final, result


def _engine(algo: str = "dqn"):
    from rlamd.config.sections import RunConfig
    from rlamd.distributed.driver import RayEngine

    s = RunConfig.from_dict(
        {
            "train": {
                "env": "cartpole",
                "algo": algo,
                "steps": 100_000,
                "device": "cpu",
                "seed": 1,
            },
            "dqn": {
                "buffer_size": 20_000,
                "batch_size": 64,
                "learning_starts": 500,
                "train_frequency": 2,
                "chunk_steps": 16,
            },
            "ray": {
                "enabled": True,
                "num_rollout_workers": 2,
                "envs_per_worker": 2,
            },
        }
    )
    return RayEngine(s, 0, None, lambda msg: None)


def _run_until(engine, steps: int) -> None:
    while engine.step < steps:
        engine.iterate()


def test_killing_a_rollout_worker_does_not_stop_training_and_its_restart_is_counted():
    engine = _engine()
    try:
        _run_until(engine, 2_000)
        pid = ray.get(engine.workers[0].where.remote())["pid"]
        updates = engine.updates
        assert updates > 0 and engine.worker_restarts == 0
        ray.kill(engine.workers[0], no_restart=False)
        _run_until(engine, 8_000)
        assert (
            engine.worker_restarts == 1
        )  # one kill, one restart (however many calls failed meanwhile)
        assert engine.metrics()["ray/worker_restarts"] == engine.worker_restarts
        assert engine.updates > updates  # training went on
        assert ray.get(engine.workers[0].where.remote())["pid"] != pid  # Ray restarted it
    finally:
        engine.close()


def _ppo_engine(num_steps: int = 128):
    from dataclasses import replace

    from rlamd.distributed.driver import RayEngine

    cfg = sections("ppo", enabled=True, num_rollout_workers=2, envs_per_worker=2)
    cfg = replace(cfg, ppo=replace(cfg.ppo, num_steps=num_steps))
    return RayEngine(cfg, 0, None, lambda msg: None)


def _pid(engine, w: int) -> int:
    return ray.get(engine.workers[w].where.remote(), timeout=300)["pid"]


def test_killing_a_ppo_worker_between_iterations_is_counted_as_a_restart():
    """The next call waits for the restarted actor instead of failing: the new process
    is seen in what it reports."""
    engine = _ppo_engine()
    try:
        engine.iterate()
        pid, step = _pid(engine, 1), engine.step
        ray.kill(engine.workers[1], no_restart=False)
        engine.iterate()  # re-collected from the restarted worker; nothing hangs
        assert engine.step == 2 * step  # a whole iteration, every worker's rollout
        assert engine.worker_restarts == 1
        assert engine.metrics()["ray/worker_restarts"] == 1
        assert _pid(engine, 1) != pid
        engine.iterate()
        assert engine.worker_restarts == 1 and engine.step == 3 * step
    finally:
        engine.close()


def test_killing_a_ppo_worker_during_collection_recollects_its_rollout():
    """The kill is sent right after worker 0's rollout was asked for, so it lands while
    that rollout is in flight however fast the collection runs (a fixed wait before the
    kill stopped landing inside once CartPole rollouts got faster)."""
    engine = _ppo_engine(num_steps=4096)
    try:
        engine.iterate()
        step, updates = engine.step, engine.updates
        pid = _pid(engine, 0)
        calls = engine.collect

        def collect_then_kill(w, n):  # the kill lands while worker 0's rollout is in flight
            refs = calls(w, n)
            if w == 0 and engine.worker_restarts == 0:
                ray.kill(engine.workers[0], no_restart=False)
            return refs

        engine.collect = collect_then_kill
        engine.iterate()
        assert engine.worker_restarts == 1 and engine.lost_chunks >= 1
        assert engine.step == 2 * step and engine.updates > updates
        assert _pid(engine, 0) != pid
    finally:
        engine.close()


def test_dead_learner_is_reported():
    from rlamd.distributed import LearnerFailed

    engine = _engine()
    try:
        _run_until(engine, 1_000)
        ray.kill(engine.learners[0])
        with pytest.raises(LearnerFailed, match="a learner died"):
            _run_until(engine, 10_000)
    finally:
        engine.close()


def _kill_learner_after_checkpoint(ckpt, done: threading.Event) -> None:
    while not ckpt.exists() and not done.is_set():
        time.sleep(0.1)
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
    ray.kill(ray.get_actor(next(n for n in names if n.startswith("rlamd-learner-0-"))))


@pytest.mark.parametrize("max_failures", [0, 1])
def test_learner_death_keeps_the_checkpoint_and_the_run_resumes(tmp_path, capsys, max_failures):
    args = [
        "cartpole",
        "--ray",
        "--steps",
        "6000",
        "--checkpoint-every",
        "1000",
        "--eval-every",
        "0",
        "--logdir",
        str(tmp_path),
        "--run-name",
        "r",
        "--no-tensorboard",
        "--max-failures",
        str(max_failures),
        "--set",
        "dqn.learning_starts=500",
    ]
    done = threading.Event()
    killer = threading.Thread(
        target=_kill_learner_after_checkpoint, args=(tmp_path / "r" / "checkpoint.pt", done)
    )
    killer.start()
    try:
        status = main(args)
    finally:
        done.set()
        killer.join()
    err = capsys.readouterr().err
    if max_failures == 0:
        assert status == 1
        assert "a learner died" in err and f"--resume {tmp_path / 'r'} --ray" in err
        assert "last checkpoint" in err
        assert main(["--resume", str(tmp_path / "r"), "--logdir", str(tmp_path)]) == 0
    else:
        assert status == 0
        assert "restarting (1 of --max-failures 1)" in err
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["step"] >= 6_000


def test_rollout_actors_take_their_threads_from_their_ray_cpus():
    """Each actor sets torch's threads from its own num_cpus, not from the node's cores or
    an inherited OMP_NUM_THREADS (here 4, which torch would otherwise take)."""
    from rlamd.distributed.roles import RolloutWorker

    @ray.remote
    class _Probed(RolloutWorker):
        def threads(self) -> int:
            return torch.get_num_threads()

    env = {"env_vars": {"OMP_NUM_THREADS": "4"}}
    actors = [
        _Probed.options(num_cpus=1, runtime_env=env).remote(sections("ppo"), i) for i in range(2)
    ]
    try:
        assert ray.get([a.threads.remote() for a in actors]) == [1, 1]
    finally:
        for a in actors:
            ray.kill(a)


def test_the_algorithms_that_say_they_run_on_ray_are_those_with_a_driver():
    """``on_ray`` (what refusals list for --ray, read without importing Ray) matches the Ray
    drivers registered when the distributed layer loads."""
    from rlamd.algos import ALGORITHMS
    from rlamd.distributed.driver import DRIVERS

    assert {name for name, algo in ALGORITHMS.items() if algo.on_ray} == set(DRIVERS)
