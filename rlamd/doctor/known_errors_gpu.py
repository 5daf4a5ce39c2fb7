"""Known errors of the GPU itself: kernels for the card, rocBLAS/MIOpen, memory, faults, hangs.

Ordered most specific first; every row's ``source`` is a public issue showing the message.
"""

from __future__ import annotations

from .known_errors_base import OVERRIDE_FIX, ROCM_FIX, THEROCK_FIX, KnownError

__all__ = ["GPU_ERRORS"]

_MIOPEN_DB_FIX = (
    "Give MIOpen a writable local folder of its own, one per process or job: `export "
    "MIOPEN_USER_DB_PATH=/tmp/miopen-$USER-$$ MIOPEN_CUSTOM_CACHE_DIR=/tmp/miopen-$USER-$$` "
    "(on a cluster: node-local scratch, not a network home), then start again."
)
_SERIALIZE_FIX = (
    "Find the failing kernel: rerun with `AMD_SERIALIZE_KERNEL=3 AMD_LOG_LEVEL=1` (ROCm's "
    "CUDA_LAUNCH_BLOCKING) so the error is reported at the kernel that caused it."
)

GPU_ERRORS: tuple[KnownError, ...] = (
    KnownError(
        "tensile_missing",
        "rocBLAS/hipBLASLt has no Tensile kernels for this GPU (TensileLibrary*.dat)",
        (
            r"Cannot read \S*TensileLibrary\S*\.dat",
            r"TensileLibrary\S*\.dat:? (Illegal seek|No such file)",
            r"Illegal seek for GPU arch",
            r"Could not initialize Tensile",
            r"rocBLAS error: .*GPU arch",
            r"(rocBLAS|hipBLASLt|rocblaslt) (error|warning):? .*Tensile",
        ),
        (
            "The wheel's rocBLAS (or hipBLASLt) ships Tensile kernels for the listed gfx only "
            "(torch/lib/rocblas/library/TensileLibrary_lazy_gfx*.dat); a consumer card such as "
            "gfx1031/gfx1032/gfx1103 has none, and rocBLAS aborts the process at the first "
            "matrix multiply.",
            "HSA_OVERRIDE_GFX_VERSION is unset, or names another family's ISA.",
        ),
        (
            OVERRIDE_FIX,
            THEROCK_FIX,
            "`python -m rlamd.doctor` lists the gfx names your rocBLAS has kernels for (the "
            "'rocBLAS kernels' row) and rlamd's preflight refuses such a GPU before training.",
        ),
        "https://github.com/ROCm/rocBLAS/issues/1339",
    ),
    KnownError(
        "invalid_isa",
        "The code object's ISA is not the GPU's (HSA_STATUS_ERROR_INVALID_ISA)",
        (r"HSA_STATUS_ERROR_INVALID_ISA", r"instruction set architecture is invalid"),
        (
            "Kernels built for another gfx were loaded: an HSA_OVERRIDE_GFX_VERSION of the wrong "
            "family, or a wheel built for a neighbouring gfx (gfx110X wheels on a gfx1103 APU).",
        ),
        (
            "Use your family's override or none: " + OVERRIDE_FIX,
            THEROCK_FIX,
        ),
        "https://github.com/ROCm/TheRock/issues/2579",
    ),
    KnownError(
        "no_binary_for_gpu",
        "No kernels for this GPU's architecture (hipErrorNoBinaryForGpu)",
        (
            r"hipErrorNoBinaryForGpu",
            r"(Unable to find|Coudn't find|Couldn't find) (code object|binary) for (all )?current devices",
            r"no kernel image is available",
            r"invalid device function",
            r"hipErrorInvalidDeviceFunction",
            r"hipErrorInvalidImage",
            r"device kernel image is invalid",
        ),
        (
            "The PyTorch wheel was not built for your GPU's gfx architecture (common on consumer "
            "Radeon cards such as gfx1031/gfx1032/gfx1101/gfx1102/gfx1103, and on new ones such as "
            "gfx1151/gfx1201 with an older wheel).",
            "A compiled extension (flash-attention, bitsandbytes, a custom op) was built for other "
            "gfx targets than this card.",
        ),
        (
            "Run `python -m rlamd.doctor` to see your gfx name and the architectures your torch "
            "ships.",
            OVERRIDE_FIX,
            "Or install a pinned ROCm wheel whose targets list your gfx (`python -c 'import "
            "torch; print(torch.cuda.get_arch_list())'` shows them; for another release give "
            "scripts/setup.sh `RLAMD_TORCH_INDEX_URL=https://download.pytorch.org/whl/rocmX.Y`). "
            f"{ROCM_FIX}",
            THEROCK_FIX,
        ),
        "https://github.com/pytorch/pytorch/issues/73534",
    ),
    KnownError(
        "miopen_db",
        "MIOpen cannot open or write its database / cache (sqlite_db.cpp)",
        (
            r"sqlite_db\.cpp",
            r"open memvfs",
            r"SQLite database: (disk I/O error|locking protocol|database is locked)",
            r"unable to open database file",
            r"\.config/miopen/",
            r"\.u?fdb\.txt",
            r"MIOpen.*(user|find) ?db",
        ),
        (
            "MIOpen's user database and kernel cache (~/.config/miopen, ~/.cache/miopen) are on a "
            "slow or network file system, not writable, or shared by several processes at once "
            "(Ray learners, a SLURM array): SQLite fails and MIOpen reports "
            "miopenStatusInternalError.",
            "The home folder is read-only or missing in a container or batch job.",
        ),
        (
            _MIOPEN_DB_FIX,
            "Check the folders are writable: `mkdir -p ~/.config/miopen ~/.cache/miopen && touch "
            "~/.config/miopen/x && rm ~/.config/miopen/x`; in a container give it a writable HOME.",
            "If the database is corrupt after a crash, remove it: `rm -rf ~/.config/miopen "
            "~/.cache/miopen` (it is rebuilt).",
        ),
        "https://github.com/pytorch/pytorch/issues/60477",
    ),
    KnownError(
        "miopen_failed",
        "MIOpen failed (miopenStatusUnknownError / InternalError)",
        (
            r"miopenStatus(UnknownError|InternalError|NotImplemented|BadParm|AllocFailed)",
            r"MIOpen Error:",
            r"MIOpen\(HIP\): Error",
            r"Code object build failed",
            r"HIPRTC_ERROR_\w+",
        ),
        (
            "MIOpen has no working kernel for this convolution on this gfx (unlisted card, or an "
            "HSA_OVERRIDE_GFX_VERSION of the wrong family) and failed to build one.",
            "Its database or cache is not writable or is shared (see the sqlite_db.cpp error).",
            "Out of memory while searching for a kernel.",
        ),
        (
            "Check the card and the override first: `python -m rlamd.doctor`. " + OVERRIDE_FIX,
            _MIOPEN_DB_FIX,
            "Let MIOpen fall back to its simplest kernels: `export MIOPEN_FIND_MODE=FAST` (or "
            "disable cuDNN/MIOpen convolutions in your code with "
            "`torch.backends.cudnn.enabled = False`).",
            "See what it tried: `export MIOPEN_ENABLE_LOGGING=1 MIOPEN_LOG_LEVEL=5`.",
        ),
        "https://github.com/ROCm/MIOpen/issues/3726",
    ),
    KnownError(
        "out_of_memory",
        "GPU out of memory",
        (
            r"HIP out of memory",
            r"CUDA out of memory",
            r"OutOfMemoryError",
            r"hipErrorOutOfMemory",
            r"HIP_ERROR_OutOfMemory",
            r"(HIP|CUDA) error: out of memory",
            r"hipErrorMemoryAllocation",
        ),
        (
            "The model, batch or replay buffer does not fit in the GPU's free memory.",
            "Other processes hold GPU memory; fragmentation leaves no large free block.",
            "On an APU (gfx1151 Strix Halo, gfx1103) the GPU sees only the VRAM carved out in "
            "the BIOS and the GTT limit of the kernel, not all system memory.",
        ),
        (
            "Lower the batch size or the replay size: `--set dqn.buffer_size=200000` (7 GB per 1M "
            "Atari transitions).",
            "See what holds memory with `rocm-smi --showmemuse` or `amd-smi metric -m`.",
            "Reduce fragmentation: `export PYTORCH_HIP_ALLOC_CONF=expandable_segments:True` before "
            "starting.",
            "APU: raise the VRAM carve-out in the BIOS, or the GTT size with the kernel option "
            "`amdgpu.gttsize=` / `ttm.pages_limit=`.",
        ),
        "https://github.com/ROCm/TheRock/issues/1054",
    ),
    KnownError(
        "memory_access_fault",
        "Memory access fault by GPU (page fault; the process is aborted)",
        (
            r"Memory access fault by GPU",
            r"Page not present or supervisor privilege",
            r"HSA_STATUS_ERROR_MEMORY_(APERTURE_VIOLATION|FAULT)",
            r"hipErrorIllegalAddress",
            r"an illegal memory access",
            r"amdgpu: \[\w+hub\] page fault",
        ),
        (
            "A kernel touched memory it does not own: often an HSA_OVERRIDE_GFX_VERSION that does "
            "not fit the card (RDNA3 run as 10.3.0, gfx1103 run as 11.0.0), an amdgpu kernel "
            "driver too old for the wheel, or a bug in a kernel or extension.",
            "An index out of range in a gather/embedding on the GPU (device-side asserts are off "
            "on ROCm by default).",
        ),
        (
            "Check the override matches the card's family (`python -m rlamd.doctor`), or unset "
            "it and use a wheel built for the card. " + THEROCK_FIX,
            _SERIALIZE_FIX,
            "Update the amdgpu kernel driver to the one of the wheel's ROCm (`python -m "
            "rlamd.doctor` shows both); read `sudo dmesg | grep -i amdgpu` for the faulting "
            "process.",
        ),
        "https://github.com/ROCm/legacy-rocm-build/issues/5051",
    ),
    KnownError(
        "hsa_exception",
        "GPU hardware exception / kernel launch failure (HSA_STATUS_ERROR_EXCEPTION)",
        (
            r"HSA_STATUS_ERROR_EXCEPTION",
            r"An HSAIL operation resulted in a hardware exception",
            r"hipErrorLaunchFailure",
            r"unspecified launch failure",
            r"Queue 0x[0-9a-f]+ aborting with error",
        ),
        (
            "A kernel hit an illegal instruction or a device-side trap: a wrong-family "
            "HSA_OVERRIDE_GFX_VERSION, a compiler/Triton bug for this gfx, or an out-of-range "
            "index (assertions trap on ROCm).",
            "Mixed ROCm libraries: system /opt/rocm libraries loaded into a wheel's process.",
        ),
        (
            _SERIALIZE_FIX,
            "Check the override and the wheel's targets with `python -m rlamd.doctor`; unset "
            "LD_LIBRARY_PATH entries pointing at another ROCm.",
            "rlamd's Triton replay kernels: `export RLAMD_TREE_BACKEND=torch` rules them out.",
        ),
        "https://github.com/iree-org/iree/issues/17872",
    ),
    KnownError(
        "gpu_hang",
        "The GPU hung and the driver reset it (ring timeout)",
        (
            r"ring \S+ timeout",
            r"amdgpu_job_timedout",
            r"GPU reset begin",
            r"VRAM is lost due to GPU reset",
            r"device wedged",
            r"launch timed out and was terminated",
            r"hipErrorLaunchTimeOut",
            r"MES failed to respon",
        ),
        (
            "A kernel ran past the driver's timeout (a desktop on the same GPU has a short one), "
            "or the GPU locked up: out-of-range memory use, unstable clocks or power, or a driver "
            "bug. Every process on the GPU loses its work.",
        ),
        (
            "Train on a GPU that drives no display, or raise the compute timeout (kernel option "
            "`amdgpu.lockup_timeout=`); update the amdgpu driver and firmware.",
            _SERIALIZE_FIX,
            "Resume from the last checkpoint: `python -m rlamd.train --resume RUN`.",
        ),
        "https://github.com/pytorch/pytorch/issues/75642",
    ),
    KnownError(
        "hipblaslt_unsupported",
        "hipBLASLt not supported on this GPU (torch falls back to rocBLAS)",
        (r"hipBLASLt on an? unsupported architecture", r"Overriding blas backend to hipblas"),
        (
            "hipBLASLt has kernels for a few architectures only (MI200/MI300 class, some "
            "RDNA3/4); torch warns and uses rocBLAS instead. Harmless unless it is followed by "
            "a rocBLAS error.",
        ),
        (
            "Nothing to do; to silence it pick rocBLAS yourself: `export "
            "TORCH_BLAS_PREFER_HIPBLASLT=0`.",
            "If an HSA_OVERRIDE_GFX_VERSION makes the card look unsupported, check it matches "
            "the card's family (`python -m rlamd.doctor`).",
        ),
        "https://github.com/ROCm/rocm-libraries/issues/780",
    ),
    KnownError(
        "miopen_kdb_missing",
        "MIOpen has no precompiled kernel database for this GPU (a warning)",
        (r"(Missing|Unable to read) system database file", r"\.kdb Performance may degrade"),
        (
            "The wheel's MIOpen ships no kernel database (.kdb) for this gfx/CU count; MIOpen "
            "compiles kernels on first use instead. Slow first steps, not an error.",
        ),
        (
            "Nothing to fix: the compiled kernels are cached in ~/.cache/miopen (or "
            "MIOPEN_CUSTOM_CACHE_DIR), so later runs start faster.",
            "If it is followed by an MIOpen error, the cause is that error; a wrong "
            "HSA_OVERRIDE_GFX_VERSION also shows up here as a database for another gfx.",
        ),
        "https://github.com/ROCm/MIOpen/issues/2123",
    ),
)
