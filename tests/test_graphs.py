"""Graph capture (rlamd.graphs): modes, the capture wrapper, eager fallback, and on a GPU
graph == eager."""

from __future__ import annotations

import pytest
import torch

from rlamd.graphs import (
    GRAPH_MODES,
    Captured,
    GraphStep,
    capture_methods,
    graph_status,
    release_methods,
    resolve_graph_mode,
)

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


def test_captured_turns_floats_into_one_refilled_device_scalar_per_position():
    seen = []
    step = Captured(lambda x, eps, n: seen.append((eps, eps.item(), n)) or x * eps, CPU)
    x = torch.ones(3)
    step(x, 0.5, 4)
    step(x, 0.5, 4)
    step(x, 0.25, 4)
    (t1, v1, n1), (t2, v2, _), (t3, v3, _) = seen
    assert t1 is t2 is t3 and t1.dtype == torch.float64 and t1.dim() == 0
    assert (v1, v2, v3) == (0.5, 0.5, 0.25) and n1 == 4  # ints stay constants
    assert step.status.startswith("eager (graph mode 'auto' on cpu")


def _static_path(fn, **kw) -> Captured:
    """A wrapper taking its capture path on the CPU: static copies of the inputs, and a
    GraphStep that (without a GPU) runs the step eagerly over them."""
    step = Captured(fn, CPU, **kw)
    step.capture = True
    return step


def test_captured_copies_inputs_into_static_buffers_only_when_they_changed():
    calls = []

    def fn(x, rows):
        calls.append((x.data_ptr(), rows[0].data_ptr()))
        return x.sum() + rows[0].sum() + rows[1].sum()

    step = _static_path(fn)
    rows = (torch.ones(4), torch.zeros(2))
    x = torch.arange(3.0)
    assert step(x, rows).item() == 7.0
    assert calls[0][0] != x.data_ptr() and calls[0][1] != rows[0].data_ptr()  # statics
    copies = []
    real_copy = torch.Tensor.copy_
    with pytest.MonkeyPatch.context() as m:
        m.setattr(torch.Tensor, "copy_", lambda d, s, *a: copies.append(1) or real_copy(d, s, *a))
        assert step(x, rows).item() == 7.0  # nothing changed: nothing copied
        assert copies == []
        rows[1].add_(1.0)  # changed in place: its version moved, so it is copied again
        assert step(x, rows).item() == 9.0 and len(copies) == 1
        assert step(x + 1, rows).item() == 12.0 and len(copies) == 2  # a new tensor
    assert len({c for c in calls}) == 1  # every call read the same static buffers


def test_captured_keys_signatures_and_runs_eagerly_past_max_graphs():
    step = _static_path(lambda x: x * 2, max_graphs=2)
    for n in (1, 2, 3, 2):
        assert torch.equal(step(torch.ones(n)), torch.full((n,), 2.0))
    assert len(step._statics) == 2  # shapes (1,) and (2,); (3,) ran eagerly


def test_captured_takes_keywords_as_the_positions_they_name():
    # a wrapped method keeps its keywords (PPO's act(obs, greedy=True) under capture)
    def fn(x, scale=1.0, greedy=False, shift=0):
        return (x * scale + shift).argmax() if greedy else x * scale + shift

    for step in (Captured(fn, CPU), _static_path(fn)):
        x = torch.tensor([1.0, 3.0, 2.0])
        assert torch.equal(step(x, greedy=True), torch.tensor(1))
        assert torch.equal(step(x, shift=1), torch.tensor([2.0, 4.0, 3.0]))  # skips two
        assert torch.equal(step(x), x)
        assert torch.equal(step(x, 1.0, False, 0), x)  # the same call, by position
        with pytest.raises(TypeError, match="greed"):
            step(x, greed=True)
        with pytest.raises(TypeError, match="missing a required argument: 'x'"):
            step(scale=2.0)
    assert len(step._statics) == 3  # greedy, shift, neither: defaults fill the rest


def test_captured_methods_take_keywords_and_refuse_keyword_only_ones():
    class Agent:
        @torch.no_grad()
        def act(self, obs, greedy=False):
            return obs.argmax() if greedy else obs * 2

        def step(self, obs, *, scale=1.0):
            return obs * scale

    agent = capture_methods(Agent(), CPU, "off", act=(), step=())
    obs = torch.tensor([1.0, 3.0])
    assert torch.equal(agent.act(obs, greedy=True), torch.tensor(1))
    assert torch.equal(agent.act(obs), obs * 2)
    assert torch.equal(agent.step(obs), obs)  # keyword-only defaults stay the method's
    with pytest.raises(TypeError, match="agent step: keyword-only \\['scale'\\]"):
        agent.step(obs, scale=2.0)


