#!/usr/bin/env bash
# One script for every check the issues ask of a GPU (ROCm or CUDA), sized for a
# 15-minute lease: sync-free hot loop, GPU == CPU replay, speed at batch 128, memory,
# the doctor's report. Writes everything under ${OUT:-gpu-out}.
#
#   bash scripts/gpu_checks.sh            # needs torch with a GPU in the current Python
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
{
  echo "== nvidia-smi / rocm-smi"; (nvidia-smi || rocm-smi || true) 2>&1 | head -20
  echo "== doctor"; $py -m rlamd.doctor --device cuda
  $py -m rlamd.doctor --device cuda --json > "$out/doctor.json"
  echo "== gpu tests"; $py -m pytest -m gpu -q -p no:cacheprovider
  echo "== bench"; timeout 420 $py -m rlamd.bench device replay learner dqn ppo --device cuda --out "$out/bench" --no-peers
  if $py -c "import ray" 2>/dev/null; then
    echo "== ray: one GPU learner (--gpus-per-learner 1), DQN and PPO on CartPole, short"
    timeout 120 $py -m rlamd.train cartpole --ray --ray-address local --gpus-per-learner 1 --steps 8000 \
      --eval-every 0 --logdir "$out/ray" --run-name dqn --no-tensorboard --set dqn.learning_starts=1000
    timeout 120 $py -m rlamd.train cartpole --algo ppo --ray --ray-address local --gpus-per-learner 1 \
      --steps 16384 --eval-every 0 --logdir "$out/ray" --run-name ppo --no-tensorboard
    echo "== allreduce between two learners (nccl with two or more GPUs, else gloo)"
    timeout 120 $py -m rlamd.bench allreduce --quick --out "$out/allreduce"
  fi
  echo "== memory: 1M Atari transitions on the device"
  $py - <<'PY'
import torch
from rlamd.replay import PrioritizedReplayBuffer
torch.cuda.reset_peak_memory_stats()
buf = PrioritizedReplayBuffer(1_000_000, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3, device="cuda")
print(f"allocated for 1M transitions: {torch.cuda.max_memory_allocated() / 1e9:.3f} GB "
      f"({buf.nbytes_per_transition():.1f} bytes/transition)")
PY
} 2>&1 | tee "$out/log.txt"
