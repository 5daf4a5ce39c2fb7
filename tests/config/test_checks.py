"""Rules over a whole run's settings (rlamd.config.checks): one test per rule, boundaries checked
against the code they protect, the device and precision against a faked machine, and the
training command end to end."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rlamd.algos import dqn as dqn_algo
from rlamd.algos import ppo as ppo_algo
from rlamd.config import ConfigError, apply_overrides
from rlamd.config.checks import ALE_SEED_LIMIT, RULES, check_device, check_run
from rlamd.config.sections import SECTION_TYPES
from rlamd.device import TorchQueries

ALL_RULES = {**RULES, **dqn_algo.CHECKS, **ppo_algo.CHECKS}
"""The run-wide rules and both algorithms' own checks, by name."""

SECTION_CLASSES: dict[str, type] = SECTION_TYPES
ONE_LINE = re.compile(r"^[a-z_0-9]+\.[a-z_0-9]+=[^\n]+; accepted: [^\n]+$")


def make_cfg(**sections: dict) -> SimpleNamespace:
    """A run's configuration (``cfg.train`` ... ``cfg.ray``) from defaults plus overrides
    given as they come from ``--set`` (text) or TOML."""
    return SimpleNamespace(
        **{
            name: apply_overrides(cls(), name, sections.get(name, {}))
            for name, cls in SECTION_CLASSES.items()
        }
    )


def refused(cfg, **kw) -> str:
    with pytest.raises(ConfigError) as err:
        check_run(cfg, device=False, **kw)
    message = str(err.value)
    assert ONE_LINE.match(message), message
    return message


CLASSIC = {"env": "cartpole", "num_envs": "4"}
PPO_CLASSIC = {**CLASSIC, "algo": "ppo", "steps": "10000"}
RAY = {"enabled": "true"}

# rule -> (a configuration it refuses, the start of the message). Every rule in
# ALL_RULES has a case here (test_every_rule_has_a_case).
CASES = {
    "positive_clips": [
        ({"ppo": {"adam_eps": "-1"}}, "ppo.adam_eps=-1.0; accepted: a number > 0"),
        ({"ppo": {"adam_eps": "0"}}, "ppo.adam_eps=0.0; accepted: a number > 0"),
        ({"dqn": {"max_grad_norm": "-1"}}, "dqn.max_grad_norm=-1.0; accepted: a number > 0"),
        ({"ppo": {"grad_clamp": "0"}}, "ppo.grad_clamp=0.0; accepted: a number > 0"),
        ({"dqn": {"adam_eps": "0"}}, "dqn.adam_eps=0.0; accepted: a number > 0"),
    ],
    "hidden_sizes": [
        ({"dqn": {"hidden": "64,0"}}, "dqn.hidden=(64, 0); accepted: layer sizes >= 1"),
        ({"ppo": {"hidden": "0"}}, "ppo.hidden=(0,); accepted: layer sizes >= 1"),
    ],
    "schedules_run_forward": [
        (
            {"dqn": {"eps_start": "0.1", "eps_end": "0.5"}},
            "dqn.eps_end=0.5 (more than dqn.eps_start=0.1",
        ),
    ],
    "beta_anneals_up": [
        (
            {"dqn": {"beta_start": "0.6", "beta_end": "0.4"}},
            "dqn.beta_end=0.4 (less than dqn.beta_start=0.6",
        ),
        (  # every replay's rule: SAC's and TD3's sections have the same schedule
            {"train": {"algo": "sac"}, "sac": {"beta_start": "0.9", "beta_end": "0.1"}},
            "sac.beta_end=0.1 (less than sac.beta_start=0.9",
        ),
        (
            {"train": {"algo": "td3"}, "td3": {"beta_start": "0.9", "beta_end": "0.1"}},
            "td3.beta_end=0.1 (less than td3.beta_start=0.9",
        ),
    ],
    "atari_frames": [
        ({"atari": {"screen_size": "35"}}, "atari.screen_size=35 (the Nature CNN"),
        (
            {"atari": {"max_episode_frames": "0"}},
            "atari.max_episode_frames=0 (every episode would end",
        ),
        ({"atari": {"max_episode_frames": "3"}}, "atari.max_episode_frames=3"),
    ],
    "seed_range": [
        ({"train": {"seed": str(ALE_SEED_LIMIT)}}, f"train.seed={ALE_SEED_LIMIT} (env i at step s"),
        ({"train": {**CLASSIC, "seed": str(2**32)}}, f"train.seed={2**32} (env i at step s"),
        (
            {"train": {"seed": str(ALE_SEED_LIMIT)}, "ray": RAY},
            f"train.seed={ALE_SEED_LIMIT} (Ray worker",
        ),
    ],
    "replay_holds_a_batch": [
        (
            {"train": CLASSIC, "dqn": {"buffer_size": "20"}},
            "dqn.buffer_size=20 (train.num_envs=4 envs need",
        ),
        (
            {"train": CLASSIC, "dqn": {"buffer_size": "1000", "batch_size": "1000"}},
            "dqn.batch_size=1000 (dqn.buffer_size 1,000 over",
        ),
        (
            {
                "dqn": {"buffer_size": "1000", "batch_size": "1000"},
                "ray": {**RAY, "num_learners": "2"},
            },
            "dqn.batch_size=1000 (each of 2 learners samples",
        ),
    ],
    "minibatches_split_evenly": [
        (
            {"train": PPO_CLASSIC, "ppo": {"num_minibatches": "300"}},
            "ppo.num_minibatches=300 (a rollout of ppo.num_steps=128 x train.num_envs=4 envs = 512 rows",
        ),
        ({"train": PPO_CLASSIC, "ppo": {"num_minibatches": "512"}}, "ppo.num_minibatches=512"),
        ({"train": PPO_CLASSIC, "ppo": {"num_minibatches": "1000"}}, "ppo.num_minibatches=1000"),
    ],
    "steps_cover_a_rollout": [
        ({"train": {**PPO_CLASSIC, "steps": "300"}}, "train.steps=300 (less than one PPO rollout"),
    ],
    "ray_workers_per_learner": [
        ({"ray": {**RAY, "num_learners": "3"}}, "ray.num_rollout_workers=2 (every learner needs"),
    ],
    "discrete_actions": [
        (
            {"train": {"env": "Pendulum-v1"}},
            "train.algo='dqn' (Pendulum-v1 has continuous actions",
        ),
    ],
    "batch_splits_over_learners": [
        (
            {"dqn": {"batch_size": "33"}, "ray": {**RAY, "num_learners": "2"}},
            "dqn.batch_size=33 (each learner takes",
        ),
    ],
    "workers_split_over_learners": [
        (
            {
                "train": {"algo": "ppo"},
                "ray": {**RAY, "num_learners": "2", "num_rollout_workers": "3"},
            },
            "ray.num_rollout_workers=3 (each PPO learner",
        ),
    ],
    "ray_learner_gpus": [
        (
            {"train": {"device": "cpu"}, "ray": {**RAY, "gpus_per_learner": "1"}},
            "ray.gpus_per_learner=1.0 (train.device='cpu'",
        ),
        (
            {"train": {"device": "hip"}, "ray": {**RAY, "gpus_per_learner": "0"}},
            "ray.gpus_per_learner=0.0 (train.device='hip'",
        ),
    ],
}


