"""`causal-conv1d precompile`: compile the kernels of a GPU fleet on a machine without a GPU.

    causal-conv1d precompile --out DIR [--arch 75,80,86,89,90,100,120] [--op fwd,update]
                             [--dtype bf16,fp32] [--width 4] [--driver-cuda 12.8] [--jobs N] [--json]

Every requested variant is compiled, for each arch, with the NVRTC, target and options a GPU node
with that arch would choose (libcc1d's cc1d_precompile), in parallel, into DIR. GPU nodes running
the same image use DIR as a read-only tier: CAUSAL_CONV1D_CACHE_PATH=DIR. DIR/manifest.json lists
the NVRTC per arch, the assumptions, every variant (key, bytes) and the throughput; DIR/targets-v1
lets a node with no usable NVRTC load the kernels all the same.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import _lib

DTYPES = {"fp32": _lib.FLOAT32, "fp16": _lib.FLOAT16, "bf16": _lib.BFLOAT16}


def _ints(text: str, what: str) -> list:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}: expected comma-separated integers, got {text!r}") from None


def _names(text: str, allowed, what: str) -> list:
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise argparse.ArgumentTypeError(f"{what}: unknown {', '.join(map(repr, bad))}; expected some of "
                                         f"{', '.join(allowed)}")
    return names


def driver_version(text: str) -> int:
    """'12.8' (the CUDA version nvidia-smi shows) or 12080 (cuDriverGetVersion) -> 12080."""
    try:
        if "." in text:
            major, minor = text.split(".", 1)
            return int(major) * 1000 + int(minor) * 10
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--driver-cuda: expected a CUDA version such as 12.8 (or 12080), "
                                         f"got {text!r}") from None


def cmd_precompile(args) -> int:
    lib = _lib.library()
    if lib is None:
        print(f"causal-conv1d precompile: {_lib.load_error()}", file=sys.stderr)
        return 1
    try:
        archs = _ints(args.arch, "--arch") if args.arch else []
        widths = _ints(args.width, "--width") if args.width else []
        ops = _names(args.op, lib.names("cc1d_op_name"), "--op") if args.op else []
        dtypes = _names(args.dtype, tuple(DTYPES), "--dtype") if args.dtype else []
    except argparse.ArgumentTypeError as e:
        print(f"causal-conv1d precompile: {e}", file=sys.stderr)
        return 2
    try:
        manifest = lib.precompile(args.out, archs=archs, ops=[_lib.OP_IDS[o] for o in ops],
                                  dtypes=[DTYPES[d] for d in dtypes], widths=widths,
                                  driver_version=args.driver_cuda, torch_cuda_major=args.torch_cuda, jobs=args.jobs)
    except _lib.LibraryError as e:
        print(f"causal-conv1d precompile: {e}", file=sys.stderr)
        return 2 if e.status == _lib.ERR_INVALID_ARGUMENT else 1
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    assumed = manifest["toolchain"]["assumed"]
    print(f"precompile into {args.out} (driver CUDA {assumed['driver_version'] // 1000}."
          f"{assumed['driver_version'] % 1000 // 10}, torch CUDA {assumed['torch_cuda_major'] or 'none'}):")
    for a in manifest["archs"]:
        print(f"  sm_{a['arch']}: {a['target']} with {a['compiler']}")
    t = manifest["totals"]
    print(f"{t['variants']} variants ({t['compiled']} compiled, {t['already_present']} already there), "
          f"{t['bytes'] / 1e6:.1f} MB, in {t['wall_s']:.1f} s on {t['jobs']} threads: "
          f"{t['variants_per_s']:.2f} variants/s, {t['variants_per_s_per_core']:.2f} per core "
          f"({t['variants_per_cpu_s']:.2f} per CPU second)")
    print(f"manifest: {args.out}/manifest.json")
    print(f"GPU nodes with this image: CAUSAL_CONV1D_CACHE_PATH={args.out} (a node without NVRTC loads them too)")
    return 0


HELP = "compile kernels for GPUs that are not here, into a read-only cache tier"


def add_arguments(p) -> None:
    p.add_argument("--out", required=True, help="the directory to write (created if absent)")
    p.add_argument("--arch", help="comma-separated SMs (default: 75,80,86,89,90,100,120)")
    p.add_argument("--op", help="comma-separated ops (default: all)")
    p.add_argument("--dtype", help="comma-separated element types a variant may use: fp32, fp16, bf16 (default: all)")
    p.add_argument("--width", help="comma-separated widths (default: all)")
    p.add_argument("--driver-cuda", type=driver_version, default=0,
                   help="the CUDA version of the nodes' driver, e.g. 12.8 (default: one that runs the newest "
                        "NVRTC found here)")
    p.add_argument("--torch-cuda", type=int, default=0,
                   help="the CUDA major of the nodes' torch (default: this torch's)")
    p.add_argument("--jobs", type=int, default=0, help="compile threads (default: one per core)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


run = cmd_precompile
