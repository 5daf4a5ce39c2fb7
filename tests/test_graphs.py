"""Graph capture (rlamd.graphs): modes, eager fallback, and on a GPU graph == eager."""

from __future__ import annotations

import pytest
import torch

from rlamd.graphs import GRAPH_MODES, GraphStep, resolve_graph_mode

CPU = torch.device("cpu")


def test_resolve_graph_mode():
    assert resolve_graph_mode("auto", CPU) is False  # auto never captures on the CPU
    assert resolve_graph_mode("off", "cuda:0") is False
    assert resolve_graph_mode("auto", "cuda:0") is True
    assert resolve_graph_mode("on", "cuda") is True
    with pytest.raises(
        ValueError, match=r"graph='on' needs a CUDA or ROCm GPU.*accepted on this device: auto, off"
    ):
        resolve_graph_mode("on", CPU)
    with pytest.raises(
        ValueError, match=r"graph='of'; accepted: auto, on, off; did you mean 'off'\?"
    ):
        resolve_graph_mode("of", CPU)
    assert GRAPH_MODES == ("auto", "on", "off")


def test_auto_on_the_cpu_runs_the_step_eagerly_every_call():
    calls = []
    step = GraphStep(lambda: calls.append(1) or len(calls), CPU, mode="auto", warmup=1)
    assert [step() for _ in range(5)] == [1, 2, 3, 4, 5]
    assert not step.captured and "cpu" in step.why_eager


def test_failed_capture_falls_back_to_eager_and_logs_once(monkeypatch):
    """Pretend to be on a GPU whose capture fails: the step must still run every call."""
    lines: list[str] = []
    calls = []
    step = GraphStep(
        lambda: calls.append(1) or len(calls), CPU, mode="off", warmup=2, log=lines.append
    )
    step.capture, step._why_eager = True, None  # as GraphStep sets them on a GPU
    monkeypatch.setattr(GraphStep, "_side_stream", lambda self, fn: fn())

    class Broken:
        def register_generator_state(self, g):  # pragma: no cover - no generators here
            pass

    def broken_graph(*a, **k):
        # As torch.cuda.graph's exit does: capture_end fails while the step's error is
        # handled, and the stream switch is left undone.
        try:
            raise RuntimeError("operation not permitted when stream is capturing\nmore detail")
        except RuntimeError:
            raise RuntimeError("operation failed due to a previous error during capture")  # noqa: B904 (torch chains implicitly)

    streams: list[str] = []
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Broken)
    monkeypatch.setattr(torch.cuda, "graph", broken_graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: "the caller's stream")
    monkeypatch.setattr(torch.cuda, "set_stream", streams.append)
    assert [step() for _ in range(6)] == [1, 2, 3, 4, 5, 6]  # warm-up, failed capture, eager
    assert len(lines) == 1
    assert "capture failed: RuntimeError: operation not permitted" in lines[0]
    assert "more detail" not in lines[0] and "eagerly" in lines[0]
    assert streams == ["the caller's stream"]  # restored once, after the failed capture
    assert not step.captured and not step.capture


def test_warmup_must_be_positive():
    with pytest.raises(ValueError, match="warmup=0; accepted: an integer >= 1"):
        GraphStep(lambda: None, CPU, warmup=0)


# ---------------------------------------------------------------------- GPU only
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")


def _dqn_pair(precision: str, prioritized: bool, interval: int = 4):
    """Two identical DQN agents and buffers on the GPU, one graphed, one eager."""
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.bench.learner import filled_replay
    from rlamd.precision import Precision

    dev = torch.device("cuda", 0)
    out = []
    for mode in ("on", "off"):
        torch.manual_seed(0)
        cfg = DQNConfig(batch_size=64, target_update_interval=interval)
        agent = DQN(cfg, (4, 84, 84), 4, dev, Precision(precision, dev), seed=0, graph=mode)
        buf = filled_replay(dev, 2048, prioritized=prioritized, steps=60)
        out.append((agent, buf))
    return out


