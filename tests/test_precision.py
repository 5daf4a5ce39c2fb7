"""The clamped mixed-precision update: skipped and counted on inf/NaN, never applied."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlamd.precision import Precision, load_optimizer_state, make_optimizer, resolve_precision


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))


def _loss(model, poison=None):
    x = torch.ones(16, 4)
    out = model(x).float()
    if poison is not None:
        out = out * poison
    return out.pow(2).mean()


@pytest.mark.parametrize("mode", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("poison", [float("inf"), float("nan")])
def test_non_finite_update_is_skipped_counted_and_never_applied(mode, poison):
    model = _model()
    params = list(model.parameters())
    opt = make_optimizer(params, 1e-2, 1e-8, torch.device("cpu"))
    prec = Precision(mode, torch.device("cpu"), max_grad_norm=1.0, grad_clamp=0.5)
    prec.step(_loss(model), opt, params)  # one good step to create optimizer state
    before = [p.detach().clone() for p in params]
    moments = [opt.state[p]["exp_avg"].clone() for p in params]
    steps = [opt.state[p]["step"].clone() for p in params]
    scale = prec.scale.clone()
    applied = prec.step(_loss(model, torch.tensor(poison)), opt, params)
    assert not bool(applied)
    assert prec.skipped.item() == 1
    for p, b in zip(params, before, strict=True):
        assert torch.equal(p.detach(), b)
    for p, m, s in zip(params, moments, steps, strict=True):
        assert torch.equal(opt.state[p]["exp_avg"], m) and torch.equal(opt.state[p]["step"], s)
    if mode == "fp16":
        assert prec.scale.item() == scale.item() / 2  # the scaler backs off
    else:
        assert prec.scale.item() == 1.0
    # and training goes on afterwards
    assert bool(prec.step(_loss(model), opt, params))
    assert any(not torch.equal(p.detach(), b) for p, b in zip(params, before, strict=True))


def test_gradients_are_clipped_by_norm_then_clamped_by_value():
    model = _model()
    params = list(model.parameters())
    opt = make_optimizer(params, 1e-3, 1e-8, torch.device("cpu"))
    prec = Precision("fp32", torch.device("cpu"), max_grad_norm=1.0, grad_clamp=0.01)
    prec.step(_loss(model, torch.tensor(1000.0)), opt, params)
    grads = torch.cat([p.grad.flatten() for p in params])
    assert grads.abs().max() <= 0.01 + 1e-7
    assert prec.last_grad_norm.item() > 1.0  # reported before clipping


def test_fp16_scale_grows_after_interval():
    model = _model()
    params = list(model.parameters())
    opt = make_optimizer(params, 1e-3, 1e-8, torch.device("cpu"))
    prec = Precision("fp16", torch.device("cpu"), init_scale=8.0, growth_interval=3)
    for _ in range(3):
        prec.step(_loss(model), opt, params)
    assert prec.scale.item() == 16.0


def test_state_dict_round_trip():
    prec = Precision("fp16", torch.device("cpu"), init_scale=4.0)
    prec.skipped += 3
    other = Precision("fp16", torch.device("cpu"))
    other.load_state_dict(prec.state_dict())
    assert other.scale.item() == 4.0 and other.skipped.item() == 3


def test_resolve_precision():
    cpu, gpu = torch.device("cpu"), torch.device("cuda", 0)
    assert resolve_precision("auto", cpu, native_bf16=True) == "bf16"
    assert resolve_precision("auto", cpu, native_bf16=False) == "fp32"
    assert resolve_precision("auto", gpu, native_bf16=True) == "bf16"
    assert resolve_precision("auto", gpu, native_bf16=False) == "fp16"
    assert resolve_precision("fp32", gpu, native_bf16=True) == "fp32"
    # no CNN: auto is fp32 on every device (small matmuls gain nothing; wide ones learn
    # worse in bf16); an explicit precision wins
    for device in (cpu, gpu):
        assert resolve_precision("auto", device, native_bf16=True, mlp=True) == "fp32"
    assert resolve_precision("auto", cpu, native_bf16=True, mlp=False) == "bf16"
    assert resolve_precision("bf16", cpu, native_bf16=True, mlp=True) == "bf16"
    with pytest.raises(ValueError, match="precision='fp8'; accepted: auto, fp32, bf16, fp16"):
        resolve_precision("fp8", cpu, True)
    with pytest.raises(ValueError, match="not supported on the CPU"):
        resolve_precision("fp16", cpu, True)


def test_loading_optimizer_state_keeps_this_runs_settings_and_lr_tensor():
    """Optimizer.load_state_dict restores saved switches (capturable, fused), swaps in
    the saved lr object (a captured step would then read a stale or CPU learning rate)
    and brings back the old run's lr and eps (a resume with a new lr would not apply it)."""
    w = nn.Parameter(torch.ones(3))
    w.grad = torch.ones(3)
    saved = torch.optim.Adam([w], lr=0.005, eps=1e-8, foreach=False)  # another run's
    saved.step()
    lr = torch.tensor(0.01)
    run = torch.optim.Adam([w], lr=lr, eps=1e-5, fused=True)  # this run: lr a tensor graphs read
    load_optimizer_state(run, saved.state_dict())
    group = run.param_groups[0]
    assert group["lr"] is lr and lr.item() == pytest.approx(0.01)
    assert group["eps"] == 1e-5
    assert group["fused"] is True and group["foreach"] is None
    step = run.state[w]["step"]
    assert step.dtype == torch.float32 and step.item() == 1.0
    torch.testing.assert_close(run.state[w]["exp_avg"], saved.state[w]["exp_avg"])
    run.step()  # the fused step accepts the loaded state
    assert run.state[w]["step"].item() == 2.0


@pytest.mark.parametrize(
    ("algo", "env", "precision", "native", "want"),
    [
        ("sac", "Pendulum-v1", "auto", True, "fp32"),  # 256 wide: learns worse in bf16
        ("td3", "Pendulum-v1", "auto", True, "fp32"),
        ("ppo", "Pendulum-v1", "auto", True, "fp32"),  # 64 wide
        ("sac", "Pendulum-v1", "bf16", True, "bf16"),  # asked for
        ("dqn", "breakout", "auto", True, "bf16"),  # Nature CNN
        ("dqn", "breakout", "auto", False, "fp32"),
    ],
)
def test_auto_precision_follows_the_algorithms_network(
    monkeypatch, algo, env, precision, native, want
):
    """``auto`` on a CPU: bf16 for a CNN where bf16 is native, fp32 for every MLP."""
    import dataclasses

    from rlamd.algos import base, build_agent
    from rlamd.config.sections import RunConfig
    from rlamd.envs import make_env

    real = base.describe_device

    def described(device):
        return dataclasses.replace(real(device), bf16=native)

    monkeypatch.setattr(base, "describe_device", described)
    train = {"env": env, "algo": algo, "device": "cpu", "precision": precision}
    cfg = RunConfig.from_dict({"train": train})
    vec = make_env(env, num_envs=1)
    try:
        agent = build_agent(cfg, torch.device("cpu"), vec)
    finally:
        vec.close()
    assert agent.precision.mode == want
