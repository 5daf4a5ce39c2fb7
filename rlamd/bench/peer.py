"""The peer interface: one object per library the bench compares rlamd with
(``peers/NAME.py``), saying whether it runs here and which :data:`MEASUREMENTS` it takes
part in, each handed rlamd's settings. Suites and races iterate over :func:`peers`; no other
module names one; :func:`register` adds one (``docs/ARCHITECTURE.md``, the bench)."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import tomllib

from rlamd.config.errors import closest
from rlamd.device import DEVICE_HELP

__all__ = ["BasePeer", "PPOSettings", "Peer", "PeerUnavailable", "Recipe", "Throughput", "peers"]

MEASUREMENTS = ("dqn", "ppo", "replay", "race", "contention")
PLAIN_DQN = MappingProxyType(dict(double_q=False, dueling=False, prioritized=False, n_step=1))
"""The ``DQNConfig`` fields of a plain DQN (one-step targets, no double Q or dueling, uniform
replay), which several peers run by default."""


class PeerUnavailable(RuntimeError):
    """A peer is not installed, cannot load, or takes no part in a measurement."""


def nearest(what: str, name: str, accepted: Sequence[str]) -> str:
    """``unknown WHAT 'NAME'; accepted: A, B[. Did you mean 'X'?]`` (``what`` may be empty)."""
    hint = f". Did you mean '{close}'?" if (close := closest(name, accepted)) else ""
    return f"unknown {what + ' ' if what else ''}'{name}'; accepted: {', '.join(accepted)}{hint}"


@dataclass(frozen=True)
class Recipe:
    """One peer's settings for one env family or task and one algorithm: ``steps`` is the
    run's length (its schedules are laid over it), ``kwargs`` its settings as the source
    writes them, ``tag`` what the race table says of them (``own defaults`` ...)."""

    n_envs: int
    steps: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    tag: str = "tuned recipe"

    def to_dict(self) -> dict[str, Any]:
        head = {"n_envs": self.n_envs, "steps": self.steps, **self.kwargs}
        return head | {"source": self.source, "tag": self.tag}


@cache
def load_toml(package: str, name: str) -> dict[str, Any]:
    """The bench's data file ``NAME.toml`` in ``package`` (shipped as package data)."""
    return tomllib.loads((resources.files(package) / f"{name}.toml").read_text("utf-8"))


@cache
def load_recipes(module: str) -> dict[tuple[str, str], Recipe]:
    """``NAME.toml`` beside ``module`` (none: {}): ``[ENV.ALGO]`` (``atari``: every game) of
    ``n_envs`` (or ``n_envs_per_core``), ``steps``, ``source``, ``tag`` and ``kwargs``."""
    try:
        doc = load_toml(*module.rsplit(".", 1))
    except (FileNotFoundError, ModuleNotFoundError, TypeError):  # no file, or no package
        return {}
    out = {}
    for env, algos in doc.items():
        for algo, r in algos.items():
            n = r.get("n_envs") or r["n_envs_per_core"] * (os.cpu_count() or 1)
            out[env, algo] = Recipe(n, r["steps"], r.get("kwargs", {}), r["source"], r["tag"])
    return out


@dataclass(frozen=True)
class PPOSettings:
    """What rlamd's PPO throughput runs with, handed to every peer alike: ``family`` is
    ``atari`` (Breakout, the Nature CNN) or ``classic`` (CartPole, 64x64 tanh MLPs)."""

    family: str
    gym_id: str
    num_envs: int
    num_steps: int
    epochs: int
    minibatches: int
    lr: float
    clip: float
    ent_coef: float
    gamma: float = 0.99
    gae_lambda: float = 0.95
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5

    @property
    def per_rollout(self) -> int:
        return self.num_envs * self.num_steps


@dataclass
class Throughput:
    """One peer's built contender: ``run()`` does some work and returns its env steps
    (``per="rate"``, timed by the caller) or the rate it measured itself (``"self"``)."""

    label: str
    run: Callable[[], float]
    close: Callable[[], None]
    meta: dict[str, Any] = field(default_factory=dict)
    per: str = "rate"


