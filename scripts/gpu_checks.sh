#!/usr/bin/env bash
# One script for every check the issues ask of a GPU (ROCm or CUDA), in one call of under
# 8 minutes: the doctor, the GPU tests (graph == eager, sync-free replays), the bench
# (device, replay, learner, dqn, ppo; SB3 on the same GPU, kernels per learn step, graph
# against eager at batch 128), a profiler trace, memory, the Ray bits. Writes everything
# under ${OUT:-gpu-out}; works from a source tree without installing rlamd.
#
#   bash scripts/gpu_checks.sh            # needs torch with a GPU in the current Python
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
left() { echo $(( 470 - (SECONDS - start) )); }  # seconds left of the 8-minute budget
step() { echo; echo "== $* (t=$((SECONDS - start)) s)"; }
{
  step "nvidia-smi / rocm-smi"; (nvidia-smi || rocm-smi || true) 2>&1 | head -20
  $py -c "import torch; print('torch', torch.__version__, 'hip', torch.version.hip, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  step "doctor"; timeout 45 $py -m rlamd.doctor --device cuda
  timeout 45 $py -m rlamd.doctor --device cuda --json > "$out/doctor.json"
  step "gpu tests (graph == eager, sync-free)"
  timeout 120 $py -m pytest -m gpu -q -p no:cacheprovider --no-header -rs 2>&1 | tail -40
  step "graph vs eager: DQN learn step from replay and PPO minibatch, b128, with kernel counts"
  timeout 90 $py -m rlamd.bench learner --device cuda --quick --out "$out/bench-learner"
  step "profile: one trace of 20 learn steps (Perfetto / TensorBoard)"
  timeout 60 $py - "$out" <<'PY'
import sys, torch
from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.bench.learner import filled_replay
from rlamd.precision import Precision
from rlamd.profiling import Profile, span
dev = torch.device("cuda")
buf = filled_replay(dev)
agent = DQN(DQNConfig(batch_size=128), (4, 84, 84), 4, dev, Precision("bf16", dev))
with Profile(f"{sys.argv[1]}/profile", steps=20, device=dev, skip=5) as prof:
    for _ in range(30):
        prof.step()
        with span("update"):
            agent.learn(buf, 128, 0.5)
print(agent.graph_status)
PY
  step "memory: 1M Atari transitions on the device"
  timeout 60 $py - <<'PY'
import torch
from rlamd.replay import PrioritizedReplayBuffer
torch.cuda.reset_peak_memory_stats()
buf = PrioritizedReplayBuffer(1_000_000, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3, device="cuda")
print(f"allocated for 1M transitions: {torch.cuda.max_memory_allocated() / 1e9:.3f} GB "
      f"({buf.nbytes_per_transition():.1f} bytes/transition)")
PY
  step "bench: device + replay"
  timeout 60 $py -m rlamd.bench device replay --device cuda --quick --out "$out/bench-device-replay"
  step "bench: dqn (1 env, b128, SB3 on the same GPU, kernels per learn step)"
  timeout 150 $py -m rlamd.bench dqn --device cuda --quick --out "$out/bench-dqn"
  step "train: the default breakout DQN (8 envs), SPS once learning runs (target >= 3,000)"
  timeout 75 $py -m rlamd.train breakout --steps 200000 --set dqn.learning_starts=20000 \
    --log-every 20000 --eval-every 0 --checkpoint-every 1000000 --logdir "$out/train" \
    --run-name dqn --no-tensorboard 2>&1 | tail -12
  step "bench: ppo (8 and 64 envs, SB3 on the same GPU, raw env ceiling)"
  t=$(( $(left) - 30 )); [ "$t" -gt 30 ] && timeout "$t" $py -m rlamd.bench ppo --device cuda --quick --out "$out/bench-ppo"
  if $py -c "import ray" 2>/dev/null && [ "$(left)" -gt 60 ]; then
    step "ray: one GPU learner, DQN on CartPole, short; allreduce"
    timeout 50 $py -m rlamd.train cartpole --ray --ray-address local --gpus-per-learner 1 --steps 8000 \
      --eval-every 0 --logdir "$out/ray" --run-name dqn --no-tensorboard --set dqn.learning_starts=1000
    [ "$(left)" -gt 30 ] && timeout 25 $py -m rlamd.bench allreduce --quick --out "$out/allreduce"
  else
    echo "== ray skipped (not installed or out of time)"
  fi
  echo; echo "== done in $((SECONDS - start)) s"
} 2>&1 | tee "$out/log.txt"
