#!/usr/bin/env bash
# Sets up rlamd in ./.venv (or the virtualenv that is active) with the right PyTorch.
#
#   bash scripts/setup.sh            runtime only
#   bash scripts/setup.sh --dev      + pytest, ruff (for the test suite)
#   bash scripts/setup.sh --bench    + Stable-Baselines3, matplotlib, SciPy (peer benchmarks)
#   bash scripts/setup.sh --bench-peers  + .venv-peers/NAME for peers that cannot share rlamd's
#                                    env (Sample Factory 2.1.1: gymnasium<1, numpy<2)
#   bash scripts/setup.sh --ray      + ray[default,rllib] (cluster training)
#   bash scripts/setup.sh --tune     + optuna (rlamd sweep --search optuna; with --ray)
#   bash scripts/setup.sh --mujoco   + gymnasium[mujoco], mujoco 3.3.7 (HalfCheetah-v5, ...)
#   bash scripts/setup.sh --dry-run  print the flavour, torch and index it would install;
#                                    install nothing (no .venv is made either)
#
# PyTorch is installed *before* rlamd, pinned, so pip never resolves an unpinned torch:
#   ROCm found ($ROCM_PATH or /opt/rocm, rocminfo) -> ROCm wheel from an index PyTorch
#       publishes for the pin: the host's ROCm X.Y when listed, else the newest one the
#       host's driver runs (rlamd/doctor/wheels.py holds the table); a host too old for
#       every wheel of the pin stops here, before anything is installed, and says why
#   NVIDIA driver found (nvidia-smi)               -> the CUDA wheel from PyPI
#   otherwise                                      -> the CPU wheel
# Overrides:
#   RLAMD_TORCH=rocm|cuda|cpu|skip     force a flavour (skip: keep the torch you have)
#   RLAMD_TORCH_VERSION=2.13.0         the torch release to pin
#   RLAMD_TORCH_INDEX_URL=URL          use this index as is, e.g. https://download.pytorch.org/whl/rocm7.2
#   ROCM_PATH=/opt/rocm-7.2.0          the host ROCm whose .info/version is read (only there when set)
#   RLAMD_PYTHON=python3.11            interpreter for a new .venv
set -euo pipefail
cd "$(dirname "$0")/.."

extras=()
dry_run=0
bench_peers=0
for arg in "$@"; do
  case "$arg" in
    --dev) extras+=(dev) ;;
    --bench) extras+=(bench) ;;
    --bench-peers) bench_peers=1 ;;
    --ray) extras+=(ray) ;;
    --tune) extras+=(tune) ;;
    --mujoco) extras+=(mujoco) ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (accepted: --dev --bench --ray --tune --bench-peers --mujoco --dry-run)" >&2; exit 2 ;;
  esac
done

if [ -n "${VIRTUAL_ENV:-}" ]; then
  py="$VIRTUAL_ENV/bin/python"
elif [ -x .venv/bin/python ] || [ "$dry_run" = 1 ]; then
  py=.venv/bin/python
  [ -x "$py" ] || py="${RLAMD_PYTHON:-python3}"  # a dry run makes no .venv
else
  "${RLAMD_PYTHON:-python3}" -m venv .venv
  py=.venv/bin/python
fi
pip() { "$py" -m pip --disable-pip-version-check "$@"; }

# The pin lives in one place, rlamd/doctor/install.py, which the doctor's advice uses too.
version="${RLAMD_TORCH_VERSION:-$(sed -n 's/^TORCH_PIN = "\(.*\)"$/\1/p' rlamd/doctor/install.py)}"
flavour="${RLAMD_TORCH:-}"
rocm_version=""
rocm_file="${ROCM_PATH:-/opt/rocm}/.info/version"
if [ -r "$rocm_file" ]; then rocm_version=$(head -n 1 "$rocm_file" | cut -d- -f1); fi
if [ -z "$flavour" ]; then
  if [ -n "$rocm_version" ] || command -v rocminfo >/dev/null 2>&1; then flavour=rocm
  elif command -v nvidia-smi >/dev/null 2>&1; then flavour=cuda
  else flavour=cpu; fi
fi
case "$flavour" in
  rocm|cuda|cpu|skip) ;;
  *) echo "setup: RLAMD_TORCH='$flavour' (accepted: rocm cuda cpu skip)" >&2; exit 2 ;;
esac

have=$("$py" -c 'import torch; print(torch.__version__, torch.version.hip or "-", torch.version.cuda or "-", sep="|")' 2>/dev/null || true)
want_ok() {  # is the installed torch of the flavour we want?
  [ -n "$have" ] || return 1
  IFS='|' read -r tv hip cuda <<<"$have"
  case "$flavour" in
    rocm) [ "$hip" != "-" ] ;;
    cuda) [ "$cuda" != "-" ] ;;
    *) true ;;
  esac
}