@runtime_checkable
class Peer(Protocol):
    """What the bench asks of a peer (:class:`BasePeer` supplies the refusals): ``name``
    keys figures, ``--contenders`` and ``--peer-python``; ``unavailable()`` says why it cannot
    run here, or None. ``dqn_side``: a :class:`rlamd.bench.dqn.Side` (Breakout, 1 env, replay
    filled with ``warm`` steps, ``iters`` units a call); ``dqn_algorithm``: the ``DQNConfig``
    fields that make rlamd run its DQN; ``ppo``: its PPO with ``settings``, built and warmed
    up; ``replay``: a filled prioritized sampler's loop (``iters`` x draw and write);
    ``race_skip``: why it cannot race, or None; ``race_command``: argv writing
    ``folder/evals.csv``, and its settings with ``source`` and ``tag``; ``race_train``: in
    that child, calling ``evals``; ``contention``: (iterate() -> env steps, close) on Breakout
    in this process."""

    name: str
    label: str
    colour: str
    measurements: frozenset[str]
    dqn_algorithm: Mapping[str, Any]

    def unavailable(self) -> str | None: ...
    def dqn_side(self, batch: int, device: Any, warm: int, iters: int) -> Any: ...
    def ppo(self, settings: PPOSettings, device: Any, iters: int) -> Throughput: ...
    def replay(self, capacity: int, batch: int, iters: int, alpha: float, beta: float) -> Any: ...
    def race_skip(self, env: str, algo: str) -> str | None: ...
    def race_command(self, proto: Any, algo: str, seed: int, folder: Path) -> tuple: ...
    def race_train(self, args: Any, stop: Any, evals: Any) -> None: ...
    def contention(self, algo: str, num_envs: int, warm: int) -> tuple[Callable, Callable]: ...


def _refusal(what: str) -> Callable[..., Any]:
    def refuse(self: BasePeer, *args: Any) -> Any:
        raise PeerUnavailable(f"{self.label} takes no part in the {what} measurement")

    return refuse


class BasePeer:
    """A peer's defaults: refusals, and races from its :attr:`recipes` in a race child
    process. ``requires``: (module it imports, how to install it); ``own_python``: it runs
    only under its own interpreter (:func:`peer_python`)."""

    name = label = "peer"
    colour = "#7f8c8d"
    measurements: frozenset[str] = frozenset()
    dqn_algorithm: Mapping[str, Any] = MappingProxyType({})  # rlamd's own
    requires, own_python = ("", ""), False
    no_recipe = "no recipe for {env} / {algo}"
    dqn_side, ppo, replay = _refusal("dqn"), _refusal("ppo"), _refusal("replay")
    race_train, contention = _refusal("race"), _refusal("contention")

    def unavailable(self) -> str | None:
        module, how = self.requires
        try:
            if module:
                require(module, how, peer_python(self.name) if self.own_python else None)
        except PeerUnavailable as exc:
            return str(exc)
        return None

    @property
    def recipes(self) -> dict[tuple[str, str], Recipe]:
        """Its race recipes: the TOML file beside its module (:func:`load_recipes`)."""
        return load_recipes(type(self).__module__)

    def recipe(self, env: str, algo: str) -> Recipe:
        """Its recipe for rlamd's ``env`` (every Atari game: ``atari``) and ``algo``;
        PeerUnavailable saying there is none."""
        from rlamd.envs import parse_env_id

        parsed = parse_env_id(env)
        found = self.recipes.get(("atari" if parsed.family == "atari" else parsed.game, algo))
        if found is None:
            raise PeerUnavailable(self.no_recipe.format(env=env, algo=algo))
        return found

    def race_skip(self, env: str, algo: str) -> str | None:
        if "race" not in self.measurements:
            return f"{self.label} does not race"
        try:
            if self.recipes:
                self.recipe(env, algo)
        except PeerUnavailable as exc:
            return str(exc)
        return self.unavailable()

    def race_command(self, proto: Any, algo: str, seed: int, folder: Path) -> tuple[list, dict]:
        rec = self.recipe(proto.env, algo)
        cmd = [sys.executable, "-m", "rlamd.bench.race", self.name, *proto.child_args(algo)]
        cmd += ["--seed", str(seed), "--dir", str(folder)]
        if self.own_python:
            cmd += ["--peer-python", f"{self.name}={peer_python(self.name)}"]
        return cmd, {**rec.to_dict(), "steps": proto.steps or rec.steps}


