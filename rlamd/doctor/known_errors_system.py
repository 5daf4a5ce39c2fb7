"""Known errors of the machine around the GPU: install, driver, permissions, visibility, RCCL.

Ordered most specific first; every row's ``source`` is a public issue showing the message.
"""

from __future__ import annotations

from .known_errors_base import (
    CONTAINER_FIX,
    DOCTOR_FIX,
    GROUPS_FIX,
    OVERRIDE_FIX,
    ROCM_FIX,
    THEROCK_FIX,
    KnownError,
)

__all__ = ["SYSTEM_ERRORS"]

_CLEAN_VENV_FIX = (
    "Reinstall in a clean virtualenv so one torch and its own ROCm libraries are loaded: "
    f"`unset LD_LIBRARY_PATH` (no /opt/rocm*/lib in it), then {ROCM_FIX}"
)

SYSTEM_ERRORS: tuple[KnownError, ...] = (
    KnownError(
        "wsl",
        "ROCm under WSL: the GPU or this ROCm release is not supported there",
        (r"WSL environment detected", r"ROCR: unsupported GPU", r"microsoft-standard-WSL2"),
        (
            "ROCm on WSL needs AMD's WSL driver stack (Adrenalin on Windows plus the WSL "
            "usecase of amdgpu-install) and supports only the cards and Ubuntu/ROCm releases AMD "
            "lists for WSL; /dev/kfd does not exist there.",
            "A torch wheel from download.pytorch.org, which is built for native Linux, not WSL's "
            "runtime (librocdxg).",
        ),
        (
            "Follow AMD's WSL guide: https://rocm.docs.amd.com/projects/radeon-ryzen/en/latest/"
            "docs/install/installrad/wsl/install-radeon.html (`amdgpu-install -y "
            "--usecase=wsl,rocm --no-dkms`), and install the torch wheels it names, then "
            "`RLAMD_TORCH=skip bash scripts/setup.sh`.",
            "Check the card and Windows driver are on AMD's WSL list; otherwise train on native "
            "Linux or with `--device cpu`.",
        ),
        "https://github.com/ROCm/legacy-rocm-build/issues/3561",
    ),
    KnownError(
        "kfd_permission",
        "Cannot open /dev/kfd or /dev/dri (permissions)",
        (
            r"/dev/kfd.*(Permission denied|not permitted)",
            r"/dev/dri/\w+: Permission denied",
            r"amdgpu.*permission denied",
            r"is not member of (the )?(render|video) group",
        ),
        ("This user may not open the ROCm kernel driver's device files.",),
        (GROUPS_FIX, CONTAINER_FIX),
        "https://github.com/ROCm/legacy-rocm-build/issues/1211",
    ),
    KnownError(
        "kfd_missing",
        "The ROCm kernel driver has no GPU (/dev/kfd missing, ROCk module not loaded, PCIe atomics)",
        (
            r"ROCk module is NOT loaded",
            r"PCI rejects atomics",
            r"PCIE atomic ops is not supported",
            r"Failed to open /dev/kfd",
            r"adding custom device \"?/dev/kfd\"?: no such file",
            r"/dev/kfd.*No such file or directory",
            r"not supported in kfd",
            r"Unable to open /dev/kfd",
        ),
        (
            "The amdgpu driver is not loaded (not installed for this kernel, blacklisted, or "
            "Secure Boot refused the DKMS module), or the GPU is too old for ROCm's KFD.",
            "The slot or board does not pass PCIe atomics, which ROCm needs for GPUs before "
            "Vega/MI (dmesg: 'PCI rejects atomics'): a chipset-attached or x1 slot, an old board.",
            "Inside a container /dev/kfd was not passed, or the host has no AMD driver (Docker "
            "Desktop, WSL).",
        ),
        (
            "Load it: `sudo modprobe amdgpu`; if that fails install the driver "
            "(`sudo apt install amdgpu-dkms`) and read `sudo dmesg | grep -iE 'amdgpu|kfd'`.",
            "PCIe atomics: move the card to a CPU-attached x16 slot (`lspci -vvv | grep "
            "AtomicOps` shows what the path supports), or use a newer GPU or board.",
            CONTAINER_FIX,
            DOCTOR_FIX,
        ),
        "https://github.com/ROCm/legacy-rocm-build/issues/1506",
    ),
    KnownError(
        "hsa_out_of_resources",
        "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        (r"HSA_STATUS_ERROR_OUT_OF_RESOURCES", r"hsa api call failure"),
        (
            "The ROCm runtime could not create queues or map memory: usually no read/write access "
            "to /dev/kfd or /dev/dri/renderD*, or too many processes sharing one GPU.",
            "Two runtimes in one process (a second HSA user, e.g. another framework) or a GPU "
            "the kernel driver does not support for compute.",
        ),
        (
            GROUPS_FIX,
            "Run fewer GPU processes per card (e.g. fewer Ray learners with fractional GPUs).",
            CONTAINER_FIX,
        ),
        "https://github.com/tinygrad/tinygrad/issues/3608",
    ),
    KnownError(
        "visibility_conflict",
        "HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES disagree",
        (
            r"Incons[ia]stant values found",
            r"use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES",
            r"HIP_VISIBLE_DEVICES out of bounds",
            r"both ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES",
        ),
        (
            "Ray (2.45 and later) refuses ROCR_VISIBLE_DEVICES and requires HIP_VISIBLE_DEVICES "
            "and CUDA_VISIBLE_DEVICES to agree when both are set; torch counts "
            "HIP_VISIBLE_DEVICES after ROCR_VISIBLE_DEVICES has renumbered the GPUs.",
        ),
        (
            "Select GPUs with one variable: `unset ROCR_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES; "
            "export HIP_VISIBLE_DEVICES=0,1` (check ~/.bashrc, some ROCm guides add them).",
            "`python -m rlamd.doctor` lists these variables and WARNs on the combinations Ray "
            "refuses.",
        ),
        "https://github.com/ray-project/ray/issues/52701",
    ),
    KnownError(
        "invalid_ordinal",
        "Invalid device ordinal",
        (
            r"invalid device ordinal",
            r"hipErrorInvalidDevice\b",
            r"CUDA error: invalid device ordinal",
        ),
        (
            "The device index is not below the number of GPUs this process sees (visibility "
            "variables renumber devices from 0; Ray gives each learner its own).",
        ),
        (
            "Use an index the doctor lists (`--device hip:0` ...).",
            "With HIP_VISIBLE_DEVICES=2 the card is `hip:0` inside the process; do not set "
            "ROCR_VISIBLE_DEVICES as well.",
        ),
        "https://github.com/vllm-project/vllm/issues/12572",
    ),
    KnownError(
        "rccl_p2p",
        "RCCL cannot map memory between GPUs (peer-to-peer / IPC failure)",
        (
            r"hipIpc\w+ failed",
            r"transport/p2p\.cc.*NCCL WARN",
            r"NCCL WARN Cuda failure '?invalid argument",
            r"unhandled (cuda|hip) error",
            r"ncclUnhandledCudaError",
        ),
        (
            "Peer-to-peer access between the GPUs fails: the IOMMU or PCIe ACS blocks it, the "
            "host has no amdgpu-dkms driver (inbox kernel driver), or a container lacks "
            "--ipc=host / shared memory.",
        ),
        (
            "Bypass peer-to-peer to confirm: `export NCCL_P2P_DISABLE=1` (slower, copies through "
            "the host).",
            "On the host: install amdgpu-dkms, set the IOMMU to passthrough (kernel option "
            "`iommu=pt`), disable PCIe ACS in the BIOS; in containers add `--ipc=host "
            "--shm-size=16g`.",
            "See which transport fails: `export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P`.",
        ),
        "https://github.com/ROCm/rccl-tests/issues/120",
    ),
    KnownError(
        "collective_timeout",
        "RCCL/NCCL communication error or timeout between learners",
        (
            r"(RCCL|NCCL).*time(d)? ?out",
            r"Watchdog caught collective operation timeout",
            r"ProcessGroupNCCL.*[Tt]imeout",
            r"collective operation timeout",
            r"\bNCCL error\b",
            r"nccl(System|Remote|Internal)Error",
            r"NCCL WARN .*(Connect|[Ss]ocket|[Nn]et)",
            r"DistStoreError.*Timed out",
            r"Timed out .*waiting for clients",
            r"Timed out initializing process group",
        ),
        (
            "The learners cannot reach each other: RCCL (which reads the NCCL_ variables) picked "
            "the wrong network interface (docker0, a VPN, lo), or a firewall blocks the ports "
            "between the nodes.",
            "One learner died, hangs or is far slower (its node was lost, it ran out of memory, "
            "it never got its GPU), so the others wait on an all-reduce or on the process-group "
            "setup until ray.group_timeout_s (300 s by default) runs out.",
        ),
        (
            "Name the interface that carries the nodes' addresses, on every node before `ray "
            "start`: `export NCCL_SOCKET_IFNAME=eth0` (your name from `ip -br addr`; `^docker0,lo` "
            "excludes instead); CPU learners use gloo: `export GLOO_SOCKET_IFNAME=eth0`.",
            "See what RCCL does: `export NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=INIT,NET`) on "
            "every node, restart `ray start`, and read in the job's log which interface and "
            "transport each rank picked and which connection failed.",
            "Open the firewall between the nodes: the process-group port the run logs "
            "(`torch.distributed nccl group of N at ADDR:PORT`) and the TCP ports RCCL opens on "
            "its own; allow all TCP between the cluster's nodes.",
            "Check every learner is alive and sees its GPU: `ray status`, the job's log, and "
            "`python -m rlamd.doctor` on each node (Ray sets HIP_VISIBLE_DEVICES for each "
            "learner; ROCR_VISIBLE_DEVICES must not be set).",
            "If a learner legitimately needs longer (a slow first step, a large replay to fill), "
            "wait longer: `--set ray.group_timeout_s=900`.",
        ),
        "https://github.com/XPixelGroup/BasicSR/issues/737",
    ),
    KnownError(
        "amdsmi",
        "AMD SMI / ROCm SMI Python bindings missing (amdsmi, rocm_smi)",
        (
            r"name 'amdsmi' is not defined",
            r"No module named '(amdsmi|rocm_smi|pyrsmi)'",
            r"libamd_smi\.so",
            r"librocm_smi64\.so",
            r"Could not import AMDSMI",
            r"(Failed|Unable) to import (amdsmi|rocm_smi|pyrsmi)",
        ),
        (
            "torch on ROCm asks amdsmi for device counts and memory when pynvml (nvidia-ml-py) is "
            "installed; a package such as DeepSpeed pulls pynvml in on an AMD machine.",
            "The amdsmi Python package or libamd_smi.so of the host ROCm is not installed or "
            "does not match it.",
        ),
        (
            "Remove the NVIDIA bindings: `python -m pip uninstall -y pynvml nvidia-ml-py`.",
            "Or install the host's bindings: `python -m pip install /opt/rocm/share/amd_smi` "
            "(needs `sudo apt install amd-smi-lib`).",
        ),
        "https://github.com/pytorch/pytorch/issues/133259",
    ),
    KnownError(
        "therock_rocm_sdk",
        "AMD's TheRock wheels: the ROCm SDK packages are missing or do not match torch",
        (
            r"rocm_sdk[/\\.]",
            r"No module named '_?rocm_sdk",
            r"rocm_sdk_(core|libraries)",
            r"_rocm_init",
        ),
        (
            "torch from a TheRock index (rocm.nightlies.amd.com) loads its ROCm from the "
            "rocm-sdk-* wheels of the same build; they are missing, from another date, or from "
            "another gfx index.",
        ),
        (
            "Reinstall torch and its SDK from one index in one command, e.g. `python -m pip "
            "install --force-reinstall --pre torch --index-url "
            "https://rocm.nightlies.amd.com/v2/gfx1151/` (your gfx family's index), then "
            "`rocm-sdk test`.",
            "Or use PyTorch's own wheel: " + ROCM_FIX,
        ),
        "https://github.com/ROCm/TheRock/issues/2345",
    ),
    KnownError(
        "cuda_extension_on_rocm",
        "A CUDA build of a package was loaded by a ROCm torch (libtorch_cuda.so, libcudart)",
        (
            r"lib(torch_cuda|c10_cuda|cudart|cublas\w*|cudnn\w*|nvrtc|cusparseLt|nccl)[\w.-]*\.so"
            r"[.\d]*: cannot open shared object",
        ),
        (
            "torchvision, torchaudio or an extension (xformers, torch_scatter, bitsandbytes) was "
            "installed from PyPI as a CUDA build; a ROCm torch has libtorch_hip.so instead.",
        ),
        (
            "Install the companion packages from the same ROCm index as torch, e.g. `python -m "
            "pip install torchvision --index-url https://download.pytorch.org/whl/rocm7.2`, or "
            "build the extension against this torch.",
            "`python -m pip list | grep -iE 'torch|cu1|nvidia'` shows what came from PyPI.",
        ),
        "https://github.com/pytorch/pytorch/issues/139410",
    ),
    KnownError(
        "undefined_symbol",
        "undefined symbol: a library or extension built against another torch or ROCm",
        (r"undefined symbol",),
        (
            "A compiled extension (or a torch you built) was compiled against another torch "
            "release or ROCm version than the one now installed.",
            "System ROCm libraries (LD_LIBRARY_PATH=/opt/rocm*/lib) are loaded in place of the "
            "wheel's own, e.g. an older libamdhip64 or libhsa-runtime64.",
        ),
        (
            _CLEAN_VENV_FIX,
            "Rebuild the extension against this torch: `python -m pip install --no-build-isolation "
            "--force-reinstall --no-cache-dir PACKAGE`.",
        ),
        "https://github.com/ROCm/TheRock/issues/3466",
    ),
    KnownError(
        "missing_libs",
        "ROCm libraries not found",
        (
            r"lib(amdhip64|hsa-runtime64|rocblas|hipblas\w*|MIOpen|rccl|roctracer64|amd_comgr|"
            r"hiprtc|rocsolver|rocfft|rocrand|hipsparse\w*|c10_hip|torch_hip)[\w.-]*\.so[.\d]*: "
            r"cannot open shared object",
            r"librocm.*\.so.*cannot open shared object",
            r"libhsa-runtime64\.so.*cannot open",
        ),
        (
            "A ROCm build of PyTorch (or an extension) expects ROCm libraries it did not bring: a "
            "build made against the system ROCm, a half-removed install, or a ROCm major version "
            "(libamdhip64.so.6 vs .so.7) other than the one installed.",
        ),
        (_CLEAN_VENV_FIX, "Do not mix LD_LIBRARY_PATH entries of several ROCm versions."),
        "https://github.com/ROCm/TheRock/issues/1119",
    ),
    KnownError(
        "hip_version_mismatch",
        "Driver too old for the runtime (driver version is insufficient)",
        (
            r"hipErrorInsufficientDriver",
            r"driver version is insufficient",
            r"HIP runtime version.*mismatch",
        ),
        (
            "On an AMD machine this usually means a CUDA build of torch (its error names CUDA).",
            "The amdgpu kernel driver is older than the ROCm runtime of the wheel.",
        ),
        (
            f"{ROCM_FIX} Then `python -c 'import torch; print(torch.version.hip)'` must not print "
            "None.",
            "Update the amdgpu driver, or let scripts/setup.sh pick a wheel this driver runs "
            "(`bash scripts/setup.sh --dry-run` shows it).",
        ),
        "https://github.com/pytorch/pytorch/issues/51213",
    ),
    KnownError(
        "no_hip_gpus",
        "No HIP/CUDA GPUs are available to this ROCm build",
        (
            r"No HIP GPUs are available",
            r"No CUDA GPUs are available",
            r"no ROCm-capable device",
            r"hipErrorNoDevice",
        ),
        (
            "A consumer Radeon card this ROCm release does not list (the most common cause on "
            "Radeon cards): the runtime skips it, or sees it and fails later with "
            "hipErrorNoBinaryForGpu, unless HSA_OVERRIDE_GFX_VERSION names its family's listed "
            "ISA.",
            "The ROCm runtime cannot reach the GPU: driver not loaded, no access to /dev/kfd, or a "
            "visibility variable hiding every GPU.",
        ),
        (
            OVERRIDE_FIX,
            DOCTOR_FIX,
            "Unset HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES if they are "
            "empty or -1.",
            GROUPS_FIX,
        ),
        "https://github.com/pytorch/pytorch/issues/70036",
    ),
    KnownError(
        "cuda_not_available",
        "torch.cuda.is_available() is False / Torch not compiled with CUDA enabled",
        (
            r"torch\.cuda\.is_available\(\)\s*(is|returns|==)?\s*False",
            r"is_available\(\) (returns )?False",
            r"Torch not compiled with CUDA enabled",
            r"Found no NVIDIA driver",
        ),
        (
            "A CPU-only or CUDA build of PyTorch on an AMD machine (the most common mistake), or "
            "the ROCm build cannot reach the GPU (driver, permissions, visibility variables).",
        ),
        (
            f"{ROCM_FIX} Then `python -c 'import torch; print(torch.version.hip)'` must not print "
            "None.",
            DOCTOR_FIX,
        ),
        "https://github.com/wlsdml1114/diff-svc/issues/3",
    ),
    KnownError(
        "amdgpu_ids",
        "amdgpu.ids: No such file or directory (a harmless libdrm warning)",
        (r"amdgpu\.ids: No such file or directory",),
        (
            "libdrm looks up marketing names in amdgpu.ids at a path of the system it was built "
            "on; the wheel's copy is elsewhere. Only the card's name is affected.",
        ),
        (
            "Nothing to fix. To silence it: `sudo apt install libdrm-common` (provides "
            "/usr/share/libdrm/amdgpu.ids). If the GPU is not used, the cause is another error "
            "in the log.",
        ),
        "https://github.com/pytorch/pytorch/issues/132987",
    ),
    KnownError(
        "import_segfault",
        "Segmentation fault (often at import torch or the first GPU call)",
        (r"Segmentation fault", r"\bSIGSEGV\b", r"signal 11\b"),
        (
            "Two sets of ROCm libraries in one process: LD_LIBRARY_PATH pointing at /opt/rocm/lib, "
            "or another package loading its own HIP/HSA before torch.",
            "A broken nightly (e.g. TheRock gfx1151 builds of June 2026 crashed in HSA init) or "
            "an HSA_OVERRIDE_GFX_VERSION of the wrong family.",
        ),
        (
            _CLEAN_VENV_FIX,
            "Import torch first, and see where it dies: `python -X faulthandler -c 'import "
            'torch; torch.zeros(1, device="cuda")\'` with `AMD_LOG_LEVEL=4`.',
            OVERRIDE_FIX,
            THEROCK_FIX,
        ),
        "https://github.com/NixOS/nixpkgs/issues/278106",
    ),
    KnownError(
        "hsa_runtime_error",
        "Another ROCm runtime (HSA) error",
        (r"HSA_STATUS_ERROR_\w+", r"hsa_init\b.*fail"),
        ("The ROCm runtime failed below PyTorch; the name after HSA_STATUS_ERROR_ says how.",),
        (DOCTOR_FIX, "Read `sudo dmesg | grep -iE 'amdgpu|kfd'` for the driver's side."),
        "https://github.com/ROCm/ROCR-Runtime/issues/198",
    ),
)
