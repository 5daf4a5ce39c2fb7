"""rlamd's SAC and TD3 updates are SB3's, step for step (where Stable-Baselines3 is
installed: ``bash scripts/setup.sh --dev --bench``).

Both start from one set of weights (SB3's, copied into rlamd's networks), take the same
batches and the same normal draws (SAC's reparameterised actions, TD3's target smoothing
noise), and update in fp32. The networks must then agree to float rounding after many
updates: the losses, their order (SAC: temperature from the pre-update policy, critics,
then the actor against the updated critics; TD3: the delayed actor and target steps),
the targets, the Polyak blends and Adam are the same. Results beside SB3's at equal env
steps rest on this (README, "SAC and TD3 beside SB3").
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlamd.agents.sac import SAC, SACConfig
from rlamd.agents.td3 import TD3, TD3Config
from rlamd.precision import Precision
from rlamd.replay import ReplayBatch

sb3 = pytest.importorskip("stable_baselines3")
from stable_baselines3.common.logger import configure  # noqa: E402
from stable_baselines3.common.type_aliases import ReplayBufferSamples  # noqa: E402

OBS, ACT, B = 5, 2, 64
CPU = torch.device("cpu")


class _Spaces(gym.Env):
    """Only the spaces: the updates below never step an env."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(OBS, np.float32), {}

    def step(self, action):
        return np.zeros(OBS, np.float32), 0.0, False, False, {}


def _copy_linear(dst: torch.nn.Linear, src: torch.nn.Linear) -> None:
    dst.weight.copy_(src.weight)
    dst.bias.copy_(src.bias)


def _linears(seq) -> list[torch.nn.Linear]:
    return [m for m in seq if isinstance(m, torch.nn.Linear)]


@torch.no_grad()
def _copy_critics(theirs, ours: SAC | TD3) -> None:
    """SB3's critics and target critics into rlamd's twin critic (one ensemble)."""
    for src, dst in ((theirs.critic, ours.critic.q), (theirs.critic_target, ours.critic.target)):
        for i, qnet in enumerate(src.q_networks):
            for layer, lin in enumerate(_linears(qnet)):
                dst.net.weights[layer][i].copy_(lin.weight.T)
                dst.net.biases[layer][i, 0].copy_(lin.bias)


@torch.no_grad()
def _copy_sac(theirs, ours: SAC) -> None:
    for dst, src in zip(
        _linears(ours.actor.torso.net), _linears(theirs.actor.latent_pi), strict=True
    ):
        _copy_linear(dst, src)
    _copy_linear(ours.actor.mean, theirs.actor.mu)
    _copy_linear(ours.actor.log_std, theirs.actor.log_std)
    _copy_critics(theirs, ours)