_PEERS: dict[str, Peer] = {}
_PYTHON: dict[str, str] = {}


def register(peer: Peer) -> Peer:
    """Add ``peer`` (replacing one of the same name); returns it."""
    if not isinstance(peer, Peer):
        raise TypeError(f"{peer!r} does not satisfy rlamd.bench.peer.Peer")
    _PEERS[peer.name] = peer
    return peer


def peers(measurement: str | None = None) -> list[Peer]:
    """The registered peers (in registration order), those taking part in ``measurement``."""
    if measurement is not None and measurement not in MEASUREMENTS:
        raise ValueError(nearest("measurement", measurement, MEASUREMENTS))
    return [p for p in _PEERS.values() if measurement is None or measurement in p.measurements]


def get(name: str) -> Peer:
    """The peer called ``name``; ValueError naming the nearest one otherwise."""
    if name not in _PEERS:
        raise ValueError(nearest("peer", name, list(_PEERS)))
    return _PEERS[name]


def set_python(spec: str) -> None:
    """``NAME=PATH`` from ``--peer-python``: run peer NAME's processes with that interpreter."""
    name, sep, path = spec.partition("=")
    if not sep or not path:
        accepted = "accepted: NAME=PATH (e.g. NAME=/venv/bin/python)"
        raise ValueError(f"--peer-python {spec!r}; {accepted}")
    get(name)
    if shutil.which(path) is None:
        raise ValueError(f"--peer-python {spec!r}: {path} is not an executable")
    _PYTHON[name] = path


def peer_arguments(p: Any, skip: str, out: str) -> None:
    """Suites' and races' shared flags: --device, --out, --no-peers, --peer-python."""
    p.add_argument("--device", default="auto", help=DEVICE_HELP)
    p.add_argument("--out", default=out, help=f"folder for results.json and charts ({out})")
    p.add_argument("--no-peers", action="store_true", help=skip)
    text = "run peer NAME's processes under this interpreter (default: .venv-peers/NAME made by "
    text += "`bash scripts/setup.sh --bench-peers`, else this one)"
    p.add_argument("--peer-python", action="append", default=[], metavar="NAME=PATH", help=text)


def use_peer_python(args: Any, p: Any) -> None:
    """Apply ``--peer-python``; a bad one exits through parser ``p`` saying what is accepted."""
    try:
        for spec in args.peer_python:
            set_python(spec)
    except ValueError as exc:
        p.error(str(exc))


def peer_python(name: str) -> str:
    """Peer ``name``'s interpreter: ``--peer-python``, else ``.venv-peers/NAME``, else ours."""
    made = Path(__file__).resolve().parents[2] / ".venv-peers" / name / "bin" / "python"
    return _PYTHON.get(name) or (str(made) if made.exists() else sys.executable)


def require(module: str, extra: str, python: str | None = None) -> Any:
    """Import ``module`` here (or check ``python`` can); PeerUnavailable saying ``extra``."""
    if python is not None and python != sys.executable:
        probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
            raise PeerUnavailable(f"{module} not importable by {python} ({last}); {extra}")
        return None
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a broken install raising anything
        why = f"{module} not importable ({exc.__class__.__name__}: {exc}); {extra}"
        raise PeerUnavailable(why) from exc
