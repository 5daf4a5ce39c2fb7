"""An experiment, not a feature: ``python -m rlamd.train`` with the uniform replay's draws
made independent (SB3's and CleanRL's rule: each of the B indices uniform over the stored
transitions) instead of rlamd's stratified draws (one in each of B equal slices of the
replay). It replaces ``rlamd.replay.backends.stratified``, which the CPU backends' draws
call; the arguments are rlamd.train's.

    taskset -c 1 .venv/bin/python results/td3_hopper_100k_iid/iid_sampling.py Hopper-v5 --algo td3 ...
"""

import runpy
import sys

import torch

import rlamd.replay.backends as backends


def independent(t, r: torch.Tensor) -> torch.Tensor:
    """``B`` targets, each uniform over [0, total), in float64."""
    total = t.sums.root().double()
    return torch.minimum(r.double() * total, total * t.params[2])


backends.stratified = independent
sys.argv = ["rlamd.train", *sys.argv[1:]]
runpy.run_module("rlamd.train", run_name="__main__")
