"""CPU forward benchmark: libcc1d's `cpu` backend beside the baseline and the physical limit.

Baseline: what transformers runs without the package (depthwise nn.Conv1d/F.conv1d with
groups=dim and padding=W-1, slice to L, silu). Physical limit: torch copying the same bytes
(x read + out written) on the same threads. Prints a markdown table for bench/RESULTS.md.

    ~/.cache/causal-conv1d/venv/bin/python bench/cpu_fwd.py [--quick]
"""
import argparse
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from causal_conv1d import causal_conv1d_fn


def median_time(fn, reps):
    fn()  # warm up (thread pool start, first-touch)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def baseline(x, w, b):
    L = x.shape[-1]
    y = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., :L]
    return F.silu(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer repetitions")
    args = ap.parse_args()
    shapes = [(4, 2048, 2048), (1, 4096, 8192), (8, 1024, 1024)]
    if args.quick:
        shapes = [(2, 512, 1024)]
    reps = 3 if args.quick else 7
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads)\n")
    print("| shape (B,D,L) | dtype | layout | cpu backend GB/s | baseline F.conv1d GB/s | copy GB/s | cpu vs baseline |")
    print("|---|---|---|---|---|---|---|")
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
                nbytes = 2 * x.numel() * x.element_size()
                t_ours = median_time(lambda: causal_conv1d_fn(x, w, b, activation="silu", backend="cpu"), reps)
                t_base = median_time(lambda: baseline(x, w, b), reps)
                dst = torch.empty_like(x)
                t_copy = median_time(lambda: dst.copy_(x), reps)
                gbs = lambda t: nbytes / t / 1e9
                print(f"| {B},{D},{L} | {str(dtype)[6:]} | {layout} | {gbs(t_ours):.2f} | {gbs(t_base):.2f} | "
                      f"{gbs(t_copy):.2f} | {t_base / t_ours:.2f}x |")


if __name__ == "__main__":
    main()