@pytest.mark.parametrize(
    ("key", "value"), [("vf_coef", "-0.5"), ("ent_coef", "-0.01"), ("vf_coef", "-1e-9")]
)
def test_ppo_loss_weights_are_refused_below_zero_as_the_section_is_built(key, value):
    """A section's own fields are its ``__post_init__``'s (not a run-wide rule)."""
    with pytest.raises(ConfigError) as err:
        make_cfg(ppo={key: value})
    assert str(err.value) == f"ppo.{key}={float(value)!r}; accepted: a number >= 0"
    assert getattr(make_cfg(ppo={key: "0"}).ppo, key) == 0.0


def test_every_rule_has_a_case():
    assert set(CASES) == set(ALL_RULES)


@pytest.mark.parametrize(
    ("name", "sections", "start"),
    [(name, s, m) for name, cases in CASES.items() for s, m in cases],
)
def test_each_rule_refuses_with_one_line(name, sections, start):
    cfg = make_cfg(**sections)
    assert refused(cfg).startswith(start)
    with pytest.raises(ConfigError, match=re.escape(start)):
        ALL_RULES[name](cfg)  # it is this rule that says so


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
@pytest.mark.parametrize("env", ["breakout", "cartpole"])
@pytest.mark.parametrize("ray", [False, True])
def test_defaults_and_presets_pass(algo, env, ray):
    from rlamd.algos import ALGORITHMS

    family = "atari" if env == "breakout" else "classic"
    sections = {k: dict(v) for k, v in ALGORITHMS[algo].presets.get(family, {}).items()}
    sections.setdefault("train", {}).update(env=env, algo=algo)
    if ray:
        sections["ray"] = dict(RAY)
    check_run(make_cfg(**sections), device=False)