def test_capture_and_release_methods_wrap_from_outside():
    class Agent:
        def __init__(self):
            self.generator = torch.Generator()

        def act(self, obs, eps):
            return obs + eps

    agent = capture_methods(Agent(), CPU, "auto", act=lambda *_: [])
    assert isinstance(agent.act, Captured) and agent.act.name == "agent act"
    assert torch.equal(agent.act(torch.zeros(2), 1.5), torch.full((2,), 1.5, dtype=torch.float64))
    release_methods(agent, "gradients are all-reduced")
    assert graph_status(agent) == {"act": "eager (gradients are all-reduced)"}
    with pytest.raises(ValueError, match="graph='of'"):
        capture_methods(Agent(), CPU, "of", act=())


# ---------------------------------------------------------------------- GPU only
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA or ROCm GPU")


def _dqn_pair(precision: str, prioritized: bool, interval: int = 4):
    """Two identical DQN agents and buffers on the GPU, one graphed, one eager."""
    from rlamd.agents.dqn import DQN, DQNConfig
    from rlamd.algos.dqn import capture_dqn
    from rlamd.precision import Precision
    from rlamd.replay.synthetic import filled_replay

    dev = torch.device("cuda", 0)
    out = []
    for mode in ("on", "off"):
        torch.manual_seed(0)
        cfg = DQNConfig(batch_size=64, target_update_interval=interval)
        agent = DQN(
            cfg, (4, 84, 84), 4, dev, Precision(precision, dev), seed=0, capturable=mode == "on"
        )
        agent = capture_dqn(agent, mode)
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
    assert ga.learn_step.captured, graph_status(ga)
    assert not ea.learn_step.captured
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
    assert agent.learn_step.captured and agent.act.captured


@gpu
@needs_gpu
def test_a_captured_learn_step_launches_a_tenth_of_what_eager_launches():
    from rlamd.profiling import call_cost

    (ga, gbuf), (ea, ebuf) = _dqn_pair("fp32", True)
    for _ in range(5):  # warm-up and capture
        ga.learn(gbuf, 64, 0.5)
        ea.learn(ebuf, 64, 0.5)
    assert ga.learn_step.captured, graph_status(ga)
    graph = call_cost(lambda: ga.learn(gbuf, 64, 0.5), "cuda")
    eager = call_cost(lambda: ea.learn(ebuf, 64, 0.5), "cuda")
    assert 1 <= graph["launches"] and graph["launches"] * 10 <= eager["launches"], (graph, eager)
    assert eager["kernels"] and eager["device_us"]


@gpu
@needs_gpu
def test_dqn_graph_act_matches_eager_act():
    (ga, _), (ea, _) = _dqn_pair("fp32", False)
    obs = torch.randint(0, 255, (16, 4, 84, 84), dtype=torch.uint8, device="cuda")
    for eps in (0.0, 0.3, 0.3, 0.3, 0.3, 1.0, 0.05):
        assert torch.equal(ga.act(obs, eps).clone(), ea.act(obs, eps))
    assert ga.act.captured


@gpu
@needs_gpu
def test_ppo_graph_and_eager_minibatch_updates_agree():
    from rlamd.agents.ppo import PPO, PPOConfig, Rollout
    from rlamd.algos.ppo import capture_ppo
    from rlamd.precision import Precision

    dev = torch.device("cuda", 0)
    agents = []
    for mode in ("on", "off"):
        torch.manual_seed(0)
        agent = PPO(
            PPOConfig(num_steps=32),
            (4, 84, 84),
            4,
            dev,
            Precision("fp32", dev),
            seed=0,
            capturable=mode == "on",
        )
        agents.append(capture_ppo(agent, mode))
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
    assert graphed.minibatch_step.captured and graphed.updates == eager.updates == 32
    for a, b in zip(graphed.params, eager.params, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for _ in range(5):  # the acting graphs' warm-up and capture (sampled and greedy)
        graphed.act(ro.obs[0])
        graphed.act(ro.obs[1], greedy=True)
    assert len(graphed.act._statics) == 2 and graphed.act.captured
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
