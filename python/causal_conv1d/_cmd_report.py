"""`causal-conv1d report`: everything the package knows about itself, as JSON (for bug reports;
`doctor` is the readable diagnosis)."""

from __future__ import annotations

import json
import os
import platform
import sys

HELP = "JSON description of the installation, library and backends"

ENVIRONMENT = ("CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT", "CAUSAL_CONV1D_LIBRARY", "CAUSAL_CONV1D_TORCH_LIBRARY",
               "CAUSAL_CONV1D_LOG_LEVEL", "CAUSAL_CONV1D_NUM_THREADS", "CAUSAL_CONV1D_CACHE_DIR",
               "CAUSAL_CONV1D_CUDA_DRIVER", "CAUSAL_CONV1D_NVRTC", "CAUSAL_CONV1D_NVRTC_SEARCH_PATH")


def add_arguments(parser) -> None:
    pass


def torch_facts() -> dict:
    import torch

    from . import _lib

    version, cuda, abi = _lib.torch_facts()
    facts = {"version": version, "cuda": cuda, "cxx11_abi": None if abi < 0 else bool(abi),
             "cuda_available": torch.cuda.is_available(),
             "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0}
    if facts["cuda_available"]:
        facts["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(facts["cuda_device_count"])]
    return facts


def build_report() -> dict:
    import causal_conv1d
    from . import _dispatch, _lib, _ops, _pack, _torch_lib

    lib = _lib.library()
    report = {
        "package": {
            "name": "causal-conv1d",
            "version": causal_conv1d.package_version,
            "api_version": causal_conv1d.__version__,
            "path": os.path.dirname(os.path.abspath(causal_conv1d.__file__)),
            "library_path": None if lib is None else lib.path,
            "library_version": None if lib is None else lib.version,
            "library_abi_version": None if lib is None else lib.abi_version,
            "expected_abi_version": _lib.ABI_VERSION,
            "library_error": _lib.load_error(),
            "library_paths_tried": _lib.tried_paths(),
            "torch_custom_op": _ops.USE_CUSTOM_OP,
            "torch_library": _torch_lib.status(),
            "arg_packer": _pack.c_packer_state(),
        },
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "torch": torch_facts(),
        "environment": {k: os.environ.get(k) for k in ENVIRONMENT},
        "dispatch": {},
        "library": None,
    }
    for device in ("cpu", "cuda"):
        try:
            report["dispatch"][device] = _dispatch.explain(device)
        except Exception as e:  # a bad CAUSAL_CONV1D_BACKEND, say
            report["dispatch"][device] = {"error": f"{type(e).__name__}: {e}"}
    if lib is not None:
        try:
            report["library"] = lib.report()
        except Exception as e:
            report["library"] = {"error": f"{type(e).__name__}: {e}"}
    return report


def run(args) -> int:
    print(json.dumps(build_report(), indent=2, default=str))
    return 0
