#!/usr/bin/env bash
# One script for every check the issues ask of a GPU (ROCm or CUDA), in one call of under
# 8 minutes: the doctor, the GPU tests (graph == eager, sync-free replays), the bench
# (device, replay, learner, dqn, ppo; SB3 on the same GPU, kernels per learn step, graph
# against eager at batch 128), a profiler trace, memory, the Ray bits. Writes everything
# under ${OUT:-gpu-out}; works from a source tree without installing rlamd.
#
#   bash scripts/gpu_checks.sh            # needs torch with a GPU in the current Python
#
# Every step has its own time limit and none starts past the budget (470 s; set
# GPU_CHECKS_BUDGET to change it), so the most important checks (first) always finish;
# a skipped step says so in the log.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
budget="${GPU_CHECKS_BUDGET:-470}"  # seconds
left() { echo $(( budget - (SECONDS - start) )); }  # seconds left of the budget
step() {  # step LIMIT TITLE COMMAND...: run COMMAND for at most LIMIT s (less if the budget is short)
  local want=$1 title=$2 t
  shift 2
  t=$(left); [ "$want" -lt "$t" ] && t=$want
  echo; echo "== $title (t=$((SECONDS - start)) s, limit ${t} s)"
  if [ "$t" -lt 15 ]; then echo "   skipped: the budget is spent"; return 0; fi
  timeout "$t" "$@"
  local rc=$?; [ $rc -ne 0 ] && echo "   exit status $rc"; return 0
}

# Not "profile.py": cProfile (imported by torch._dynamo) would import this file as "profile".
cat > "$out/trace_learn.py" <<'PY'
import sys, torch
from rlamd.agents.dqn import DQN, DQNConfig
from rlamd.algos.dqn import capture_dqn
from rlamd.replay.synthetic import filled_replay
from rlamd.graphs import graph_status
from rlamd.precision import Precision
from rlamd.profiling import Profile, span
dev = torch.device("cuda")
buf = filled_replay(dev)
agent = DQN(DQNConfig(batch_size=128), (4, 84, 84), 4, dev, Precision("bf16", dev), capturable=True)
agent = capture_dqn(agent, "auto")
with Profile(f"{sys.argv[1]}/profile", steps=20, device=dev, skip=5) as prof:
    for _ in range(30):
        prof.step()
        with span("learn"):
            agent.learn(buf, 128, 0.5)
print(graph_status(agent))
PY
cat > "$out/memory.py" <<'PY'
import torch
from rlamd.replay import PrioritizedReplayBuffer
torch.cuda.reset_peak_memory_stats()
buf = PrioritizedReplayBuffer(1_000_000, 8, (4, 84, 84), torch.uint8, frame_stack=4, num_actions=4, n_step=3, device="cuda")
print(f"allocated for 1M transitions: {torch.cuda.max_memory_allocated() / 1e9:.3f} GB "
      f"({buf.nbytes_per_transition():.1f} bytes/transition), trees: {buf.sampler.backend.name}")
PY
cat > "$out/sac_graph.py" <<'PY'
# SAC's learn step (sample, critics, actor, temperature, Polyak, priorities) as one graph
# launch, and updates/s against SB3's SAC on the same GPU (HalfCheetah's sizes, batch 256).
import time, numpy as np, torch
from rlamd.agents.sac import SAC, SACConfig
from rlamd.algos.sac import capture_sac
from rlamd.graphs import graph_status
from rlamd.precision import Precision
from rlamd.replay import ReplayBuffer
dev = torch.device("cuda")
buf = ReplayBuffer(100_000, 1, (17,), torch.float32, action_shape=(6,), device=dev)
rng = np.random.default_rng(0)
for _ in range(5000):
    buf.add(rng.normal(size=(1, 17)).astype(np.float32), rng.uniform(-1, 1, (1, 6)),
            rng.normal(size=1), np.zeros(1, bool), np.zeros(1, bool))
def rate(agent, n=500):
    for _ in range(20): agent.learn(buf, 256)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): agent.learn(buf, 256)
    torch.cuda.synchronize(); return n / (time.perf_counter() - t)