def test_replay_rule_matches_what_the_replay_can_sample():
    """The largest batch the rule accepts is exactly what a full replay holds."""
    from rlamd.replay import ReplayBuffer

    train = {**CLASSIC, "num_envs": "3"}
    dqn = {"buffer_size": "40", "n_step": "2"}
    largest = None
    for batch in range(1, 41):
        try:
            check_run(make_cfg(train=train, dqn={**dqn, "batch_size": str(batch)}), device=False)
            largest = batch
        except ConfigError:
            break
    buf = ReplayBuffer(40, 3, (4,), torch.float32, n_step=2, gamma=0.99)
    rng = np.random.default_rng(0)
    most = 0
    for _ in range(60):
        no = np.zeros(3, dtype=bool)
        buf.add(
            rng.random((3, 4), dtype=np.float32),
            rng.integers(0, 2, 3),
            np.ones(3, np.float32),
            no,
            no,
        )
        most = max(most, len(buf))
    assert largest == most
    # the smallest replay the rule accepts is one the replay itself accepts
    need = int(refused(make_cfg(train=train, dqn={**dqn, "buffer_size": "14"})).rsplit(">= ", 1)[1])
    ReplayBuffer(need, 3, (4,), torch.float32, n_step=2)
    with pytest.raises(ValueError):
        ReplayBuffer(need - 3, 3, (4,), torch.float32, n_step=2)


def test_ppo_minibatches_accepted_exactly_when_they_split_the_rollout():
    for k in (1, 2, 3, 4, 5, 8, 256, 257):
        cfg = make_cfg(train=PPO_CLASSIC, ppo={"num_minibatches": str(k)})
        ok = 512 % k == 0 and 512 // k >= 2
        if ok:
            check_run(cfg, device=False)
        else:
            assert "Did you mean" in refused(cfg)
    # On Ray a learner's rollout is its workers' envs x num_steps: 2 workers x 4 envs x 16.
    ray = {**RAY, "num_learners": "2", "num_rollout_workers": "2", "envs_per_worker": "4"}
    check_run(
        make_cfg(train=PPO_CLASSIC, ppo={"num_steps": "16", "num_minibatches": "64"}, ray=ray),
        device=False,
    )
    assert "= 64 rows per learner" in refused(
        make_cfg(train=PPO_CLASSIC, ppo={"num_steps": "16", "num_minibatches": "128"}, ray=ray)
    )


def test_seed_boundary_for_atari():
    cfg = make_cfg(train={"steps": "1000", "num_envs": "8"})
    top = ALE_SEED_LIMIT - 1000 - 8
    check_run(make_cfg(train={"steps": "1000", "num_envs": "8", "seed": str(top)}), device=False)
    assert cfg.train.seed < top
    assert refused(
        make_cfg(train={"steps": "1000", "num_envs": "8", "seed": str(top + 1)})
    ).endswith(f"accepted: an integer from 0 to {top}")


def test_ray_rules_apply_only_with_ray():
    check_run(make_cfg(ray={"num_learners": "3"}), device=False)  # ray.enabled is false
    check_run(make_cfg(train={"device": "cpu"}, ray={"gpus_per_learner": "1"}), device=False)


# ---------------------------------------------------------------------- device, faked
class FakeMachine(TorchQueries):
    """A machine with ``gpus`` GPUs, with or without bf16."""

    def __init__(self, gpus: int = 0, bf16: bool = True) -> None:
        self.gpus, self.bf16 = gpus, bf16

    def hip_version(self) -> str | None:
        return "7.0" if self.gpus else None

    def cuda_version(self) -> str | None:
        return None

    def gpu_available(self) -> bool:
        return self.gpus > 0

    def device_count(self) -> int:
        return self.gpus

    def device_properties(self, index: int) -> dict:
        return {
            "name": "Radeon Test",
            "arch": "gfx1030",
            "total_memory": 2**34,
            "capability": "10.3",
        }

    def gpu_bf16(self, index: int) -> bool:
        return self.bf16

    def mps_available(self) -> bool:
        return False


@pytest.mark.parametrize(
    ("train", "machine", "start"),
    [
        (
            {"precision": "fp16", "device": "cpu"},
            FakeMachine(1),
            "train.precision='fp16' (updates run on the CPU",
        ),
        ({"precision": "fp16"}, FakeMachine(0), "train.precision='fp16' (updates run on the CPU"),
        (
            {"precision": "bf16", "device": "hip"},
            FakeMachine(1, bf16=False),
            "train.precision='bf16' (Radeon Test has no bf16",
        ),
        (
            {"device": "cuda"},
            FakeMachine(0),
            "train.device='cuda' (Device 'cuda' asked for, but no GPU",
        ),
        (
            {"device": "hip:2"},
            FakeMachine(2),
            "train.device='hip:2' (Device 'hip:2' is out of range",
        ),
        (
            {"graph": "on", "device": "cpu"},
            FakeMachine(1),
            "train.graph='on' (graphs are captured on CUDA/ROCm GPUs",
        ),
    ],
)
def test_device_and_precision_that_do_not_go_together(train, machine, start):
    with pytest.raises(ConfigError) as err:
        check_device(make_cfg(train=train), api=machine)
    assert str(err.value).startswith(start) and ONE_LINE.match(str(err.value))
    with pytest.raises(ConfigError, match=re.escape(start)):
        check_run(make_cfg(train=train), api=machine)