@pytest.fixture(autouse=True)
def _deterministic_cudnn(monkeypatch):
    """Graph and eager agents must pick the same, deterministic convolution kernels."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)


@gpu
@needs_gpu
def test_a_capture_that_fails_falls_back_with_the_stream_and_generator_usable():
    """A host sync inside the step invalidates the capture; the eager fallback must run on
    the caller's stream with a generator that still draws (torch.cuda.graph's exit leaves
    both behind when capture_end fails)."""
    dev = torch.device("cuda", 0)
    g = torch.Generator(device=dev).manual_seed(3)
    ref = torch.Generator(device=dev).manual_seed(3)
    lines: list[str] = []

    def step():
        x = torch.rand(4, generator=g, device=dev)
        return x * float(x.sum().item() > -1)  # .item(): not capturable

    graphed = GraphStep(step, dev, mode="on", warmup=1, generators=[g], log=lines.append)
    stream = torch.cuda.current_stream(dev)
    outs = [graphed().clone() for _ in range(4)]
    assert not graphed.captured and len(lines) == 1 and "capture failed" in lines[0]
    assert torch.cuda.current_stream(dev) == stream
    expected = [torch.rand(4, generator=ref, device=dev) for _ in range(4)]
    # The failed capture's draw is rolled back: the fallback draws what eager would have.
    for a, b in zip(outs, expected, strict=True):
        torch.testing.assert_close(a, b)


@gpu
@needs_gpu
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("prioritized", [True, False])
def test_dqn_graph_and_eager_learn_give_the_same_parameters(precision, prioritized):
    (ga, gbuf), (ea, ebuf) = _dqn_pair(precision, prioritized)
    for i in range(12):  # warm-up (3), capture, replays; target syncs at 4, 8, 12
        beta = 0.4 + 0.05 * i
        ga.learn(gbuf, 64, beta)
        ea.learn(ebuf, 64, beta)
    assert ga._learn_step.captured, ga.graph_status
    assert not ea._learn_step.captured
    assert ga.updates == ea.updates == 12
    for a, b in zip(
        [*ga.q.parameters(), *ga.target.parameters()],
        [*ea.q.parameters(), *ea.target.parameters()],
        strict=True,
    ):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    if prioritized:
        torch.testing.assert_close(
            gbuf.sampler.tree.leaves, ebuf.sampler.tree.leaves, rtol=1e-4, atol=1e-6
        )
    ma, mb = ga.read_metrics(), ea.read_metrics()
    assert ma["losses/td_loss"] == pytest.approx(mb["losses/td_loss"], rel=1e-3)


@gpu
@needs_gpu
def test_dqn_graph_learn_and_act_replay_without_a_host_sync():
    (agent, buf), _ = _dqn_pair("bf16", True)
    obs = torch.randint(0, 255, (8, 4, 84, 84), dtype=torch.uint8, device="cuda")
    for _ in range(5):  # warm-up and capture happen outside the checked region
        agent.learn(buf, 64, 0.5)
        agent.act(obs, 0.1)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            agent.learn(buf, 64, 0.5)
            agent.act(obs, 0.1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert agent._learn_step.captured and all(s.captured for _, s in agent._act_steps.values())


@gpu
@needs_gpu
def test_dqn_graph_act_matches_eager_act():
    (ga, _), (ea, _) = _dqn_pair("fp32", False)
    obs = torch.randint(0, 255, (16, 4, 84, 84), dtype=torch.uint8, device="cuda")
    for eps in (0.0, 0.3, 0.3, 0.3, 0.3, 1.0, 0.05):
        assert torch.equal(ga.act(obs, eps).clone(), ea.act(obs, eps))
    assert all(s.captured for _, s in ga._act_steps.values())


@gpu
@needs_gpu
def test_ppo_graph_and_eager_minibatch_updates_agree():
    from rlamd.agents.ppo import PPO, PPOConfig, Rollout
    from rlamd.precision import Precision

    dev = torch.device("cuda", 0)
    agents = []
    for mode in ("on", "off"):
        torch.manual_seed(0)
        agents.append(
            PPO(
                PPOConfig(num_steps=32),
                (4, 84, 84),
                4,
                dev,
                Precision("fp32", dev),
                seed=0,
                graph=mode,
            )
        )
    g = torch.Generator(device=dev).manual_seed(1)
    ro = Rollout(32, 8, (4, 84, 84), torch.uint8, dev)
    for rollout in range(2):
        ro.obs.random_(0, 255, generator=g)
        ro.rewards.normal_(generator=g)
        ro.actions.random_(0, 4, generator=g)
        for agent in agents:
            agent.set_progress(0.1 * rollout)
            agent.update(ro, torch.zeros(8, device=dev))
    graphed, eager = agents
    assert graphed._mb_step.captured and graphed.updates == eager.updates == 32
    for a, b in zip(graphed.params, eager.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for _ in range(5):  # the acting graphs' warm-up and capture (sampled and greedy)
        graphed.act(ro.obs[0])
        graphed.act(ro.obs[1], greedy=True)
    assert len(graphed._act_steps) == 2
    assert all(step.captured for _, step in graphed._act_steps.values())
    a_g, logp_g, v_g = (t.clone() for t in graphed.act(ro.obs[1], greedy=True))
    a_e, logp_e, v_e = eager.act(ro.obs[1], greedy=True)
    assert torch.equal(a_g, a_e)
    torch.testing.assert_close(logp_g, logp_e, rtol=1e-4, atol=1e-5)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        graphed.update(ro, torch.zeros(8, device=dev))
        for _ in range(3):
            graphed.act(ro.obs[0])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.testing.assert_close(v_g, v_e, rtol=1e-4, atol=1e-5)
