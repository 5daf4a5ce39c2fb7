"""Networks shared by the agents: Nature CNN, MLP, Q heads, PPO's actor-critic, and the
twin critics and actors of SAC and TD3.

Pixels arrive as ``uint8`` and are scaled to [0, 1] inside the first layer (docs/ARCHITECTURE.md,
rule 3), so the replay and rollout buffers never hold float frames.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn

from .normalize import RunningNorm

__all__ = [
    "MLP",
    "ActorCritic",
    "DeterministicActor",
    "EnsembleMLP",
    "GaussianActor",
    "NatureCNN",
    "QNetwork",
    "TwinQ",
    "fp32_head",
    "is_image",
    "make_torso",
    "scale_pixels",
]


def _input_dtype(obs: torch.Tensor) -> torch.dtype:
    kind = obs.device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else torch.float32


def scale_pixels(obs: torch.Tensor) -> torch.Tensor:
    """uint8 pixels -> [0, 1], straight into the autocast dtype when autocast is on
    (half the memory traffic of going through float32)."""
    if obs.dtype != torch.uint8:
        return obs.float()
    return obs.to(_input_dtype(obs)) * (1.0 / 255.0)


def fp32_head(layer: nn.Module, h: torch.Tensor) -> torch.Tensor:
    """Run an output layer in float32 even inside autocast.

    Log-probabilities, values and Q-values in bf16 carry ~1e-2 relative error: enough to
    turn PPO's probability ratios into noise against a 0.1 clip range, and to blur
    argmax decisions. The heads are tiny, so full precision costs nothing measurable.
    """
    if not torch.is_autocast_enabled(h.device.type):
        return layer(h.float())  # fp32 already: no region to leave (a per-call cost)
    with torch.autocast(h.device.type, enabled=False):
        return layer(h.float())


class NatureCNN(nn.Module):
    """Mnih et al. 2015 (https://doi.org/10.1038/nature14236): 3 conv layers + 512 units.

    uint8 input is scaled by 1/255 inside the first convolution (the weights are scaled,
    8K numbers, instead of the batch of pixels), and ReLUs run in place: on the CPU both
    save a full pass over the largest activations.
    """

    def __init__(
        self, in_channels: int = 4, features: int = 512, input_hw: tuple[int, int] = (84, 84)
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 8, stride=4)
        self.rest = nn.Sequential(
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(inplace=True),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.rest(self.conv1(torch.zeros(1, in_channels, *input_hw))).shape[1]
        self.fc = nn.Sequential(nn.Linear(flat, features), nn.ReLU(inplace=True))
        self.out_features = features

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.dtype == torch.uint8:
            c = self.conv1
            x = F.conv2d(obs.to(_input_dtype(obs)), c.weight * (1.0 / 255.0), c.bias, c.stride)
        else:
            x = self.conv1(obs.float())
        return self.fc(self.rest(x))


class MLP(nn.Module):
    """An MLP for vector observations (CartPole and friends), ReLU or tanh."""

    def __init__(
        self, in_features: int, hidden: tuple[int, ...] = (128, 128), activation: str = "relu"
    ) -> None:
        super().__init__()
        act = {"relu": nn.ReLU, "tanh": nn.Tanh}[activation]
        layers: list[nn.Module] = []
        last = in_features
        for h in hidden:
            layers += [nn.Linear(last, h), act()]
            last = h
        self.net = nn.Sequential(*layers)
        self.out_features = last

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.float().flatten(1))


def is_image(obs_shape: tuple[int, ...]) -> bool:
    return len(obs_shape) == 3


def make_torso(
    obs_shape: tuple[int, ...], hidden: tuple[int, ...] = (128, 128), activation: str = "relu"
) -> nn.Module:
    """Nature CNN for image stacks ``(C, H, W)``, an MLP for anything else."""
    if is_image(obs_shape):
        return NatureCNN(obs_shape[0], input_hw=(obs_shape[1], obs_shape[2]))
    return MLP(math.prod(obs_shape), hidden, activation)


class QNetwork(nn.Module):
    """Q(s, .) with an optional dueling head (Wang et al. 2016, https://arxiv.org/abs/1511.06581):

    .. math:: Q(s, a) = V(s) + A(s, a) - \\frac{1}{|A|} \\sum_{a'} A(s, a')
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_actions: int,
        *,
        dueling: bool = True,
        hidden: tuple[int, ...] = (128, 128),
    ) -> None:
        super().__init__()
        self.torso = make_torso(obs_shape, hidden)
        f = self.torso.out_features
        self.dueling = dueling
        if dueling:
            self.value = nn.Linear(f, 1)
            self.advantage = nn.Linear(f, num_actions)
        else:
            self.q = nn.Linear(f, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.torso(obs)
        if not self.dueling:
            return fp32_head(self.q, h)
        adv = fp32_head(self.advantage, h)
        return fp32_head(self.value, h) + adv - adv.mean(dim=1, keepdim=True)


def _orthogonal(layer: nn.Module, gain: float) -> None:
    if isinstance(layer, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)


class ActorCritic(nn.Module):
    """Policy logits (or Gaussian means) and a value, orthogonally initialised (Huang et al. 2022).

    Pixels: one shared Nature CNN under both heads (Mnih et al. 2016's A3C layout, as
    in CleanRL's ppo_atari). Vectors: separate tanh MLPs for the actor and the critic
    (CleanRL's ppo; Andrychowicz et al. 2021 found tanh and separate networks better on
    such tasks).

    Args:
        obs_shape: one observation's shape.
        num_actions: discrete actions (logits), or with ``continuous`` the length of the
            flat action vector (Gaussian means).
        hidden: MLP sizes for vector observations.
        continuous: a Gaussian policy with a learned state-independent ``log_std``
            (CleanRL ppo_continuous_action) instead of logits.
        log_std_init: the initial ``log_std`` of every action dimension.
        norm_obs: vector observations pass through a :class:`RunningNorm` (clipped to
            ``+-norm_clip``) first; its statistics are buffers of this module.
        norm_clip: the clip of the normalised observations.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_actions: int,
        hidden: tuple[int, ...] = (64, 64),
        *,
        continuous: bool = False,
        log_std_init: float = 0.0,
        norm_obs: bool = False,
        norm_clip: float = 10.0,
    ) -> None:
        super().__init__()
        self.torso = make_torso(obs_shape, hidden, activation="tanh")
        self.critic_torso = (
            None if is_image(obs_shape) else make_torso(obs_shape, hidden, activation="tanh")
        )
        for torso in (self.torso, self.critic_torso):
            if torso is not None:
                torso.apply(lambda m: _orthogonal(m, math.sqrt(2)))
        self.policy = nn.Linear(self.torso.out_features, num_actions)
        self.value = nn.Linear(self.torso.out_features, 1)
        _orthogonal(self.policy, 0.01)
        _orthogonal(self.value, 1.0)
        self.log_std = (
            nn.Parameter(torch.full((num_actions,), float(log_std_init))) if continuous else None
        )
        self.obs_norm = (
            RunningNorm(obs_shape, norm_clip) if norm_obs and not is_image(obs_shape) else None
        )

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.obs_norm is not None:
            obs = self.obs_norm(obs)
        h = self.torso(obs)
        hv = h if self.critic_torso is None else self.critic_torso(obs)
        return fp32_head(self.policy, h), fp32_head(self.value, hv).squeeze(-1)


class EnsembleMLP(nn.Module):
    """``k`` MLPs of one shape evaluated as one: each layer is a batched matrix product
    over a ``(k, in, out)`` weight, so twin critics cost the kernel launches of one.

    Each member is initialised as ``nn.Linear`` initialises a layer (uniform in
    ``+-1/sqrt(in)`` for weights and biases), independently.

    Args:
        members: ``k``.
        in_features: input width (the same input goes to every member, or one per member).
        hidden: hidden widths (ReLU after each).
        out_features: output width of each member.
    """

    def __init__(
        self, members: int, in_features: int, hidden: tuple[int, ...], out_features: int = 1
    ) -> None:
        super().__init__()
        sizes = [in_features, *hidden, out_features]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in itertools.pairwise(sizes):
            bound = 1.0 / math.sqrt(fan_in)
            w = torch.empty(members, fan_in, fan_out).uniform_(-bound, bound)
            b = torch.empty(members, 1, fan_out).uniform_(-bound, bound)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))
        self.members = members

    def forward(self, x: torch.Tensor, member: int | None = None) -> torch.Tensor:
        """``x``: ``(B, in)`` (shared) or ``(k, B, in)``; returns ``(k, B, out)``, the
        output layer in float32 even inside autocast (as :func:`fp32_head`). ``member``:
        that member alone, ``(1, B, out)``, at its share of the cost."""
        layers = zip(self.weights, self.biases, strict=True)
        if member is not None:
            if not 0 <= member < self.members:
                raise ValueError(f"member={member}; accepted: 0 to {self.members - 1} or None")
            layers = [(w[member : member + 1], b[member : member + 1]) for w, b in layers]
            x = x if x.dim() == 2 else x[member : member + 1]
        if x.dim() == 2:
            x = x.expand(self.members if member is None else 1, *x.shape)
        *hidden, (w_out, b_out) = layers
        for w, b in hidden:
            x = F.relu(torch.baddbmm(b.to(x.dtype), x, w.to(x.dtype)))
        if not torch.is_autocast_enabled(x.device.type):
            return _ensemble_out(x.float(), w_out, b_out)
        with torch.autocast(x.device.type, enabled=False):
            return _ensemble_out(x.float(), w_out, b_out)


def _ensemble_out(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x @ w + b`` per member. On the CPU a single output (a Q-value) is a product and
    a sum: a batched matrix-vector product runs several times slower there, forward and
    backward (``results/ensemble_head/``). GPUs keep the one kernel (fewer launches)."""
    if w.shape[-1] == 1 and x.device.type == "cpu":
        return (x * w.transpose(1, 2)).sum(-1, keepdim=True) + b
    return torch.baddbmm(b, x, w)


class TwinQ(nn.Module):
    """``k`` Q-functions ``Q_i(s, a)`` of vector observations and continuous actions
    (Fujimoto et al. 2018's clipped double Q takes the minimum of two), as one
    :class:`EnsembleMLP` on ``[s, a]``; the output stays float32 (see :func:`fp32_head`)."""

    def __init__(
        self, obs_size: int, action_size: int, hidden: tuple[int, ...], members: int = 2
    ) -> None:
        super().__init__()
        self.net = EnsembleMLP(members, obs_size + action_size, hidden, 1)

    def forward(
        self, obs: torch.Tensor, actions: torch.Tensor, member: int | None = None
    ) -> torch.Tensor:
        """``(k, B)`` Q-values; ``member``: that one alone, ``(B,)`` (TD3's actor needs Q_1)."""
        x = torch.cat([obs.float().flatten(1), actions.float()], dim=1)
        q = self.net(x, member).squeeze(-1).float()
        return q if member is None else q[0]


class _Bounds(nn.Module):
    """Maps ``[-1, 1]`` to an action box: ``a = scale * u + bias`` (buffers, so they move
    with the module and are saved with it)."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor) -> None:
        super().__init__()
        low, high = (
            torch.as_tensor(low, dtype=torch.float32),
            torch.as_tensor(high, dtype=torch.float32),
        )
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return u * self.scale + self.bias


class GaussianActor(nn.Module):
    """SAC's policy (Haarnoja et al. 2018, https://arxiv.org/abs/1801.01290): a Gaussian
    in pre-squash space, ``u ~ N(mu(s), sigma(s))``, squashed by ``tanh`` into the box.

    ``log sigma`` is clamped to ``[log_std_min, log_std_max]`` (SB3's -20 and 2).

    Args:
        obs_size, action_size: flat widths.
        hidden: MLP widths (ReLU).
        low, high: the action box (flat).
        squash_eps: the tanh's log-Jacobian is ``log(1 - tanh^2 u + squash_eps)`` (SB3's
            and CleanRL's 1e-6); 0 takes the exact, stable form (see :meth:`sample`).
    """

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden: tuple[int, ...],
        low: torch.Tensor,
        high: torch.Tensor,
        *,
        log_std_min: float = -20.0,
        log_std_max: float = 2.0,
        squash_eps: float = 1e-6,
    ) -> None:
        super().__init__()
        self.squash_eps = squash_eps
        self.torso = MLP(obs_size, hidden)
        self.mean = nn.Linear(self.torso.out_features, action_size)
        self.log_std = nn.Linear(self.torso.out_features, action_size)
        self.bounds = _Bounds(low, high)
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mu, log sigma)`` in float32."""
        h = self.torso(obs)
        log_std = fp32_head(self.log_std, h).clamp(self.log_std_min, self.log_std_max)
        return fp32_head(self.mean, h), log_std

    def sample(self, obs: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action for standard-normal ``noise`` and the log-density of
        its squashed value ``tanh(u)`` in ``[-1, 1]^d``:

        .. math:: \\log \\pi(a|s) = \\log N(u; \\mu, \\sigma)
                  - \\sum_j \\log\\big(1 - \\tanh^2 u_j\\big)

        with ``log(1 - tanh^2 u) = 2 (log 2 - u - softplus(-2u))``, exact and stable for
        large ``|u|``, when ``squash_eps`` is 0; otherwise ``log(1 - tanh^2 u + squash_eps)``,
        as SB3 and CleanRL take it (with their 1e-6 the correction stops growing past
        ``|u|`` of about 7, where the exact one keeps growing). The density is that of the
        unit box (as SB3 takes it), so a target entropy of ``-dim(A)`` means the same for
        any action bounds; the box's half-widths would only shift it by a constant.
        """
        mean, log_std = self(obs)
        u = mean + log_std.exp() * noise
        log_n = -0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)
        squashed = torch.tanh(u)
        if self.squash_eps > 0:
            log_det = torch.log(1 - squashed.pow(2) + self.squash_eps)
        else:
            log_det = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
        logp = (log_n - log_det).sum(-1)
        return self.bounds(squashed), logp

    def mean_action(self, obs: torch.Tensor) -> torch.Tensor:
        """``scale * tanh(mu) + bias``: the action evaluations take."""
        return self.bounds(torch.tanh(self(obs)[0]))


class DeterministicActor(nn.Module):
    """TD3's policy (Fujimoto et al. 2018, https://arxiv.org/abs/1802.09477):
    ``a = scale * tanh(f(s)) + bias``, an MLP squashed into the box."""

    def __init__(
        self,
        obs_size: int,
        action_size: int,
        hidden: tuple[int, ...],
        low: torch.Tensor,
        high: torch.Tensor,
    ) -> None:
        super().__init__()
        self.torso = MLP(obs_size, hidden)
        self.head = nn.Linear(self.torso.out_features, action_size)
        self.bounds = _Bounds(low, high)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.bounds(torch.tanh(fp32_head(self.head, self.torso(obs))))