def test_device_and_precision_that_go_together():
    for train, machine in [
        ({"precision": "fp16", "device": "hip"}, FakeMachine(1, bf16=False)),
        ({"precision": "bf16", "device": "cuda:1"}, FakeMachine(2)),
        ({"precision": "bf16", "device": "cpu"}, FakeMachine(0)),  # emulated, slower, works
        ({"precision": "auto"}, FakeMachine(0)),
        ({"graph": "on", "device": "auto"}, FakeMachine(1)),
    ]:
        check_run(make_cfg(train=train), api=machine)
    # A Ray driver need not have the learners' GPUs: nothing is asked of this machine...
    check_run(make_cfg(train={"precision": "bf16", "device": "cuda"}, ray=RAY), api=FakeMachine(0))
    # ...but CPU learners (gpus_per_learner 0) are known to be CPU learners.
    with pytest.raises(ConfigError, match=r"^train\.precision='fp16' \(updates run on the CPU"):
        check_run(
            make_cfg(train={"precision": "fp16"}, ray={**RAY, "gpus_per_learner": "0"}),
            api=FakeMachine(1),
        )


# ---------------------------------------------------------------------- end to end
# These run the training command. The settings checks in rlamd.config already hold;
# the cases marked RULES need rlamd.config.checks.check_run called at the end of config
# resolution (the lead wires it): until then they fail (by training, or by a traceback).
E2E = [
    (["cartpole", "--set", "dqn.lr=nan"], "error: dqn.lr=nan; accepted: a finite number"),
    (["cartpole", "--seed", "-1"], "error: train.seed=-1; accepted: an integer >= 0"),
    (
        ["cartpole", "--set", "dqn.apex_alpha=inf"],
        "error: dqn.apex_alpha=inf; accepted: a finite number",
    ),
    # RULES
    (
        ["cartpole", "--precision", "fp16", "--device", "cpu"],
        "error: train.precision='fp16' (updates run on the CPU",
    ),
    (["cartpole", "--set", "dqn.batch_size=100000"], "error: dqn.batch_size=100000 ("),
    (
        ["cartpole", "--algo", "ppo", "--set", "ppo.num_minibatches=300"],
        "error: ppo.num_minibatches=300 (",
    ),
    (["breakout", "--set", "atari.screen_size=20"], "error: atari.screen_size=20 ("),
    (["breakout", "--seed", str(ALE_SEED_LIMIT)], f"error: train.seed={ALE_SEED_LIMIT} ("),
]


def test_a_moved_setting_is_checked_at_its_new_place_with_a_note(tmp_path, capsys):
    """``ray.apex_alpha`` moved to ``dqn.apex_alpha``: ``--set`` at the old place still
    reaches it (and its checks), with one line naming the new place."""
    from rlamd.train import main

    logdir = tmp_path / "runs"
    args = ["cartpole", "--set", "ray.apex_alpha=inf", "--logdir", str(logdir)]
    assert main(args) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note == "rlamd: note: --set: ray.apex_alpha is now dqn.apex_alpha (read there)"
    assert error == "error: dqn.apex_alpha=inf; accepted: a finite number"
    assert not logdir.exists()


@pytest.mark.parametrize(("args", "start"), E2E)
def test_training_command_stops_with_one_line_and_no_run_folder(tmp_path, capsys, args, start):
    from rlamd.train import main

    logdir = tmp_path / "runs"
    common = ["--steps", "600", "--eval-every", "0", "--no-tensorboard", "--logdir", str(logdir)]
    assert main([*args, *common]) == 2
    err = capsys.readouterr().err
    assert err.startswith(start), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not logdir.exists() or not any(logdir.iterdir())


@pytest.mark.parametrize(
    ("flag", "value", "tail"),
    [
        ("--algo", "sax", "'sax'; accepted: dqn, ppo, sac, td3. Did you mean sac?"),
        ("--precision", "fp61", "'fp61'; accepted: auto, fp32, bf16, fp16. Did you mean fp16?"),
        ("--graph", "zzz", "'zzz'; accepted: "),
    ],
)
def test_a_flags_unknown_choice_names_the_accepted_ones_and_the_nearest(capsys, flag, value, tail):
    """argparse alone says "invalid choice" and lists the choices: rlamd's refusal also
    names the nearest one, as ``--set train.algo=sax`` does."""
    from rlamd.train import main

    with pytest.raises(SystemExit) as stop:
        main(["cartpole", flag, value])
    assert stop.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"python -m rlamd.train: error: argument {flag}: {tail}"), last
