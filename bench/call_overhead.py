"""Host time per Python call (goal: causal_conv1d_fn on a tiny tensor under 15 us; the update at
batch 1, dim 4096 under 20 us from the call to the result, with Mamba's state of width entries,
and beside it vLLM's of width-1 and a ring buffer), beside the same calls with their
arguments packed in Python instead of by libcc1d_pyargs, through upstream's other entry points
(cpp_functions, causal_conv1d_cuda), the C ABI call alone (the same packed arguments, straight to
libcc1d) and the path through the torch operator; and a training step's calls (the forward with
gradients and its backward, beside torch's own cost of one autograd node); last, `import
causal_conv1d` in fresh interpreters beside `import torch`.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/call_overhead.py [--device cpu|cuda] [--quick]

Each figure: the median (and the minimum) over 300 batches of 50 calls, per call. Short batches
make a busy machine show up as spread between the two rather than in every figure. The last row,
torch.empty_like on the tiny tensor, is a yardstick of this machine's Python and torch speed:
compare runs on different machines through it. --quick takes 10 batches: a check that every row
still runs (tests/python/test_bench_smoke.py), not a figure.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import torch

import causal_conv1d_cuda
from causal_conv1d import _lib, _op_fwd, _pack, _op_update, causal_conv1d_fn, causal_conv1d_update
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function, causal_conv1d_fwd_function


BATCHES = 300  # batches of 50 calls per figure; --quick sets 10


def per_call_us(fn, batch=50):
    for _ in range(batch * 4):
        fn()
    times = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(times), min(times)


def python_packer(fn):
    """per_call_us(fn) with the fast path packing in Python instead of libcc1d_pyargs."""
    c = _pack.c_packer()
    _pack._c_pack = False
    try:
        return per_call_us(fn)
    finally:
        _pack._c_pack = c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true", help="10 batches a figure: checks the rows run")
    args = ap.parse_args()
    global BATCHES
    if args.quick:
        BATCHES = 10
    dev = torch.device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(0)
    lib = _lib.library()
    load = os.getloadavg()
    print(f"device {dev}; torch {torch.__version__} ({torch.get_num_threads()} threads); libcc1d {lib.path}; "
          f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"argument packer {_pack.c_packer_state()}\n")
    rows = []

    # forward: tiny (1, 8, 16) fp32, width 4, bias, silu
    x = torch.randn(1, 8, 16, device=dev)
    w = torch.randn(8, 4, device=dev)
    b = torch.randn(8, device=dev)
    out = torch.empty_like(x)
    backend = "cpu" if dev.type == "cpu" else "nvrtc"
    rows.append(("causal_conv1d_fn, (1, 8, 16) fp32, silu", per_call_us(
        lambda: causal_conv1d_fn(x, w, b, activation="silu", backend=backend))))
    rows.append(("  the same, arguments packed in Python (_pack.pack_python)", python_packer(
        lambda: causal_conv1d_fn(x, w, b, activation="silu", backend=backend))))
    rows.append(("  the same through cpp_functions.causal_conv1d_fwd_function (mamba_ssm's path)", per_call_us(
        lambda: causal_conv1d_fwd_function(x, w, b, None, None, None, True, backend=backend))))
    rows.append(("  the same into out, causal_conv1d_cuda.causal_conv1d_fwd (upstream 1.5.1-1.6's form)", per_call_us(
        lambda: causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True, backend=backend))))
    rows.append(("  the same through torch.ops.causal_conv1d.fwd", per_call_us(
        lambda: torch.ops.causal_conv1d.fwd(x, w, b, None, None, False, True, backend))))
    fargs = _pack.fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, bias=b, out=out), activation=_lib.ACT_SILU,
                           backend=_lib.BACKEND_IDS[backend],
                           stream=torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else None)
    rows.append(("  C ABI call alone (cc1d_causal_conv1d_fwd via ctypes)", per_call_us(
        lambda: lib.call("cc1d_causal_conv1d_fwd", fargs))))

    # training: the forward with gradients and its backward (autograd), and mamba_inner_fn's backward
    xg, wg, bg = (t.clone().requires_grad_(True) for t in (x, w, b))
    dout = torch.randn_like(x)

    def train_step():
        causal_conv1d_fn(xg, wg, bg, activation="silu", backend=backend).backward(dout)
        sync()

    class Floor(torch.autograd.Function):  # torch's own cost of one autograd node, both ways
        @staticmethod
        def forward(ctx, x, w, b):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g, torch.zeros_like(w), torch.zeros_like(b)

    rows.append(("causal_conv1d_fn with gradients, forward and backward, (1, 8, 16) fp32", per_call_us(train_step)))
    rows.append(("  yardstick: an autograd.Function doing x * 1.0, forward and backward", per_call_us(
        lambda: (Floor.apply(xg, wg, bg).backward(dout), sync()))))
    rows.append(("  cpp_functions.causal_conv1d_bwd_function alone (mamba_inner_fn's backward)", per_call_us(
        lambda: (causal_conv1d_bwd_function(x, w, b, dout, None, None, None, None, False, True, backend=backend),
                 sync()))))

    # update: batch 1, dim 4096, bf16, width 4, state_len 4, silu; to the result (synchronised)
    xu = torch.randn(1, 4096, device=dev, dtype=torch.bfloat16)
    st = torch.randn(1, 4096, 4, device=dev, dtype=torch.bfloat16)
    wu = torch.randn(4096, 4, device=dev, dtype=torch.bfloat16)
    bu = torch.randn(4096, device=dev, dtype=torch.bfloat16)
    outu = torch.empty_like(xu)

    def update():
        causal_conv1d_update(xu, st, wu, bu, activation="silu", backend=backend)
        sync()

    rows.append(("causal_conv1d_update, batch 1, dim 4096 bf16, silu", per_call_us(update)))
    rows.append(("  the same, arguments packed in Python (_pack.pack_python)", python_packer(update)))
    uargs = _pack.fill_args(_op_update.CUpdateArgs, dict(x=xu, conv_state=st, weight=wu, bias=bu, out=outu),
                           activation=_lib.ACT_SILU, backend=_lib.BACKEND_IDS[backend],
                           stream=torch.cuda.current_stream(dev).cuda_stream if dev.type == "cuda" else None)
    rows.append(("  C ABI call alone (cc1d_causal_conv1d_update via ctypes)", per_call_us(
        lambda: (lib.call("cc1d_causal_conv1d_update", uargs), sync()))))

    # The other decode layouts: vLLM's state of width-1 entries, and a ring of 16 (cache_seqlens).
    st3 = torch.randn(1, 4096, 3, device=dev, dtype=torch.bfloat16)
    ring = torch.randn(1, 4096, 16, device=dev, dtype=torch.bfloat16)
    cache = torch.tensor([21], device=dev, dtype=torch.int32)  # head 5: the window is 2..4 (one load a row)
    wraps = torch.tensor([17], device=dev, dtype=torch.int32)  # head 1: the window is 14, 15, 0 (two loads a row)
    rows.append(("causal_conv1d_update, the same with state_len 3 (width-1)", per_call_us(
        lambda: (causal_conv1d_update(xu, st3, wu, bu, activation="silu", backend=backend), sync()))))
    rows.append(("causal_conv1d_update, the same on a ring of 16 (cache_seqlens), head 5", per_call_us(
        lambda: (causal_conv1d_update(xu, ring, wu, bu, activation="silu", cache_seqlens=cache, backend=backend),
                 sync()))))
    rows.append(("  the same at head 1, where the window wraps (3 of 16 heads)", per_call_us(
        lambda: (causal_conv1d_update(xu, ring, wu, bu, activation="silu", cache_seqlens=wraps, backend=backend),
                 sync()))))
    rows.append(("  the same on a ring of 3 (width-1: the window is the whole row), head 1", per_call_us(
        lambda: (causal_conv1d_update(xu, st3, wu, bu, activation="silu", cache_seqlens=wraps, backend=backend),
                 sync()))))
    # Several tokens at once: speculative decoding's drafts.
    xt = torch.randn(1, 4096, 4, device=dev, dtype=torch.bfloat16)
    rows.append(("causal_conv1d_update, 4 tokens (x of (1, 4096, 4)), state_len 4", per_call_us(
        lambda: (causal_conv1d_update(xt, st, wu, bu, activation="silu", backend=backend), sync()))))

    rows.append(("yardstick: torch.empty_like of the (1, 8, 16) tensor", per_call_us(lambda: torch.empty_like(x))))

    print("| call | median us | min us |")
    print("|---|---|---|")
    for what, (med, lo) in rows:
        print(f"| {what} | {med:.1f} | {lo:.1f} |")
    import_times(1 if args.quick else 7)


IMPORTS = """
import sys, time
t0 = time.perf_counter(); import torch
t1 = time.perf_counter(); import causal_conv1d
t2 = time.perf_counter()
print((t1 - t0) * 1e3, (t2 - t1) * 1e3, int("torch._dynamo" in sys.modules))
"""


def import_times(runs):
    """A process's cost before its first call: `import causal_conv1d` after torch, in fresh
    interpreters, beside `import torch` itself."""
    torch_ms, ours_ms, dynamo = [], [], 0
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, check=True)
        t, o, d = out.stdout.split()
        torch_ms.append(float(t)), ours_ms.append(float(o))
        dynamo = int(d)
    print(f"\n| import, {runs} fresh interpreters | median ms | min ms |\n|---|---|---|")
    print(f"| import torch (the yardstick) | {statistics.median(torch_ms):.0f} | {min(torch_ms):.0f} |")
    print(f"| import causal_conv1d, after torch{' (imported torch._dynamo)' if dynamo else ''} | "
          f"{statistics.median(ours_ms):.1f} | {min(ours_ms):.1f} |")


if __name__ == "__main__":
    main()
