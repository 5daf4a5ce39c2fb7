"""An algorithm is a plugin (docs/ARCHITECTURE.md, Algorithms): one defined here, outside
the library, registers itself and trains, saves, resumes and evaluates CartPole through
the commands, with no change to any library file.

``tiny`` is a small REINFORCE learner: a softmax policy over discrete actions, one
policy-gradient step per rollout of ``tiny.x`` vector steps, on the rewards-to-go of that
rollout. It owns everything an algorithm owns: its config section (:class:`TinyConfig`,
``cfg.tiny``, ``[tiny]``, ``--set tiny.x=...``), its preset for classic envs, its check,
its agent, its loop and its evaluation policy. The commands load it from
``RLAMD_PLUGINS=tests.test_plugin_algorithm:register_tiny``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from rlamd.algos import ALGORITHMS, PLUGINS_VARIABLE, register, unregister
from rlamd.algos.base import build_learner
from rlamd.config.errors import bad_setting

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = "tests.test_plugin_algorithm:register_tiny"


@dataclass(frozen=True)
class TinyConfig:
    """REINFORCE settings."""

    x: int = 8
    """Vector steps per rollout (one update each)."""
    lr: float = 0.01
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount of the rewards-to-go."""
    hidden: tuple[int, ...] = (16,)
    """MLP sizes."""
    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""
    grad_clamp: float = 5.0
    """Clamp of every gradient entry."""

    def __post_init__(self) -> None:
        if self.x < 1:
            raise ValueError(f"x={self.x}; accepted: an integer >= 1")


