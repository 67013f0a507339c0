"""Command line: `causal-conv1d report | demo | --version` (also `python -m causal_conv1d`)."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Optional, Sequence

from . import _cmd_cache, _cmd_precompile


def _torch_facts() -> dict:
    import torch

    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    facts = {
        "version": str(torch.__version__),
        "cuda": getattr(torch.version, "cuda", None),
        "cxx11_abi": None if abi is None else bool(abi),
        "cuda_available": torch.cuda.is_available(),
        "cuda_device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0,
    }
    if facts["cuda_available"]:
        facts["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(facts["cuda_device_count"])]
    return facts


def build_report() -> dict:
    import os

    import causal_conv1d
    from . import _dispatch, _lib, _ops

    lib = _lib.library()
    report = {
        "package": {
            "name": "causal-conv1d",
            "version": causal_conv1d.__version__,
            "path": os.path.dirname(os.path.abspath(causal_conv1d.__file__)),
            "library_path": None if lib is None else lib.path,
            "library_version": None if lib is None else lib.version,
            "library_abi_version": None if lib is None else lib.abi_version,
            "expected_abi_version": _lib.ABI_VERSION,
            "library_error": _lib.load_error(),
            "library_paths_tried": _lib.tried_paths(),
            "torch_custom_op": _ops.USE_CUSTOM_OP,
        },
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform()},
        "torch": _torch_facts(),
        "environment": {k: os.environ.get(k) for k in (
            "CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT", "CAUSAL_CONV1D_LIBRARY",
            "CAUSAL_CONV1D_LOG_LEVEL", "CAUSAL_CONV1D_NUM_THREADS", "CAUSAL_CONV1D_CACHE_DIR")},
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


def cmd_report(args) -> int:
    print(json.dumps(build_report(), indent=2, default=str))
    return 0


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cmd_demo(args) -> int:
    import torch

    import causal_conv1d
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_ref, last_backend

    if args.device:
        device = torch.device(args.device)
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    B, D, L, W = args.batch, args.dim, args.seqlen, args.width
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(B, D, L, generator=gen).to(device=device, dtype=dtype)
    weight = torch.randn(D, W, generator=gen).to(device=device, dtype=dtype)
    bias = torch.randn(D, generator=gen).to(device=device, dtype=dtype)
    print(f"causal-conv1d {causal_conv1d.__version__} demo: x ({B}, {D}, {L}) {dtype}, width {W}, "
          f"silu, on {device}")

    out = causal_conv1d_fn(x, weight, bias, activation="silu", backend=args.backend)
    _sync(device)
    choice = last_backend()
    print(f"backend: {choice.backend} ({choice.reason})")

    # Check: a float64 reference computed on its own from the same (already rounded) inputs.
    ref = causal_conv1d_ref(x.double(), weight.double(), bias.double(), activation="silu")
    tol = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 1e-5}[dtype]
    err = (out.double() - ref).abs()
    allowed = tol * (ref.abs() + 1.0)
    bad = int((err > allowed).sum().item()) + int(torch.isnan(out).sum().item())
    print(f"check vs float64 reference: max abs error {err.max().item():.3g}, "
          f"{bad} element(s) outside {tol:g} * (|ref| + 1)")

    times = []
    for _ in range(args.runs):
        _sync(device)
        t0 = time.perf_counter()
        causal_conv1d_fn(x, weight, bias, activation="silu", backend=args.backend)
        _sync(device)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    nbytes = (x.numel() * x.element_size() + out.numel() * out.element_size()
              + weight.numel() * weight.element_size() + bias.numel() * bias.element_size())
    print(f"time: median {med * 1e3:.3f} ms over {args.runs} runs; throughput {nbytes / med / 1e9:.2f} GB/s "
          f"({nbytes / 1e6:.1f} MB moved per call)")
    if bad:
        print("FAILED: the result does not match the reference", file=sys.stderr)
        return 1
    print("OK")
    return 0


def make_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = argparse.ArgumentParser(prog="causal-conv1d", description="causal-conv1d: report and demo.")
    p.add_argument("--version", action="version", version=f"causal-conv1d {__version__}")
    sub = p.add_subparsers(dest="command")
    r = sub.add_parser("report", help="JSON description of the installation, library and backends")
    r.set_defaults(func=cmd_report)
    d = sub.add_parser("demo", help="run, check against a float64 reference, and time the forward")
    d.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available, else cpu)")
    d.add_argument("--backend", default=None, help="auto, cpu, aten, nvrtc or emulate (default: auto rules)")
    d.add_argument("--batch", type=int, default=4)
    d.add_argument("--dim", type=int, default=2048)
    d.add_argument("--seqlen", type=int, default=2048)
    d.add_argument("--width", type=int, default=4)
    d.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    d.add_argument("--runs", type=int, default=5)
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=cmd_demo)
    _cmd_precompile.register(sub)
    _cmd_cache.register(sub)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