index_args=()
why=""
if [ -n "${RLAMD_TORCH_INDEX_URL:-}" ]; then
  index_args=(--index-url "$RLAMD_TORCH_INDEX_URL")
  why="RLAMD_TORCH_INDEX_URL, used as given"
elif [ "$flavour" = rocm ]; then
  # The table of published ROCm wheels (rlamd/doctor/wheels.py, standard library only).
  status=0
  picked=$("$py" rlamd/doctor/wheels.py pick --torch "$version" --rocm "$rocm_version") || status=$?
  if [ "$status" != 0 ]; then
    echo "setup: no ROCm wheel of torch==$version to install here (host ROCm ${rocm_version:-not found}, reasons above); stopped before installing anything" >&2
    exit 3
  fi
  index_args=(--index-url "$(sed -n 1p <<<"$picked")")
  why=$(sed -n 2p <<<"$picked")
fi

if [ "$dry_run" = 1 ]; then
  echo "setup (dry run): flavour $flavour${rocm_version:+, host ROCm $rocm_version}"
  if [ "$flavour" = skip ]; then
    echo "setup (dry run): torch: keep the installed one (${have:-none})"
  else
    echo "setup (dry run): torch: torch==$version"
    echo "setup (dry run): index: ${index_args[1]:-the default ones (PyPI, or those your pip config names)}${why:+ ($why)}"
    echo "setup (dry run): would run: $py -m pip install torch==$version ${index_args[*]:-}"
  fi
  echo "setup (dry run): installed now: ${have:-no torch}; nothing was installed"
  exit 0
fi

case "$flavour" in
  skip) echo "setup: keeping the installed torch (${have:-none})" ;;
  rocm|cuda|cpu)
    if want_ok; then
      echo "setup: torch ${have%%|*} already installed ($flavour)"
    else
      # pip counts an installed 2.13.0+cpu as satisfying torch==2.13.0 from the ROCm index:
      # remove another flavour first, or it stays.
      if [ -n "$have" ]; then pip uninstall -y torch; fi
      echo "setup: installing torch==$version for $flavour ${index_args[*]:-}${why:+ ($why)}"
      pip install "torch==$version" "${index_args[@]}"
    fi ;;
  *) echo "setup: RLAMD_TORCH='$flavour' (accepted: rocm cuda cpu skip)" >&2; exit 2 ;;
esac

spec="."
if [ ${#extras[@]} -gt 0 ]; then spec=".[$(IFS=,; echo "${extras[*]}")]"; fi
echo "setup: installing rlamd ($spec) into $("$py" -c 'import sys; print(sys.prefix)')"
if [[ " ${extras[*]:-} " == *" ray "* ]]; then
  # Ray first, on its own: it resolves at once. Given rlamd and Ray together, pip (23 to
  # 26) downloads every older Ray (gigabytes, minutes) before it settles on the newest.
  # The extra's requirements, read from pyproject.toml (no tomllib before Python 3.11).
  mapfile -t ray_reqs < <("$py" -c 'import ast, re; t = open("pyproject.toml").read(); [print(r) for r in ast.literal_eval(re.search(r"^ray = (\[.*\])$", t, re.M).group(1))]')
  pip install "${ray_reqs[@]}"
fi
pip install -e "$spec"
if [ "$flavour" = cpu ] && [[ " ${extras[*]:-} " == *" dev "* ]] && [ "$(uname -sm)" = "Linux x86_64" ]; then
  # The replay's Triton kernels are tested on the CPU under TRITON_INTERPRET=1. GPU builds
  # of torch bring their own triton (pytorch-triton-rocm on ROCm): never replace it.
  pip install "triton==3.9.0"
fi
"$py" -c 'import rlamd.agents, rlamd.envs; from rlamd.device import resolve_device, describe_device; print("setup: rlamd ready on", describe_device(resolve_device("auto")).summary())'

if [ "$bench_peers" = 1 ]; then
  # Peers in their own venvs (python -m rlamd.bench finds .venv-peers/NAME/bin/python), each
  # with the same pinned torch first, so pip never resolves an unpinned one. ale-py 0.12's
  # wheel carries the Atari ROMs, so no ROM download is needed.
  peer_py="${RLAMD_PYTHON:-python3}"
  [ -x .venv-peers/samplefactory/bin/python ] || "$peer_py" -m venv .venv-peers/samplefactory
  sf() { .venv-peers/samplefactory/bin/python -m pip --disable-pip-version-check "$@"; }
  sf install "torch==$version" "${index_args[@]}"
  sf install "sample-factory==2.1.1" "ale-py==0.12.1"
  .venv-peers/samplefactory/bin/python -c 'import importlib.metadata as m, ale_py, sample_factory, torch; print("setup: .venv-peers/samplefactory ready: Sample Factory", m.version("sample-factory"), "torch", torch.__version__)'
fi