class TinyAgent:
    """A softmax policy and its REINFORCE step (the seams of ``rlamd.algos.base.Agent``)."""

    def __init__(self, cfg, obs_shape, num_actions, device, precision, **_: Any) -> None:
        self.cfg, self.device, self.precision = cfg, device, precision
        sizes = [int(torch.tensor(obs_shape).prod()), *cfg.hidden]
        layers: list[torch.nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [torch.nn.Linear(a, b), torch.nn.Tanh()]
        self.policy_net = torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], num_actions))
        self.optimizer = torch.optim.Adam(self.policy_net.parameters(), lr=cfg.lr)
        self.updates, self.sync, self._loss = 0, None, 0.0
        self.generator = torch.Generator().manual_seed(1)

    def act(self, obs: torch.Tensor, greedy: bool = False) -> torch.Tensor:
        with torch.no_grad():
            logits = self.policy_net(obs.float().flatten(1))
        if greedy:
            return logits.argmax(1)
        return torch.multinomial(logits.softmax(1), 1, generator=self.generator).squeeze(1)

    def learn(self, obs, actions, rewards, dones) -> None:
        """``obs`` (T, E, ...), the rest (T, E): one step on ``-log pi(a|s) * G``."""
        returns, running = torch.zeros_like(rewards), torch.zeros_like(rewards[0])
        for t in reversed(range(len(rewards))):
            running = rewards[t] + self.cfg.gamma * running * (1.0 - dones[t])
            returns[t] = running
        logits = self.policy_net(obs.float().flatten(2))
        logp = logits.log_softmax(-1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        loss = -(logp * (returns - returns.mean())).mean()
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.policy_net.parameters(), self.cfg.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        self._loss = float(loss.detach())

    def read_metrics(self) -> dict[str, float]:
        return {"losses/policy": self._loss}

    def state_dict(self) -> dict:
        return {
            "net": self.policy_net.state_dict(),
            "optim": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.policy_net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optim"])
        self.updates = int(state["updates"])


class TinyLoop:
    """Collect ``tiny.x`` vector steps, then learn from them (``rlamd.algos.base.Loop``)."""

    learning_starts = 0

    def __init__(self, cfg, collector, agent: TinyAgent, start_step: int) -> None:
        self.cfg, self.collector, self.agent, self.step = cfg.tiny, collector, agent, start_step

    def iterate(self) -> list:
        obs, acts, rews, dones, steps = [], [], [], [], []
        for _ in range(self.cfg.x):
            before, _, s = self.collector.step(self.agent.act)
            obs.append(torch.as_tensor(before))
            acts.append(torch.as_tensor(s.actions, dtype=torch.int64))
            rews.append(torch.as_tensor(s.reward, dtype=torch.float32))
            dones.append(torch.as_tensor(s.done, dtype=torch.float32))
            steps.append(s)
            self.step += self.collector.num_envs
        self.agent.learn(*(torch.stack(v) for v in (obs, acts, rews, dones)))
        return steps

    def describe(self) -> str:
        return f"REINFORCE rollouts of {self.cfg.x} steps"

    def memory_bytes(self) -> float:
        return 0.0

    def learning_sps(self, env_sps: float) -> float:
        return env_sps

    def metrics(self) -> dict[str, float]:
        return self.agent.read_metrics()

    def state_dict(self, include_replay: bool) -> dict:
        return {"tiny_step": self.step}

    def load_state_dict(self, state: dict) -> list[str]:
        return [f"tiny loop at step {state['tiny_step']}"]


def rollout_fits_the_run(cfg) -> None:
    """tiny: the run holds at least one rollout (it learns once per rollout)."""
    if cfg.train.steps < cfg.tiny.x * cfg.train.num_envs:
        raise bad_setting(
            "tiny",
            "x",
            cfg.tiny.x,
            f"an integer <= {cfg.train.steps // cfg.train.num_envs}",
            why="a rollout longer than the run",
        )


class TinyAlgorithm:
    """``--algo tiny``."""

    name = "tiny"
    config = TinyConfig
    takes: ClassVar[frozenset[str]] = frozenset({"discrete"})
    on_ray: ClassVar[bool] = False
    moved_keys: ClassVar[dict[str, str]] = {}
    fixed_on_resume: ClassVar[dict[str, str]] = {"tiny.hidden": "network"}
    presets: ClassVar[dict] = {
        "classic": {
            "train": {"steps": 512, "num_envs": 2, "eval_every": 0, "log_every": 128},
            "tiny": {"x": 16},
        }
    }

    def check(self, cfg) -> None:
        rollout_fits_the_run(cfg)

    def build_agent(self, cfg, device, env, log=None) -> TinyAgent:
        return build_learner(TinyAgent, cfg.tiny, cfg, device, env)

    def policy(self, agent, cfg, epsilon=None, deterministic=None):
        return lambda obs: agent.act(obs, greedy=deterministic is not False)

    def local_loop(self, cfg, collector, agent, start_step, log) -> TinyLoop:
        return TinyLoop(cfg, collector, agent, start_step)

    def rollout_source(self, cfg, collector, agent, index):
        raise NotImplementedError("tiny does not run on Ray")

    def learner_part(self, cfg, agent, env, rank, world, streams, log):
        raise NotImplementedError("tiny does not run on Ray")


TINY = TinyAlgorithm()


def register_tiny() -> None:
    """The plugin's entry: ``RLAMD_PLUGINS=tests.test_plugin_algorithm:register_tiny``."""
    register(TINY)


def register_a_new_tiny() -> None:
    """An entry that builds its algorithm anew on each call."""
    register(TinyAlgorithm())


# ---------------------------------------------------------------------- the commands
def _command(module: str, *args: str, plugin: str | None = PLUGIN) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PLUGINS_VARIABLE}
    if plugin is not None:
        env[PLUGINS_VARIABLE] = plugin
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _agent(run: Path) -> dict:
    return torch.load(run / "checkpoint.pt", weights_only=True)


def _train(*args: str, plugin: str | None = PLUGIN) -> subprocess.CompletedProcess:
    return _command("rlamd.train", *args, plugin=plugin)


def _check_new_run(run: Path, out: str) -> dict:
    first = _agent(run)
    # the preset (512 steps, 2 envs) and --set tiny.x=32: 512 / (2 * 32) = 8 updates
    assert first["step"] == 512 and first["agent"]["updates"] == 8
    assert first["config"]["tiny"]["x"] == 32 and first["config"]["train"]["algo"] == "tiny"
    assert "[tiny]\nx = 32\n" in (run / "config.toml").read_text()
    assert "REINFORCE rollouts of 32 steps" in out
    return first


def _check_resumed(run: Path, first: dict, out: str) -> None:
    assert "tiny loop at step 512" in out
    second = _agent(run)
    assert second["step"] == 1024 and second["agent"]["updates"] == 16
    before, after = first["agent"]["net"], second["agent"]["net"]
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it went on learning


COMMON = ("--device", "cpu", "--no-tensorboard")
NEW = ("cartpole", "--algo", "tiny", "--run-name", "t", "--set", "tiny.x=32")


def test_a_plugin_algorithm_trains_from_the_command_line_and_resumes(tmp_path, capsys):
    """A new run through ``python -m rlamd.train`` (the plugin loaded from the variable);
    resumed and evaluated in this process, where the plugin is registered the same way."""
    logdir = ("--logdir", str(tmp_path))
    new = _train(*NEW, *COMMON, *logdir)
    assert new.returncode == 0, new.stderr
    run = tmp_path / "t"
    first = _check_new_run(run, new.stdout)

    from rlamd.algos import load_plugins
    from rlamd.evaluate import main as evaluate
    from rlamd.train import main as train

    load_plugins(PLUGIN, installed=False)
    try:
        assert train(["--resume", str(run), "--steps", "1024", *COMMON, *logdir]) == 0
        _check_resumed(run, first, capsys.readouterr().out)
        assert train(["--resume", str(run), "--steps", "2048", "--set", "tiny.hidden=8"]) == 2
        assert "tiny.hidden=(8,) (the checkpoint's network was built with (16,))" in (
            capsys.readouterr().err
        )
        assert evaluate([str(run), "--episodes", "2", "--json", "--device", "cpu"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["episodes"] == 2 and result["mean"] > 0  # CartPole scores every step
    finally:
        unregister("tiny")


@pytest.mark.slow
def test_a_plugin_algorithm_trains_resumes_and_evaluates_from_the_commands(tmp_path):
    """All three through ``python -m``: ``rlamd.train``, ``--resume``, ``rlamd.evaluate``."""
    logdir = ("--logdir", str(tmp_path))
    new = _train(*NEW, *COMMON, *logdir)
    assert new.returncode == 0, new.stderr
    run = tmp_path / "t"
    first = _check_new_run(run, new.stdout)
    more = _train("--resume", str(run), "--steps", "1024", *COMMON, *logdir)
    assert more.returncode == 0, more.stderr
    _check_resumed(run, first, more.stdout)
    scored = _command("rlamd.evaluate", str(run), "--episodes", "2", "--json", "--device", "cpu")
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert result["episodes"] == 2 and result["mean"] > 0


def test_without_the_plugin_the_commands_say_how_to_load_it(tmp_path, capsys):
    from rlamd.train import main

    cfg = tmp_path / "c.toml"
    cfg.write_text('[train]\nenv = "cartpole"\nalgo = "tiny"\n')
    assert main(["--config", str(cfg), "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: train.algo='tiny'; accepted: dqn, ppo, sac, td3, or one a plugin")
    assert f"{PLUGINS_VARIABLE}=MODULE" in err and err.count("\n") == 1


def test_a_plugin_that_does_not_load_is_said_in_one_line(tmp_path, monkeypatch, capsys):
    import rlamd.algos
    from rlamd.train import main

    monkeypatch.setattr(rlamd.algos, "_plugin_errors", [])
    rlamd.algos.load_plugins("tests.no_such_plugin, tests.test_plugin_algorithm:nothing")
    assert main(["cartpole", "--logdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {PLUGINS_VARIABLE}=tests.no_such_plugin did not load (ModuleNotFoundError: "
        "No module named 'tests.no_such_plugin'); accepted: importable modules that call "
        "rlamd.algos.register, as MODULE or MODULE:FUNCTION\n"
    )
    assert len(rlamd.algos._plugin_errors) == 2  # the missing function too
    assert "AttributeError" in rlamd.algos._plugin_errors[1]
    assert not (tmp_path / "runs").exists() and not any(tmp_path.iterdir())


# ---------------------------------------------------------------------- in process
@pytest.fixture
def tiny():
    register_tiny()
    try:
        yield TINY
    finally:
        unregister("tiny")


def test_registering_gives_the_run_a_section_of_the_algorithms_own(tiny, tmp_path):
    from rlamd.config.flags import settings_epilog
    from rlamd.config.layers import resolve
    from rlamd.config.sections import SECTION_TYPES, RunConfig

    assert ALGORITHMS["tiny"] is tiny and SECTION_TYPES["tiny"] is TinyConfig
    assert list(SECTION_TYPES)[-3:] == ["atari", "env", "ray"]  # algorithms before those
    assert RunConfig().tiny == TinyConfig()
    cfg = resolve({"train": {"env": "cartpole", "algo": "tiny"}}, sets=["tiny.x=4", "x=5"])
    assert cfg.agent == cfg.tiny == TinyConfig(x=5)  # a bare key only tiny has is tiny's
    assert "tiny.x = 8: Vector steps per rollout" in settings_epilog()
    assert "classic preset for tiny: train.steps=512" in settings_epilog()
    toml = tmp_path / "t.toml"
    toml.write_text('[train]\nenv = "cartpole"\nalgo = "tiny"\n[tiny]\nhidden = [8, 8]\n')
    assert resolve({}, config_file=str(toml)).tiny.hidden == (8, 8)
    assert RunConfig.from_dict(cfg.to_dict()) == cfg


def test_the_run_wide_rules_and_the_algorithms_check_apply_to_a_plugin(tiny):
    from rlamd.config.errors import ConfigError
    from rlamd.config.layers import resolve

    given = {"train": {"env": "cartpole", "algo": "tiny"}}
    with pytest.raises(ConfigError, match=r"^tiny\.hidden=\(8, 0\); accepted: layer sizes >= 1"):
        resolve(given, sets=["tiny.hidden=8,0"])  # rlamd.config.checks.hidden_sizes
    with pytest.raises(ConfigError, match=r"^tiny\.max_grad_norm=0\.0; accepted: a number > 0$"):
        resolve(given, sets=["tiny.max_grad_norm=0"])  # positive_clips
    with pytest.raises(ConfigError, match=r"^tiny\.x=0; accepted: an integer >= 1$"):
        resolve(given, sets=["tiny.x=0"])  # its own __post_init__
    with pytest.raises(ConfigError, match=r"^tiny\.x=300 \(a rollout longer than the run\)"):
        resolve(given, sets=["tiny.x=300"])  # its check: 512 steps / 2 envs
    with pytest.raises(ConfigError, match=r"Did you mean tiny\.x\?"):
        resolve(given, sets=["tiny.xx=1"])
    assert resolve(given, sets=["gamma=0.9"]).tiny.gamma == 0.9  # the run's algorithm's
    with pytest.raises(
        ConfigError,
        match=r"accepted: dqn\.learning_starts or sac\.learning_starts or td3\.learning_starts$",
    ):
        resolve(given, sets=["learning_starts=9"])  # tiny has none: say which


def test_a_name_is_registered_once(tiny):
    register_tiny()  # the same object again: nothing happens
    other = TinyAlgorithm()
    with pytest.raises(ValueError, match="algorithm 'tiny' is registered already"):
        register(other)
    for name in ("train", "ray", "algorithms", "agent"):
        clash = TinyAlgorithm()
        clash.name = name
        with pytest.raises(ValueError, match=repr(name)):
            register(clash)
        assert name not in ALGORITHMS


def test_a_plugin_named_by_the_variable_and_its_entry_point_loads_once(monkeypatch):
    from importlib.metadata import EntryPoint

    import rlamd.algos

    spec = "tests.test_plugin_algorithm:register_a_new_tiny"
    ep = EntryPoint(name="tiny", value=spec.replace(":", " : "), group=rlamd.algos.ENTRY_POINTS)
    monkeypatch.setattr(rlamd.algos, "entry_points", lambda group: [ep])
    monkeypatch.setattr(rlamd.algos, "_plugin_errors", [])
    try:
        rlamd.algos.load_plugins(f" {spec} ")
        assert rlamd.algos._plugin_errors == [] and "tiny" in ALGORITHMS
    finally:
        unregister("tiny")


def test_unregistering_takes_the_section_away():
    from rlamd.config.sections import SECTION_TYPES, RunConfig

    register_tiny()
    unregister("tiny")
    assert "tiny" not in ALGORITHMS and "tiny" not in SECTION_TYPES
    with pytest.raises(AttributeError, match="RunConfig has no section 'tiny'"):
        _ = RunConfig().tiny


def test_refusals_list_the_algorithms_that_take_what_the_env_has(tiny, monkeypatch, tmp_path):
    """The accepted lists of the algorithms' refusals come from what each registered one
    says it takes, so a plugin shows up in them and no algorithm names another."""
    from rlamd.algos import which
    from rlamd.config.errors import ConfigError
    from rlamd.config.layers import resolve

    assert which("discrete") == "dqn, ppo or tiny"
    assert which("box") == "ppo, sac or td3"
    assert which("box", "image") == "ppo"
    assert which(on_ray=True) == "dqn or ppo"
    monkeypatch.setattr(TINY, "takes", frozenset({"discrete", "box"}))
    monkeypatch.setattr(TINY, "on_ray", True)
    assert which("box") == "ppo, sac, td3 or tiny" and which(on_ray=True) == "dqn, ppo or tiny"
    given = {"train": {"env": "Pendulum-v1", "algo": "dqn"}}
    with pytest.raises(ConfigError, match=r"accepted: ppo, sac, td3 or tiny \(their policies"):
        resolve(given)
    given = {"train": {"env": "cartpole", "algo": "sac"}}
    with pytest.raises(ConfigError, match=r"accepted: dqn, ppo or tiny for such envs"):
        resolve(given)
    # images too: only the algorithms that take both are listed (tiny takes no images)
    with pytest.raises(ConfigError, match=r"accepted: dqn or ppo for such envs$"):
        resolve({"train": {"env": "breakout", "algo": "sac"}})
    module = tmp_path / "image_box_env.py"
    module.write_text(IMAGE_BOX_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"accepted: ppo \(their policies take Box actions and"):
        resolve({"train": {"env": "image_box_env:make_env", "algo": "dqn"}})


IMAGE_BOX_ENV = """
import gymnasium as gym
import numpy as np


class ImageBox(gym.Env):
    observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def make_env(**kwargs):
    return ImageBox()
"""


def test_a_plugin_cannot_take_an_old_place_that_another_section_reads(tiny):
    """DQN reads ``ray.chunk_steps`` of old files at ``dqn.chunk_steps``: a plugin naming
    it (or a live setting, or a place outside its own section) is refused, and DQN's
    mapping survives the refusal."""
    from rlamd.config.sections import MOVED_KEYS

    for moved, why in [
        ({"ray.chunk_steps": "mine.chunk_steps"}, "is read as dqn.chunk_steps already"),
        ({"ray.num_learners": "mine.num_learners"}, r"is a setting of \[ray\]"),
        ({"ray.old_knob": "dqn.old_knob"}, "points outside mine"),
    ]:
        clash = TinyAlgorithm()
        clash.name, clash.moved_keys = "mine", moved
        with pytest.raises(ValueError, match=why):
            register(clash)
        assert "mine" not in ALGORITHMS
    assert MOVED_KEYS["ray.chunk_steps"] == "dqn.chunk_steps"


def test_a_runs_config_file_holds_its_own_algorithm_and_loads_without_the_plugin(tmp_path):
    """A DQN run made while a plugin was loaded writes no [tiny] (nor [ppo]) table, so
    its config.toml loads in a session without the plugin; a file that has a plugin's
    table says how such a table becomes known."""
    from rlamd.config.errors import ConfigError
    from rlamd.config.layers import resolve
    from rlamd.config.sources import to_toml

    register_tiny()
    try:
        cfg = resolve({"train": {"env": "cartpole", "algo": "dqn"}})
        text = to_toml(cfg.run_sections())
        tiny_text = to_toml(resolve({"train": {"env": "cartpole", "algo": "tiny"}}).run_sections())
    finally:
        unregister("tiny")
    assert "[dqn]" in text and "[tiny]" not in text and "[ppo]" not in text
    (tmp_path / "config.toml").write_text(text)
    assert resolve({}, config_file=str(tmp_path / "config.toml")).to_dict() == cfg.to_dict()
    (tmp_path / "tiny.toml").write_text(tiny_text)
    with pytest.raises(ConfigError, match=r"unknown table \[tiny\].*RLAMD_PLUGINS loads it"):
        resolve({}, config_file=str(tmp_path / "tiny.toml"))
