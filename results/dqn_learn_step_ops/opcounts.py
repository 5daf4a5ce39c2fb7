"""ATen ops doing work per eager DQN learn step, batch 128, fp32, Breakout shapes."""

import torch

import rlamd.bench  # noqa: F401  (registers the peers)
from rlamd.bench.dqn import rlamd_side
from rlamd.bench.peer import get
from rlamd.profiling import call_cost

torch.set_num_threads(1)
dev = torch.device("cpu")
sides = [rlamd_side(128, "fp32", dev, 1000, 1)]
sides.append(rlamd_side(128, "fp32", dev, 1000, 1, peer=get("sb3")))
sides += [get(n).dqn_side(128, dev, 1000, 1) for n in ("sb3", "torchrl")]
for s in sides:
    s.learn_one()
    c = call_cost(s.learn_one, dev)
    print(f"{s.who}: {c['kernels']:.0f} ops, host {c['host_us']:,.0f} us")
    s.close()
