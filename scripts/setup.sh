#!/usr/bin/env bash
# Sets up rlamd in ./.venv (or the virtualenv that is active) with the right PyTorch.
#
#   bash scripts/setup.sh            runtime only
#   bash scripts/setup.sh --dev      + pytest, ruff (for the test suite)
#   bash scripts/setup.sh --bench    + Stable-Baselines3, matplotlib (peer benchmarks)
#   bash scripts/setup.sh --ray      + ray[default,rllib] (cluster training)
#
# PyTorch is installed *before* rlamd, pinned, so pip never resolves an unpinned torch:
#   ROCm found (/opt/rocm, $ROCM_PATH, rocminfo)  -> ROCm wheel from the PyTorch ROCm index
#   NVIDIA driver found (nvidia-smi)              -> the CUDA wheel from PyPI
#   otherwise                                     -> the CPU wheel
# Overrides:
#   RLAMD_TORCH=rocm|cuda|cpu|skip     force a flavour (skip: keep the torch you have)
#   RLAMD_TORCH_VERSION=2.13.0         the torch release to pin
#   RLAMD_TORCH_INDEX_URL=URL          e.g. https://download.pytorch.org/whl/rocm6.4
#   RLAMD_PYTHON=python3.11            interpreter for a new .venv
set -euo pipefail
cd "$(dirname "$0")/.."

extras=()
for arg in "$@"; do
  case "$arg" in
    --dev) extras+=(dev) ;;
    --bench) extras+=(bench) ;;
    --ray) extras+=(ray) ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$arg' (accepted: --dev --bench --ray)" >&2; exit 2 ;;
  esac
done

if [ -n "${VIRTUAL_ENV:-}" ]; then
  py="$VIRTUAL_ENV/bin/python"
else
  [ -x .venv/bin/python ] || "${RLAMD_PYTHON:-python3}" -m venv .venv
  py=.venv/bin/python
fi
pip() { "$py" -m pip --disable-pip-version-check "$@"; }

# The pin lives in one place, rlamd/doctor/install.py, which the doctor's advice uses too.
version="${RLAMD_TORCH_VERSION:-$(sed -n 's/^TORCH_PIN = "\(.*\)"$/\1/p' rlamd/doctor/install.py)}"
flavour="${RLAMD_TORCH:-}"
rocm_version=""
for f in "${ROCM_PATH:-/opt/rocm}/.info/version" /opt/rocm/.info/version; do
  if [ -r "$f" ]; then rocm_version=$(cut -d- -f1 "$f" | cut -d. -f1,2); break; fi
done
if [ -z "$flavour" ]; then
  if [ -n "$rocm_version" ] || command -v rocminfo >/dev/null 2>&1; then flavour=rocm
  elif command -v nvidia-smi >/dev/null 2>&1; then flavour=cuda
  else flavour=cpu; fi
fi

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
if [ -n "${RLAMD_TORCH_INDEX_URL:-}" ]; then
  index_args=(--index-url "$RLAMD_TORCH_INDEX_URL")
elif [ "$flavour" = rocm ]; then
  index_args=(--index-url "https://download.pytorch.org/whl/rocm${rocm_version:-6.4}")
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
      echo "setup: installing torch==$version for $flavour ${index_args[*]:-}"
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
