"""TorchRL as a peer: prioritized replay (``PrioritizedSampler``, C++ trees) and DQN
(``DQNLoss``). torchrl 0.14.1's prebuilt extension does not load with torch 2.13, so the
sources its wheel ships (``csrc/``) are built once into ``~/.cache/rlamd`` (``RLAMD_CACHE``)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from rlamd.bench.common import repeat
from rlamd.bench.peer import PLAIN_DQN, BasePeer, PeerUnavailable, require

__all__ = ["PEER"]


def _build_extension(torchrl_dir: Path) -> Any:
    from torch.utils.cpp_extension import load

    csrc = torchrl_dir / "csrc"
    sources = [csrc / "pybind.cpp", csrc / "utils.cpp"]
    if not all(s.exists() for s in sources):
        raise PeerUnavailable(f"torchrl's extension does not load and {csrc} has no sources")
    cache = Path(os.environ.get("RLAMD_CACHE", Path.home() / ".cache" / "rlamd")) / "torchrl_ext"
    cache.mkdir(parents=True, exist_ok=True)
    try:
        sources, inc = [str(s) for s in sources], [str(csrc)]
        return load("_torchrl", sources, extra_include_paths=inc, build_directory=str(cache))
    except Exception as exc:
        raise PeerUnavailable(f"building torchrl's segment tree from {csrc} failed: {exc}") from exc


def _breakout() -> Any:
    """Breakout as TorchRL steps a gymnasium env (``GymWrapper``): gymnasium's Atari
    preprocessing (4 skipped frames, 84x84 grey, up to 30 no-ops) and 4 stacked frames."""
    import ale_py
    import gymnasium as gym
    from torchrl.envs import GymWrapper

    gym.register_envs(ale_py)
    env = gym.make("BreakoutNoFrameskip-v4")
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, noop_max=30)
    return GymWrapper(gym.wrappers.FrameStackObservation(env, 4), device="cpu")


def _nature_q(actions: int) -> Any:
    """The Nature CNN from ``ConvNet`` and ``MLP`` as TorchRL's DQN example builds it, on
    uint8 frames scaled by 1/255."""
    from torch import nn
    from torchrl.modules import MLP, ConvNet

    class Pixels(nn.Module):
        def forward(self, x):
            return x.float() / 255.0

    conv = ConvNet(num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1])
    head = MLP(in_features=3136, out_features=actions, num_cells=[512])
    return nn.Sequential(Pixels(), conv, head)


class TorchRL(BasePeer):
    name, label, colour = "torchrl", "TorchRL", "#8e44ad"
    measurements = frozenset({"replay", "dqn"})
    requires = ("torchrl", "`pip install torchrl` to compare against it")

    dqn_algorithm = PLAIN_DQN

    def dqn_side(self, batch: int, device: Any, warm: int, iters: int) -> Any:
        """TorchRL's DQN with rlamd's settings: ``DQNLoss`` (Huber, target copied every 250
        updates by ``HardUpdate``), Adam lr 1e-4, a ``TensorDictReplayBuffer`` on a 50k
        ``LazyTensorStorage``, epsilon 0.05; filled with ``warm`` random steps."""
        import torch
        from tensordict.nn import TensorDictSequential
        from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
        from torchrl.modules import EGreedyModule, QValueActor
        from torchrl.objectives import DQNLoss, HardUpdate

        from rlamd.bench.dqn import Side

        env = _breakout()
        spec = env.action_spec
        actor = QValueActor(_nature_q(spec.space.n), in_keys=["observation"], spec=spec).to(device)
        explore = TensorDictSequential(actor, EGreedyModule(spec, eps_init=0.05, eps_end=0.05))
        loss = DQNLoss(actor, loss_function="smooth_l1", delay_value=True, action_space=spec)
        loss.make_value_estimator(gamma=0.99)
        target = HardUpdate(loss, value_network_update_interval=250)
        optimizer = torch.optim.Adam(loss.parameters(), lr=1e-4)
        storage = LazyTensorStorage(50_000, device=device)
        replay = TensorDictReplayBuffer(storage=storage, batch_size=batch)
        state = {"td": env.reset()}

        def env_step(policy) -> None:
            done, state["td"] = env.step_and_maybe_reset(policy(state["td"]))
            replay.add(done)

        def learn_one() -> None:
            value = loss(replay.sample().to(device))["loss"]
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
            target.step()

        for _ in range(warm):
            env_step(env.rand_action)

        def act(td):
            with torch.no_grad():
                return explore(td.to(device)).cpu()

        def iteration() -> None:
            env_step(act)
            learn_one()

        iterate, learn = repeat(iteration, iters), repeat(learn_one, iters)
        return Side("TorchRL DQN (fp32)", iterate, learn, learn_one, env.close)

    def replay(self, capacity: int, batch: int, iters: int, alpha: float, beta: float):
        """Its ``PrioritizedSampler`` (C++ trees): ``iters`` x (draw ``batch``, write them)."""
        import torch
        from torchrl.data import LazyTensorStorage

        torchrl = require(*self.requires)
        prio = importlib.import_module("torchrl.data.replay_buffers.samplers.prioritized")
        if prio.SumSegmentTreeFp32 is None:
            ext = _build_extension(Path(torchrl.__file__).parent)
            for name in (f"{k}SegmentTreeFp{bits}" for k in ("Sum", "Min") for bits in (32, 64)):
                setattr(prio, name, getattr(ext, name))
        sampler = prio.PrioritizedSampler(capacity, alpha=alpha, beta=beta)
        storage = LazyTensorStorage(capacity)
        storage.set(torch.arange(capacity), torch.zeros(capacity, 1))
        sampler.update_priority(torch.arange(capacity), torch.rand(capacity) * 5 + 1e-3)

        def step() -> None:
            idx, _info = sampler.sample(storage, batch)
            sampler.update_priority(idx, torch.rand(batch))

        return repeat(step, iters)


PEER = TorchRL()
