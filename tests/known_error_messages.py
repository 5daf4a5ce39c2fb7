"""Real error messages, copied verbatim from public issue trackers, one or more per known error.

Each entry is ``(URL of the issue it was copied from, the message)``. Paths, PIDs, addresses
and gfx names are as the reporter had them: the table must match the stable part only.
"""

from __future__ import annotations

MESSAGES: dict[str, list[tuple[str, str]]] = {
    "tensile_missing": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/2719",
            "rocBLAS error: Cannot read /opt/rocm-5.7.0/lib/rocblas/library/TensileLibrary.dat: "
            "Illegal seek for GPU arch : gfx1103",
        ),
        (
            "https://github.com/ROCm/rocBLAS/issues/1339",
            "rocBLAS error: Cannot read /home/redacted/venv/lib/python3.10/site-packages/torch/lib/"
            "rocblas/library/TensileLibrary.dat: Illegal seek",
        ),
        (
            "https://github.com/ROCm/AMDMIGraphX/pull/3517",
            "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: Illegal "
            "seek for GPU arch : gfx1201",
        ),
        (
            "https://github.com/brknsoul/ROCmLibs/issues/4",
            "rocBLAS error: Cannot read C:\\Program Files\\AMD\\ROCm\\6.1\\bin\\/rocblas/library/"
            "TensileLibrary.dat: No such file or directory for GPU arch : gfx1103",
        ),
    ],
    "invalid_isa": [
        (
            "https://github.com/ROCm/TheRock/issues/2579",
            ":0:rocdevice.cpp            :3596: 998574369737 us:  Callback: Queue 0x7daa52e00000 "
            "aborting with error : HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture "
            "is invalid. code: 0x100f",
        ),
    ],
    "no_binary_for_gpu": [
        (
            "https://github.com/pytorch/pytorch/issues/73534",
            "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
        ),
        (
            "https://github.com/pytorch/pytorch/issues/53738",
            "hipErrorNoBinaryForGpu: Coudn't find binary for current devices!",
        ),
        (
            "https://github.com/etched-ai/open-oasis/issues/27",
            "RuntimeError: HIP error: invalid device function  \nHIP kernel errors might be "
            "asynchronously reported at some other API call, so the stacktrace below might be "
            "incorrect.",
        ),
        (
            "https://github.com/pytorch/pytorch/issues/164346",
            "torch.AcceleratorError: HIP error: invalid device function\nSearch for "
            "`hipErrorInvalidDeviceFunction' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
            "group__HIPRT__TYPES.html for more information.",
        ),
    ],
    "miopen_db": [
        (
            "https://github.com/pytorch/pytorch/issues/60477",
            "ROCm miopenStatusInternalError /MIOpen/src/sqlite_db.cpp:109: open memvfs: unable to "
            "open database file",
        ),
        (
            "https://github.com/ROCm/tensorflow-upstream/issues/1419",
            "MIOpen(HIP): Warning [FindWinogradSolutions] /root/driver/MLOpen/src/sqlite_db.cpp:"
            "212: Internal error while accessing SQLite database: disk I/O error",
        ),
        (
            "https://github.com/ROCm/MIOpen/issues/1427",
            "MIOpen(HIP): Warning [SQLiteBase] Unable to read system database file:/opt/rocm/"
            "miopen/share/miopen/db/gfx906_60.kdb Performance may degrade\nterminate called after "
            "throwing an instance of 'boost::filesystem::filesystem_error'`  \nwhat():  "
            "boost::filesystem::permissions: No such file or directory: "
            '"/home/ssml/singh/.config/miopen//gfx906_60.HIP.2_11_0_993628deb.ufdb.txt"',
        ),
    ],
    "miopen_failed": [
        (
            "https://github.com/ROCm/MIOpen/issues/3726",
            "RuntimeError: miopenStatusUnknownError convolutionocl.cpp:790: Forward Convolution "
            "cannot be executed due to incorrect params",
        ),
        (
            "https://github.com/ryujaehun/pytorch-gpu-benchmark/issues/19",
            "MIOpen(HIP): Warning [SQLiteBase] Unable to read system database file:/opt/rocm/"
            "miopen/share/miopen/db/gfx900_64.kdb Performance may degrade\nMIOpen(HIP): Error "
            "[SetIsaName] 'amd_comgr_action_info_set_isa_name(handle, isa.c_str())' "
            "amdgcn-amd-amdhsa--gfx900:sramecc-:xnack-: INVALID_ARGUMENT (2)\nMIOpen(HIP): Error "
            "[BuildOcl] comgr status = INVALID_ARGUMENT (2)\nMIOpen(HIP): Warning [BuildOcl] "
            "amdgcn-amd-amdhsa--gfx900:sramecc-:xnack-\nMIOpen Error: /MIOpen/src/hipoc/"
            "hipoc_program.cpp:286: Code object build failed. Source: MIOpenIm2d2Col.cl",
        ),
    ],
    "out_of_memory": [
        (
            "https://github.com/ROCm/TheRock/issues/1054",
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 16.00 GiB. GPU 0 has a "
            "total capacity of 15.24 GiB of which 15.09 GiB is free. Of the allocated memory 0 "
            "bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If "
            "reserved but unallocated memory is large try setting "
            "PYTORCH_HIP_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
        ),
        (
            "https://github.com/keras-team/keras/issues/13889",
            "E tensorflow/stream_executor/rocm/rocm_driver.cc:600] failed to allocate 890.06M "
            "(933298432 bytes) from device: HIP_ERROR_OutOfMemory",
        ),
    ],
    "memory_access_fault": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/5051",
            "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address "
            "0x7f2a53193000. Reason: Page not present or supervisor privilege.",
        ),
    ],
    "hsa_exception": [
        (
            "https://github.com/iree-org/iree/issues/17872",
            ":0:rocdevice.cpp            :2893: 90021033577 us: [pid:192145 tid:0x76fa7d3ff640] "
            "Callback: Queue 0x76f676200000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An "
            "HSAIL operation resulted in a hardware exception. code: 0x1016",
        ),
        (
            "https://github.com/pytorch/pytorch/pull/173791",
            ":0:rocdevice.cpp            :3580: 4165352498983 us:\nCallback: Queue 0x7186a0e00000 "
            "aborting with error :\nHSA_STATUS_ERROR_EXCEPTION:\nAn HSAIL operation resulted in a "
            "hardware exception.\ncode: 0x1016",
        ),
    ],
    "gpu_hang": [
        (
            "https://github.com/pytorch/pytorch/issues/75642",
            "Apr 12 00:54:42 hostname kernel: [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring "
            "gfx_0.0.0 timeout, signaled seq=159760, emitted seq=159762",
        ),
        (
            "https://github.com/ROCm/xformers/issues/14",
            "[ 2742.462312] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring page1 timeout, "
            "signaled seq=2216, emitted seq=2218",
        ),
    ],
    "hipblaslt_unsupported": [
        (
            "https://github.com/ROCm/rocm-libraries/issues/780",
            "UserWarning: Attempting to use hipBLASLt on an unsupported architecture! Overriding "
            "blas backend to hipblas",
        ),
    ],
    "miopen_kdb_missing": [
        (
            "https://github.com/ROCm/MIOpen/issues/2123",
            "MIOpen(HIP): Warning [SQLiteBase] Missing system database file: gfx1030_12.kdb "
            "Performance may degrade. Please follow instructions to install: "
            "https://github.com/ROCmSoftwarePlatform/MIOpen#installing-miopen-kernels-package",
        ),
    ],
    "wsl": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/3561",
            "WSL environment detected.\nhsa api call failure at: "
            "/long_pathname_so_that_rpms_can_package_the_debug_info/src/rocminfo/rocminfo.cc:1306\n"
            "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
            "necessary resources. This error may also occur when the core runtime library needs "
            "to spawn threads or create internal OS-specific events.",
        ),
    ],
    "kfd_permission": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/1211",
            "Unable to open /dev/kfd read-write: Operation not permitted",
        ),
        (
            "https://github.com/viebrix/pytorch-gfx803-for-Whisper/issues/1",
            "Unable to open /dev/kfd read-write: Permission denied",
        ),
        (
            "https://github.com/ROCm/amdsmi/issues/184",
            "/dev/dri/card1: Permission denied; owner=root(0):video(39);",
        ),
    ],
    "kfd_missing": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/1506",
            "ROCk module is NOT loaded, possibly no GPU devices",
        ),
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/1893",
            "docker: Error response from daemon: error gathering device information while adding "
            'custom device "/dev/kfd": no such file or directory.',
        ),
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/2232",
            "[    3.548555] kfd kfd: amdgpu: PITCAIRN  not supported in kfd",
        ),
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/1214",
            "[    7.026427] kfd kfd: amdgpu: skipped device 1002:67df, PCI rejects atomics",
        ),
    ],
    "hsa_out_of_resources": [
        (
            "https://github.com/tinygrad/tinygrad/issues/3608",
            "RuntimeError: HSA Error 4104: HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed "
            "to allocate the necessary resources. This error may also occur when the core runtime "
            "library needs to spawn threads or create internal OS-specific events.",
        ),
    ],
    "visibility_conflict": [
        (
            "https://github.com/ray-project/ray/issues/52701",
            "AssertionError: Inconsistant values found. Please use either HIP_VISIBLE_DEVICES or "
            "CUDA_VISIBLE_DEVICES.",
        ),
    ],
    "invalid_ordinal": [
        (
            "https://github.com/vllm-project/vllm/issues/12572",
            "RuntimeError: HIP error: invalid device ordinal",
        ),
    ],
    "rccl_p2p": [
        (
            "https://github.com/ROCm/rccl-tests/issues/120",
            "guest:5161:5196 [1] /longer_pathname_so_that_rpms_can_support_packaging_the_debug_"
            "info_for_all_os_profiles/src/out/ubuntu-22.04/22.04/build/rccl/hipify/src/transport/"
            "p2p.cc:239 NCCL WARN hipIpcGetMemHandle failed : invalid argument",
        ),
        (
            "https://github.com/ROCm/rccl/issues/1454",
            "UVOSLinux:19402:19419 [0] /usr/src/debug/rccl/build/hipify/src/transport/p2p.cc:237 "
            "NCCL WARN Cuda failure 'invalid argument'",
        ),
    ],
    "collective_timeout": [
        (
            "https://github.com/XPixelGroup/BasicSR/issues/737",
            "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, "
            "NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds "
            "before timing out.",
        ),
    ],
    "amdsmi": [
        (
            "https://github.com/pytorch/pytorch/issues/133259",
            "NameError: name 'amdsmi' is not defined",
        ),
        (
            "https://github.com/vllm-project/vllm/issues/24576",
            "[Bug]: AMD ROCM6.4.2 No module named 'amdsmi' No module named 'libtpu' No module "
            "named 'intel_extension_for_pytorch'",
        ),
        (
            "https://github.com/pytorch/pytorch/pull/188724",
            "Unable to find libamd_smi.so library try installing amd-smi-lib from your package "
            "manager",
        ),
    ],
    "therock_rocm_sdk": [
        (
            "https://github.com/ROCm/TheRock/issues/2345",
            'Traceback (most recent call last):\n  File "/scratch/test-env/lib/python3.12/'
            'site-packages/rocm_sdk/__init__.py", line 34, in find_libraries\n    lib_entry = '
            "_dist_info.ALL_LIBRARIES[shortname]\n                ~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^^^^"
            "\nKeyError: 'hipsparselt'",
        ),
    ],
    "cuda_extension_on_rocm": [
        (
            "https://github.com/pytorch/pytorch/issues/139410",
            "OSError: libtorch_cuda.so: cannot open shared object file: No such file or directory",
        ),
    ],
    "undefined_symbol": [
        (
            "https://github.com/ROCm/TheRock/issues/3466",
            "ImportError: /usr/local/lib64/python3.13/site-packages/torch/lib/libtorch_hip.so: "
            "undefined symbol: _ZNK2at10TensorBase14const_data_ptrIN3c104HalfELi0EEEPKT_v",
        ),
        (
            "https://github.com/Looong01/pyg-rocm-build/issues/18",
            "OSError: /opt/rocm-7.1.1/lib/libamdhip64.so.7: undefined symbol: "
            "hsa_amd_memory_get_preferred_copy_engine, version ROCR_1",
        ),
    ],
    "missing_libs": [
        (
            "https://github.com/ROCm/TheRock/issues/1119",
            "2025-07-24T19:49:48.0375552Z ImportError: libamdhip64.so.7: cannot open shared object "
            "file: No such file or directory",
        ),
        (
            "https://github.com/Looong01/pyg-rocm-build/issues/1",
            "OSError: libc10_hip.so: cannot open shared object file: No such file or directory",
        ),
    ],
    "hip_version_mismatch": [
        (
            "https://github.com/pytorch/pytorch/issues/51213",
            "cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version "
            "at /pytorch/aten/src/THC/THCGeneral.cpp:47",
        ),
    ],
    "no_hip_gpus": [
        (
            "https://github.com/pytorch/pytorch/issues/70036",
            "RuntimeError: No HIP GPUs are available",
        ),
        ("https://github.com/ORNL/HydraGNN/pull/510", "RuntimeError: No CUDA GPUs are available"),
        (
            "https://github.com/pytorch/pytorch/issues/70036",
            "RuntimeError: HIP error: hipErrorNoDevice",
        ),
    ],
    "cuda_not_available": [
        (
            "https://github.com/wlsdml1114/diff-svc/issues/3",
            "AssertionError: Torch not compiled with CUDA enabled",
        ),
    ],
    "amdgpu_ids": [
        (
            "https://github.com/pytorch/pytorch/issues/132987",
            "amdgpu.ids: No such file or directory",
        ),
    ],
    "import_segfault": [
        (
            "https://github.com/NixOS/nixpkgs/issues/278106",
            ">>> import scipy.optimize\n>>> import torch\nSegmentation fault (core dumped)",
        ),
    ],
    # Answered by the HSA status table (rlamd/doctor/codes/hsa.toml) since the catch-all
    # "another HSA error" row gave way to it.
    "hsa:HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS": [
        (
            "https://github.com/ROCm/ROCR-Runtime/issues/198",
            "Failure to load binary image ... Error in hsa_executable_load_code_object: "
            "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: The arguments passed to a functions are not "
            "compatible.",
        ),
    ],
    # The kernel log's side of the same fault: the driver-layer row (the process itself
    # prints "Memory access fault by GPU", the first entry of memory_access_fault).
    "gpu_page_fault_dmesg": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/5051",
            "Jan 09 18:55:45 alexpc kernel: amdgpu 0000:0b:00.0: amdgpu: [gfxhub] page fault "
            "(src_id:0 ring:24 vmid:8 pasid:32792)",
        ),
    ],
    # Was kfd_missing's; the /dev/kfd ENOMEM row (groups, unsupported card, PCIe atomics)
    # now names it more precisely.
    "kfd_open_enomem": [
        (
            "https://github.com/ROCm/legacy-rocm-build/issues/1148",
            "ROCk module is loaded\nUnable to open /dev/kfd read-write: Cannot allocate memory\n"
            "tolyprog is member of render group\nhsa api call failure at: /home/tolyprog/.cache/"
            "yay/rocminfo/src/rocminfo-rocm-3.5.0/rocminfo.cc:1142\nCall returned "
            "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
            "resources. This error may also occur when the core runtime library needs to spawn "
            "threads or create internal OS-specific events.",
        ),
    ],
}