for mode in ("off", "auto"):
    agent = capture_sac(SAC(SACConfig(), (17,), 6, dev, Precision("fp32", dev, max_grad_norm=None,
                        grad_clamp=None), capturable=mode == "auto"), mode)
    print(f"rlamd SAC graph={mode}: {rate(agent):,.0f} updates/s", graph_status(agent))
import gymnasium as gym
from stable_baselines3 import SAC as SB3SAC
model = SB3SAC("MlpPolicy", gym.make("HalfCheetah-v5"), learning_starts=2000, device="cuda", verbose=0)
model.learn(2100)
t = time.perf_counter(); model.train(gradient_steps=500, batch_size=256); torch.cuda.synchronize()
print(f"SB3 SAC on the same GPU: {500 / (time.perf_counter() - t):,.0f} updates/s")
PY

{
  echo "== nvidia-smi / rocm-smi"; (nvidia-smi || rocm-smi || true) 2>&1 | head -20
  $py -c "import torch, triton; print('torch', torch.__version__, 'hip', torch.version.hip, 'cuda', torch.version.cuda, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
  step 45 "doctor (text and --json)" bash -c "$py -m rlamd.doctor --device cuda --json > '$out/doctor.json'; $py -m rlamd.doctor --device cuda"
  step 110 "gpu tests (graph == eager, failed-capture fallback, sync-free, Triton == torch)" \
    $py -m pytest -m gpu -q -p no:cacheprovider --no-header -rs
  step 80 "graph vs eager: DQN learn step from replay and PPO minibatch, b128, with kernel counts" \
    $py -m rlamd.bench learner --device cuda --quick --out "$out/bench-learner"
  step 100 "bench: dqn (1 env, b128, SB3 on the same GPU, kernels per learn step)" \
    $py -m rlamd.bench dqn --device cuda --quick --out "$out/bench-dqn"
  step 60 "sac: the learn step as one graph launch, updates/s against SB3's SAC on this GPU" \
    $py "$out/sac_graph.py"
  step 45 "bench: device + replay (sample + update at 2^20: target <= 50 us)" \
    $py -m rlamd.bench device replay --device cuda --quick --out "$out/bench-device-replay"
  step 90 "train: the default breakout DQN (8 envs), SPS once learning runs (target >= 3,000)" \
    bash -c "$py -m rlamd.train breakout --steps 120000 --set dqn.learning_starts=20000 \
      --log-every 10000 --eval-every 0 --checkpoint-every 1000000 --logdir '$out/train' \
      --run-name dqn --no-tensorboard 2>&1 | grep -v signal | tail -15"
  step 90 "bench: ppo (8 and 64 envs, SB3 on the same GPU, raw env ceiling)" \
    $py -m rlamd.bench ppo --device cuda --quick --out "$out/bench-ppo"
  step 30 "memory: 1M Atari transitions on the device" $py "$out/memory.py"
  step 40 "profile: one trace of 20 learn steps (Perfetto / TensorBoard)" $py "$out/trace_learn.py" "$out"
  if $py -c "import ray" 2>/dev/null; then
    step 50 "ray: one GPU learner, DQN on CartPole, short" \
      $py -m rlamd.train cartpole --ray --ray-address local --gpus-per-learner 1 --steps 8000 \
      --eval-every 0 --logdir "$out/ray" --run-name dqn --no-tensorboard --set dqn.learning_starts=1000
    step 25 "ray: allreduce" $py -m rlamd.bench allreduce --quick --out "$out/allreduce"
  else
    echo; echo "== ray skipped (not installed)"
  fi
  # Sweep packing: aggregate SPS of 1, 4 and 8 Breakout PPO trials on one GPU
  # against one run alone (goal: 8 trials >= 4x one trial). Tune trials where Ray is
  # installed (--gpus-per-trial 1/K); else the bench says so in one line and packs the
  # trials as plain rlamd.train processes sharing the GPU (--threads = cores / K).
  step 150 "sweep: 1, 4 and 8 Breakout PPO trials on one GPU, aggregate SPS" \
    $py -m rlamd.sweep.bench breakout --algo ppo --device cuda --steps 50000 --trials 1,4,8
  echo; echo "== done in $((SECONDS - start)) s"
} 2>&1 | tee "$out/log.txt"