@torch.no_grad()
def _copy_td3(theirs, ours: TD3) -> None:
    for src, dst in ((theirs.actor, ours.actor), (theirs.actor_target, ours.actor_target)):
        mine = [*_linears(dst.torso.net), dst.head]
        for d, s in zip(mine, _linears(src.mu), strict=True):
            _copy_linear(d, s)
    _copy_critics(theirs, ours)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference, relative to the mean size of ``b``."""
    return float((a - b).abs().max() / b.abs().mean())


def _critic_gap(theirs, ours, obs: torch.Tensor, act: torch.Tensor) -> float:
    with torch.no_grad():
        return _rel(ours.critic.q(obs, act), torch.cat(theirs.critic(obs, act), 1).T)


def _sac_gap(theirs, ours: SAC, obs: torch.Tensor, act: torch.Tensor) -> dict[str, float]:
    with torch.no_grad():
        mean_theirs, log_std_theirs, _ = theirs.actor.get_action_dist_params(obs)
        mean, log_std = ours.actor(obs)
    return {
        "q": _critic_gap(theirs, ours, obs, act),
        "mean": _rel(mean, mean_theirs),
        "log_std": _rel(log_std, log_std_theirs),
        "log_alpha": abs(float(theirs.log_ent_coef.detach()) - float(ours.log_alpha.detach())),
    }


def _td3_gap(theirs, ours: TD3, obs: torch.Tensor, act: torch.Tensor) -> dict[str, float]:
    with torch.no_grad():
        return {
            "q": _critic_gap(theirs, ours, obs, act),
            "actor": _rel(ours.actor(obs), theirs.actor(obs)),
            "actor_target": _rel(ours.actor_target(obs), theirs.actor_target(obs)),
        }


def _batches(updates: int, g: torch.Generator):
    """``updates`` random batches (SB3's layout), as a replay could hold them."""
    for step in range(updates):
        obs = torch.randn(B, OBS, generator=g) * 3
        nxt = obs + 0.1 * torch.randn(B, OBS, generator=g)
        act = torch.rand(B, ACT, generator=g) * 2 - 1
        rew = torch.randn(B, 1, generator=g) + 0.05 * step
        done = (torch.rand(B, 1, generator=g) < 0.05).float()
        yield ReplayBufferSamples(obs, act, nxt, done, rew)


def _ours(b: ReplayBufferSamples) -> ReplayBatch:
    ones = torch.ones(B)
    discounts = 0.99 * (1 - b.dones[:, 0])
    return ReplayBatch(
        b.observations,
        b.actions,
        b.rewards[:, 0],
        b.next_observations,
        discounts,
        ones,
        ones.long(),
    )


def _sb3(cls, **kw):
    torch.manual_seed(0)
    theirs = cls("MlpPolicy", _Spaces(), learning_starts=0, seed=0, device="cpu", **kw)
    theirs.set_logger(configure(None, []))
    batch: dict[str, ReplayBufferSamples] = {}
    theirs.replay_buffer.sample = lambda batch_size, env=None: batch["now"]
    return theirs, batch


def _probe(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(512, OBS, generator=g) * 3, torch.rand(512, ACT, generator=g) * 2 - 1


def _run(updates: int, squash_eps: float, mean_scale: float = 1.0) -> dict[str, float]:
    theirs, batch = _sb3(sb3.SAC)
    with torch.no_grad():
        theirs.actor.mu.weight.mul_(mean_scale)
        theirs.actor.mu.bias.add_(mean_scale - 1.0)
    ours = SAC(SACConfig(squash_eps=squash_eps), (OBS,), ACT, CPU, _fp32())
    _copy_sac(theirs, ours)
    g = torch.Generator().manual_seed(1)
    sb3_noise: list[torch.Tensor] = []
    our_noise: list[torch.Tensor] = []
    ours._noise = lambda shape, generator: our_noise.pop(0)
    with pytest.MonkeyPatch.context() as mp:
        # SB3 draws its reparameterised actions through Normal.rsample: hand it ours.
        mp.setattr(
            torch.distributions.Normal,
            "rsample",
            lambda d, shape=(): d.loc + d.scale * sb3_noise.pop(0),
        )
        for b in _batches(updates, g):
            n_pi, n_next = torch.randn(B, ACT, generator=g), torch.randn(B, ACT, generator=g)
            sb3_noise[:] = [n_pi, n_next]  # SB3: the actor's action first, then the target's
            our_noise[:] = [n_next, n_pi]  # rlamd: the target's first
            batch["now"] = b
            theirs.train(gradient_steps=1, batch_size=B)
            ours.update_on(_ours(b))
            assert not sb3_noise and not our_noise  # each side drew exactly its two
    return _sac_gap(theirs, ours, *_probe(g))


def _run_td3(updates: int) -> dict[str, float]:
    """TD3 through the learner's own schedule (``learn``: the actor every second update).
    rlamd's smoothing noise is predicted from a copy of its (CPU) learn generator."""
    theirs, batch = _sb3(sb3.TD3, policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5)
    ours = TD3(TD3Config(), (OBS,), ACT, CPU, _fp32())
    _copy_td3(theirs, ours)
    g = torch.Generator().manual_seed(1)
    drawn: list[torch.Tensor] = []

    def normal_(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, **kw) -> torch.Tensor:
        return t.copy_(mean + std * drawn.pop(0))  # SB3's smoothing noise: rlamd's draw

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "normal_", normal_)
        for b in _batches(updates, g):
            peek = torch.Generator().set_state(ours.learn_generator.get_state())
            drawn[:] = [torch.randn(B, ACT, generator=peek)]
            batch["now"] = b
            theirs.train(gradient_steps=1, batch_size=B)
            assert not drawn  # SB3 drew the smoothing noise once
            ours.learn(_OneBatch(_ours(b)), B)
    return _td3_gap(theirs, ours, *_probe(g))


class _OneBatch:
    """A replay that hands out one given batch (``learn`` samples it, writes priorities)."""

    def __init__(self, batch: ReplayBatch) -> None:
        self.batch = batch

    def sample(self, batch_size: int, beta: float) -> ReplayBatch:
        return self.batch

    def update_priorities(self, indices: torch.Tensor, td_abs: torch.Tensor) -> None:
        pass


def _fp32() -> Precision:
    return Precision("fp32", CPU, max_grad_norm=None, grad_clamp=None)


def test_sac_update_equals_sb3_to_float_rounding():
    gap = _run(updates=100, squash_eps=1e-6)
    assert gap["q"] < 1e-4 and gap["mean"] < 1e-4 and gap["log_std"] < 1e-4, gap
    assert gap["log_alpha"] < 1e-6, gap


def test_the_exact_squash_correction_is_the_one_difference_from_sb3():
    """The exact log-Jacobian gives slightly other actor gradients than SB3's (most where
    actions saturate: pre-squash means near 8 here), and Adam's normalised steps carry the
    difference on, so the policies part; with SB3's 1e-6 they stay together."""
    same = _run(updates=20, squash_eps=1e-6, mean_scale=8.0)
    exact = _run(updates=20, squash_eps=0.0, mean_scale=8.0)
    assert max(same["mean"], same["log_std"]) < 1e-4, same
    assert max(exact["mean"], exact["log_std"]) > 1e-2, exact


def test_td3_update_equals_sb3_to_float_rounding():
    gap = _run_td3(updates=100)
    assert max(gap.values()) < 1e-4, gap
