"""Every environment variable rlamd reads: refused in one line naming it, and a bad
numba/OpenMP one never breaks an import or ``--help``."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlamd.config import ConfigError
from rlamd.device import DEFAULT_HIP_ALLOC_CONF
from rlamd.envvars import VARIABLES, check_environment, flag, sanitize


@pytest.mark.parametrize(
    ("name", "value", "close"),
    [
        ("RLAMD_TREE_BACKEND", "garbage", None),
        ("RLAMD_TREE_BACKEND", "numbaa", "numba"),
        ("RLAMD_OPENMP_DEFAULTS", "yes please", None),
        ("RLAMD_SKIP_KERNEL_CHECK", "2", None),
        ("TRITON_INTERPRET", "maybe", None),
        ("HSA_OVERRIDE_GFX_VERSION", "gfx1030", None),
        ("NUMBA_NUM_THREADS", "0", "cores"),
        ("NUMBA_NUM_THREADS", "abc", "cores"),
        ("OMP_NUM_THREADS", "abc", "cores"),
        ("OMP_NUM_THREADS", "4,0", "cores"),
        ("OMP_WAIT_POLICY", "pasive", "PASSIVE"),
        ("GOMP_SPINCOUNT", "-5", "0"),
        ("KMP_BLOCKTIME", "soon", "0"),
        ("PYTORCH_HIP_ALLOC_CONF", "expandable_segments", None),
        ("PYTORCH_ALLOC_CONF", "a:1,,b:2", None),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name, value, close):
    with pytest.raises(ConfigError) as err:
        check_environment({name: value})
    text = str(err.value)
    assert text.startswith(f"{name}={value!r} (environment variable read by ")
    assert "; accepted: " in text and "or unset it" in text and "\n" not in text
    if close == "cores":
        assert text.endswith(f"Did you mean {len(os.sched_getaffinity(0))}?")
    elif close is not None:
        assert text.endswith(f"Did you mean {close}?")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RLAMD_TREE_BACKEND", "Triton"),
        ("RLAMD_OPENMP_DEFAULTS", "1"),
        ("TRITON_INTERPRET", "true"),
        ("HSA_OVERRIDE_GFX_VERSION", "10.3.0"),
        ("NUMBA_NUM_THREADS", "8"),
        ("OMP_NUM_THREADS", "4,2"),
        ("OMP_WAIT_POLICY", "passive"),
        ("GOMP_SPINCOUNT", "20k"),
        ("GOMP_SPINCOUNT", "INFINITE"),
        ("KMP_BLOCKTIME", "0"),
        ("KMP_BLOCKTIME", "infinite"),
        ("PYTORCH_HIP_ALLOC_CONF", DEFAULT_HIP_ALLOC_CONF),  # what rlamd itself sets
        ("PYTORCH_HIP_ALLOC_CONF", "expandable_segments:True"),
        ("PYTORCH_ALLOC_CONF", "roundup_power2_divisions:[256:1,512:2,>:8],backend:native"),
    ],
)
def test_accepted_values_pass(name, value):
    check_environment({name: value})


def test_empty_values_count_as_unset():
    check_environment({var.name: "" for var in VARIABLES})
    assert flag({"TRITON_INTERPRET": ""}, "TRITON_INTERPRET") is False
    assert flag({"TRITON_INTERPRET": "On"}, "TRITON_INTERPRET") is True


def test_sanitize_takes_out_only_what_a_library_would_choke_on():
    env = {"NUMBA_NUM_THREADS": "0", "OMP_NUM_THREADS": "2", "RLAMD_TREE_BACKEND": "garbage"}
    assert sanitize(env) == ["NUMBA_NUM_THREADS"]
    assert env == {"OMP_NUM_THREADS": "2", "RLAMD_TREE_BACKEND": "garbage"}


def _cli(args, **env):
    return subprocess.run(
        [sys.executable, "-m", "rlamd.train", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def test_bad_thread_variables_leave_help_working_and_refuse_training(tmp_path):
    """Regression: NUMBA_NUM_THREADS=0 broke even `--help` (numba raised at import), and
    OMP_NUM_THREADS=abc made libgomp print a warning from inside torch's import."""
    bad = {"NUMBA_NUM_THREADS": "0", "OMP_NUM_THREADS": "abc", "GOMP_SPINCOUNT": "-5"}
    with ThreadPoolExecutor(2) as pool:  # the two commands side by side
        helping = pool.submit(_cli, ["--help"], **bad)
        refusing = pool.submit(_cli, ["cartpole", "--logdir", str(tmp_path)], **bad)
        helped, refused = helping.result(), refusing.result()
    assert helped.returncode == 0 and "--resume" in helped.stdout
    assert "libgomp" not in helped.stderr and "Traceback" not in helped.stderr
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: NUMBA_NUM_THREADS='0' (environment variable")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_a_bad_tree_backend_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    """Regression: RLAMD_TREE_BACKEND=garbage ended in a traceback that never named it."""
    from rlamd.train import main

    monkeypatch.setenv("RLAMD_TREE_BACKEND", "garbage")
    assert main(["cartpole", "--logdir", str(tmp_path)]) == 2
    assert "RLAMD_TREE_BACKEND='garbage'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_tree_backend_named_by_the_variable_is_named_in_library_errors(monkeypatch):
    import torch

    from rlamd.replay.segment_tree import resolve_backend

    monkeypatch.setenv("RLAMD_TREE_BACKEND", "garbage")
    with pytest.raises(ValueError, match="RLAMD_TREE_BACKEND='garbage'"):
        resolve_backend("auto", torch.device("cpu"))
    monkeypatch.setenv("RLAMD_TREE_BACKEND", "numba")  # on a GPU: refused as the tree is built
    with pytest.raises(ConfigError, match="RLAMD_TREE_BACKEND='numba' needs numba installed"):
        resolve_backend("auto", torch.device("cuda"))
    monkeypatch.setenv("RLAMD_TREE_BACKEND", "")
    assert resolve_backend("auto", torch.device("cpu")) in ("numba", "torch")
