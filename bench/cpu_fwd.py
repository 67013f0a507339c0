"""CPU forward benchmark: libcc1d's `cpu` backend beside the baseline and the physical limit.

Baseline: what transformers runs without the package (depthwise nn.Conv1d/F.conv1d with
groups=dim and padding=W-1, slice to L, silu). Physical limit: torch copying the same bytes
(x read + out written) on the same threads. Two figures for ours: the public call
(causal_conv1d_fn, which allocates a fresh output every call: its first-touch page faults are
part of the price), and the library call alone into a preallocated output (the kernel), also
with seq_idx of four packed sequences per row (`packed_seq_idx`). Goals:
the kernel at >= 50% of the copy, the public call >= 5x the baseline. Prints a markdown table
for bench/RESULTS.md, with the machine's load before and after.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/cpu_fwd.py [--quick] [--reps N]
"""
import argparse
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from causal_conv1d import _lib, _op_fwd, _pack, causal_conv1d_fn


def median_time(fn, reps):
    fn()  # warm up (thread pool start, first-touch)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def packed_seq_idx(B, L, sequences=4):
    """seq_idx of `sequences` packed sequences of equal length in every batch row."""
    return (torch.arange(L) * sequences // L).to(torch.int32).expand(B, L).contiguous()


def baseline(x, w, b):
    L = x.shape[-1]
    y = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., :L]
    return F.silu(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer repetitions")
    ap.add_argument("--reps", type=int, default=0, help="repetitions per figure (median)")
    args = ap.parse_args()
    shapes = [(4, 2048, 2048), (1, 4096, 8192), (8, 1024, 1024)]
    if args.quick:
        shapes = [(2, 512, 1024)]
    reps = args.reps or (3 if args.quick else 11)
    lib = _lib.library()
    cpu = lib.report().get("backends", {}).get("cpu", {})
    load = os.getloadavg()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), libcc1d cpu backend: "
          f"{cpu.get('threads')} threads, {cpu.get('simd')} kernels, transparent huge pages "
          f"{cpu.get('huge_pages')}{'' if cpu.get('huge_page_advice') else ' (not advised)'}; "
          f"load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; median of {reps}\n")
    print("| shape (B,D,L) | dtype | layout | kernel GB/s | % of copy | kernel + seq_idx GB/s | causal_conv1d_fn GB/s "
          "| baseline GB/s | copy GB/s | fn vs baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for B, D, L in shapes:
        for dtype in (torch.bfloat16, torch.float32):
            for layout in ("channel-first", "channel-last"):
                torch.manual_seed(0)
                if layout == "channel-first":
                    x = torch.randn(B, D, L, dtype=dtype)
                else:
                    x = torch.randn(B, L, D, dtype=dtype).transpose(1, 2)
                w = torch.randn(D, 4, dtype=dtype)
                b = torch.randn(D, dtype=dtype)
                out = torch.empty_like(x)
                out.fill_(0)  # pages touched once, as a caller reusing a buffer would have them
                cargs = _pack.fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, bias=b, out=out),
                                       activation=_lib.ACT_SILU, backend=_lib.BACKEND_IDS["cpu"], stream=None)
                sargs = _pack.fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, bias=b, out=out,
                                                              seq_idx=packed_seq_idx(B, L)),
                                        activation=_lib.ACT_SILU, backend=_lib.BACKEND_IDS["cpu"], stream=None)
                nbytes = 2 * x.numel() * x.element_size()
                t_kernel = median_time(lambda: lib.call("cc1d_causal_conv1d_fwd", cargs), reps)
                t_seq = median_time(lambda: lib.call("cc1d_causal_conv1d_fwd", sargs), reps)
                t_fn = median_time(lambda: causal_conv1d_fn(x, w, b, activation="silu", backend="cpu"), reps)
                t_base = median_time(lambda: baseline(x, w, b), reps)
                t_copy = median_time(lambda: out.copy_(x), reps)
                gbs = lambda t: nbytes / t / 1e9
                print(f"| {B},{D},{L} | {str(dtype)[6:]} | {layout} | {gbs(t_kernel):.2f} | "
                      f"{100 * t_copy / t_kernel:.0f}% | {gbs(t_seq):.2f} | {gbs(t_fn):.2f} | {gbs(t_base):.2f} | {gbs(t_copy):.2f} | "
                      f"{t_base / t_fn:.2f}x |")
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
