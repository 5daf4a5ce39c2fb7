"""The off-policy loop knows no algorithm: it acts and learns with what the schedule says,
makes num_envs / train_frequency updates per vector step once learning starts, and
reports the schedule's charts."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlamd.collector import Collector
from rlamd.envs import make_env
from rlamd.loops import OffPolicyLoop
from rlamd.replay import Buffer, TransitionStorage, UniformSampler


@dataclass(frozen=True)
class Schedule:
    batch_size: int = 4
    learning_starts: int = 8
    train_frequency: int = 4

    def acting(self, step: int, total_steps: int) -> tuple[float, ...]:
        return (float(step), 7.0)

    def learning(self, step: int, total_steps: int) -> tuple[float, ...]:
        return (step / total_steps,)

    def charts(self, step: int, total_steps: int) -> dict[str, float]:
        return {"charts/progress": step / total_steps}


class Recorder:
    """An agent that records what the loop hands it and acts at random."""

    def __init__(self) -> None:
        self.acted: list[tuple] = []
        self.learned: list[tuple] = []

    def act(self, obs: torch.Tensor, *acting: float) -> torch.Tensor:
        self.acted.append(acting)
        return torch.randint(0, 2, (obs.shape[0],))

    def learn(self, buffer, batch_size: int, *learning: float) -> torch.Tensor:
        self.learned.append((len(buffer), batch_size, *learning))
        return torch.zeros(batch_size)

    def update_on(self, batch) -> torch.Tensor:
        return torch.zeros(batch.obs.shape[0])

    def read_metrics(self) -> dict[str, float]:
        return {"losses/x": 1.0}


def test_the_loop_passes_the_schedules_values_and_makes_the_updates_due():
    env = make_env("cartpole", num_envs=2)
    storage = TransitionStorage(200, 2, (4,), torch.float32, num_actions=2)
    buf = Buffer(storage, UniformSampler(storage.capacity))
    agent = Recorder()
    loop = OffPolicyLoop(Collector(env, torch.device("cpu"), seed=0), buf, agent, Schedule(), 40)
    try:
        for _ in range(10):  # 20 env steps
            loop.iterate()
    finally:
        env.close()
    # acting gets the schedule's values for the step before each vector step
    assert agent.acted == [(float(2 * i), 7.0) for i in range(10)]
    # from step 8 on (after the 4th vector step): 2 envs / 4 = half an update per vector step
    assert len(agent.learned) == 3 and all(b == 4 for _, b, _ in agent.learned)
    assert [beta for *_, beta in agent.learned] == [10 / 40, 14 / 40, 18 / 40]
    assert loop.metrics() == {"charts/progress": 20 / 40, "losses/x": 1.0}
    assert loop.step == 20 and loop.learning_starts == 8
