"""The cpu backend's channel-last forward with and without non-temporal output stores
(CAUSAL_CONV1D_CPU_STREAM=1 / 0; fallback/cpu/stream_out.h), alternated in one process so that a
noisy machine moves both alike: the kernel into a preallocated output (width 4, silu), ns per
output and GB/s (x read + out written), the median of the rounds' medians. Prints a markdown
table for bench/RESULTS.md.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/cpu_stream.py [--rounds N]
"""
import argparse
import os
import platform
import statistics
import time

import torch

from causal_conv1d import _lib, _op_fwd, _pack


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    lib = _lib.library()
    cpu = lib.report()["backends"]["cpu"]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {cpu['threads']} threads, {cpu['simd']} kernels, "
          f"last-level cache {cpu['last_level_cache_bytes'] >> 20} MiB; load average "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; {args.rounds} rounds of {args.reps}\n")
    print("| shape (B,D,L) | dtype | plain ns/out | streamed ns/out | plain GB/s | streamed GB/s | change |")
    print("|---|---|---|---|---|---|---|")
    for B, D, L in ((4, 2048, 2048), (1, 4096, 8192), (8, 1024, 1024)):
        for dtype in (torch.float32, torch.bfloat16):
            torch.manual_seed(0)
            x = torch.randn(B, L, D, dtype=dtype).transpose(1, 2)
            w, b = torch.randn(D, 4, dtype=dtype), torch.randn(D, dtype=dtype)
            out = torch.empty_like(x).fill_(0)
            cargs = _pack.fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, bias=b, out=out), activation=_lib.ACT_SILU,
                                    backend=_lib.BACKEND_IDS["cpu"], stream=None)
            rounds = {"0": [], "1": []}
            for _ in range(args.rounds):
                for mode in ("0", "1"):
                    os.environ["CAUSAL_CONV1D_CPU_STREAM"] = mode
                    lib.call("cc1d_causal_conv1d_fwd", cargs)
                    ts = []
                    for _ in range(args.reps):
                        t0 = time.perf_counter()
                        lib.call("cc1d_causal_conv1d_fwd", cargs)
                        ts.append(time.perf_counter() - t0)
                    rounds[mode].append(statistics.median(ts))
            n, nbytes = x.numel(), 2 * x.numel() * x.element_size()
            plain, streamed = (statistics.median(rounds[m]) for m in ("0", "1"))
            print(f"| {B},{D},{L} | {str(dtype)[6:]} | {plain / n * 1e9:.3f} | {streamed / n * 1e9:.3f} | "
                  f"{nbytes / plain / 1e9:.2f} | {nbytes / streamed / 1e9:.2f} | "
                  f"{(streamed / plain - 1) * 100:+.0f}% |")
    os.environ.pop("CAUSAL_CONV1D_CPU_STREAM")
    print(f"\nload average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
