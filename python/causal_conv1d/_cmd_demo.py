"""`causal-conv1d demo`: runs the forward once, checks it against a float64 reference, times it."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from . import _lib

HELP = "run, check against a float64 reference, and time the forward"


def _int_in(lo: int, hi=None):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {lo}..{hi}, got {v}" if hi is not None
                                             else f"expected >= {lo}, got {v}")
        return v
    return parse


def add_arguments(p) -> None:
    p.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if available, else cpu)")
    p.add_argument("--backend", default=None, choices=tuple(_lib.BACKEND_IDS),
                   help="the backend to use (default: the auto rules)")
    p.add_argument("--batch", type=_int_in(1), default=4)
    p.add_argument("--dim", type=_int_in(1), default=2048)
    p.add_argument("--seqlen", type=_int_in(1), default=2048)
    p.add_argument("--width", type=_int_in(1, _lib.MAX_WIDTH), default=4)
    p.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16")
    p.add_argument("--runs", type=_int_in(1), default=5)
    p.add_argument("--seed", type=int, default=0)


class DemoError(RuntimeError):
    """A demo that cannot run here; the message says what to do instead."""


def _device(arg):
    import torch

    try:
        device = torch.device(arg) if arg else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    except RuntimeError as e:
        raise DemoError(f"--device {arg!r} is not a device ({' '.join(str(e).split())}); use cpu or cuda[:N]") from None
    if device.type not in ("cpu", "cuda"):
        raise DemoError(f"--device {arg!r}: the demo runs on cpu or cuda[:N]")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            why = ("this torch is a CPU-only build" if torch.version.cuda is None
                   else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device")
            raise DemoError(f"no CUDA device: {why}; run 'causal-conv1d doctor' to see why, or use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DemoError(f"--device {arg}: there are {torch.cuda.device_count()} CUDA device(s); "
                            f"use cuda:0..cuda:{torch.cuda.device_count() - 1}")
    return device


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(args) -> int:
    import torch

    import causal_conv1d
    from causal_conv1d import causal_conv1d_ref, last_backend, use_backend

    device = _device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    B, D, L, W = args.batch, args.dim, args.seqlen, args.width
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(B, D, L, generator=gen).to(device=device, dtype=dtype)
    weight = torch.randn(D, W, generator=gen).to(device=device, dtype=dtype)
    bias = torch.randn(D, generator=gen).to(device=device, dtype=dtype)
    print(f"causal-conv1d {causal_conv1d.package_version} demo: x ({B}, {D}, {L}) {dtype}, width {W}, "
          f"silu, on {device}")

    def call():
        if args.backend is None:
            return causal_conv1d.causal_conv1d_fn(x, weight, bias, activation="silu")
        with use_backend(args.backend, source="--backend"):
            return causal_conv1d.causal_conv1d_fn(x, weight, bias, activation="silu")

    out = call()
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

    def median_time(fn):
        times = []
        for _ in range(args.runs):
            _sync(device)
            t0 = time.perf_counter()
            fn()
            _sync(device)
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    med = median_time(call)
    nbytes = (x.numel() * x.element_size() + out.numel() * out.element_size()
              + weight.numel() * weight.element_size() + bias.numel() * bias.element_size())
    print(f"time: median {med * 1e3:.3f} ms over {args.runs} runs; throughput {nbytes / med / 1e9:.2f} GB/s "
          f"({nbytes / 1e6:.1f} MB moved per call)")
    # The physical limit for scale: the same bytes copied into a new tensor, as the call writes a new output.
    copy = median_time(x.clone)
    copied = 2 * x.numel() * x.element_size()
    print(f"for scale: a copy of x into a new tensor (the same bytes) takes {copy * 1e3:.3f} ms, "
          f"{copied / copy / 1e9:.2f} GB/s; this call runs at {copy / med:.0%} of its speed")
    if bad:
        print("FAILED: the result does not match the reference", file=sys.stderr)
        return 1
    print("OK")
    return 0
