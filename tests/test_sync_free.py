"""The steps a GPU captures read nothing back to the host, checked on the CPU.

On a GPU, ``torch.cuda.set_sync_debug_mode("error")`` catches a host synchronisation (the
``gpu`` tests use it). CI has no GPU and on the CPU nothing syncs, so here every way a
tensor's value reaches Python (``.item()``, ``bool()``, ``int()``, ``.tolist()``,
``.numpy()``, ``.cpu()``, ``nonzero``) raises while a step runs. The replay trees use the
plain torch backend: the GPUs' fallback where Triton cannot run, and the same calls the
Triton backend wraps. Priorities are not validated, as on a GPU.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch

CPU = torch.device("cpu")
_READS = ("item", "__bool__", "__int__", "__float__", "__index__", "tolist", "numpy", "cpu")
_READS += ("nonzero",)


@contextmanager
def _no_host_reads(monkeypatch):
    def refuse(name):
        def read(*args, **kwargs):
            raise AssertionError(f"host read of a tensor inside a captured step: {name}")

        return read

    with monkeypatch.context() as m:
        for name in _READS:
            m.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        m.setattr(torch, "nonzero", refuse("torch.nonzero"))
        yield


def _replay(prioritized: bool):
    from rlamd.replay.synthetic import filled_replay

    extra = {"validate": False} if prioritized else {}
    return filled_replay(CPU, 1024, prioritized=prioritized, steps=48, backend="torch", **extra)


def test_the_check_catches_a_host_read(monkeypatch):
    x = torch.ones(3)
    with _no_host_reads(monkeypatch), pytest.raises(AssertionError, match="Tensor.item"):
        x.sum().item()
    with _no_host_reads(monkeypatch), pytest.raises(AssertionError, match="__bool__"):
        bool(x.all())
    assert x.sum().item() == 3.0  # restored afterwards


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("prioritized", [True, False])
def test_dqn_learn_step_and_acting_read_nothing_back(monkeypatch, precision, prioritized):
    """The whole learn call a training run makes (capture wrapper on its static-buffer
    path, the host bookkeeping, the target copy when due) and acting."""
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.algos.dqn import capture_dqn
    from rlamd.precision import Precision

    buf = _replay(prioritized)
    cfg = DQNConfig(batch_size=32, target_update_interval=2)
    agent = capture_dqn(DQN(cfg, (4, 84, 84), 4, CPU, Precision(precision, CPU)), "auto")
    agent.learn_step.capture = agent.act.capture = True  # the path a GPU captures
    agent.learn(buf, 32, 0.5)  # lazy state (optimizer moments) outside the check
    obs = torch.randint(0, 255, (4, 4, 84, 84), dtype=torch.uint8)
    agent.act(obs, 0.1)
    before = [p.clone() for p in agent.q.parameters()]
    with _no_host_reads(monkeypatch):
        agent.learn(buf, 32, 0.6)  # update 2: the target copy runs too
        agent.act(obs, 0.2)
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.q.parameters(), strict=True))
    assert all(
        torch.equal(a, b)
        for a, b in zip(agent.q.parameters(), agent.target.parameters(), strict=True)
    )


def test_ppo_minibatch_step_and_acting_read_nothing_back(monkeypatch):
    from rlamd.agents.ppo import PPO, PPOConfig, Rollout
    from rlamd.algos.ppo import capture_ppo
    from rlamd.precision import Precision

    cfg = PPOConfig(num_steps=16, num_minibatches=4)
    agent = capture_ppo(PPO(cfg, (4, 84, 84), 4, CPU, Precision("fp32", CPU)), "auto")
    agent.minibatch_step.capture = agent.act.capture = True  # the path a GPU captures
    ro = Rollout(16, 4, (4, 84, 84), torch.uint8, CPU)
    g = torch.Generator().manual_seed(0)
    ro.obs.random_(0, 255, generator=g)
    ro.rewards.normal_(generator=g)
    ro.actions.random_(0, 4, generator=g)
    agent.update(ro, torch.zeros(4))  # lazy state outside the check
    before = [p.clone() for p in agent.params]
    rows = agent.flatten(ro, torch.zeros(4))
    with _no_host_reads(monkeypatch):
        agent.learn(rows)  # every epoch and minibatch (no target_kl: no read per epoch)
        agent.act(ro.obs[0])
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.params, strict=True))


def test_continuous_ppo_with_normalised_observations_reads_nothing_back(monkeypatch):
    """The Gaussian policy's steps and the observation statistics' update after learning."""
    from rlamd.agents.ppo import PPO, PPOConfig, Rollout
    from rlamd.algos.ppo import capture_ppo
    from rlamd.precision import Precision

    cfg = PPOConfig(num_steps=16, num_minibatches=4, norm_obs=True)
    agent = PPO(cfg, (5,), 2, CPU, Precision("fp32", CPU), continuous=True)
    agent = capture_ppo(agent, "auto")
    agent.minibatch_step.capture = agent.act.capture = True  # the path a GPU captures
    ro = Rollout(16, 4, (5,), torch.float32, CPU, action_size=2)
    g = torch.Generator().manual_seed(0)
    ro.obs.normal_(generator=g)
    ro.rewards.normal_(generator=g)
    ro.actions.normal_(generator=g)
    agent.update(ro, torch.zeros(4))  # lazy state outside the check
    before = [p.clone() for p in agent.params]
    rows = agent.flatten(ro, torch.zeros(4))
    with _no_host_reads(monkeypatch):
        agent.learn(rows)
        agent.act(ro.obs[0])
        agent.act(ro.obs[0], True)
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.params, strict=True))
    assert agent.net.obs_norm.count.item() == 128
