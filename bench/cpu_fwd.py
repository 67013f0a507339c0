"""CPU forward benchmark: libcc1d's `cpu` backend beside the baseline and the physical limit.

Baseline: what transformers runs without the package (depthwise nn.Conv1d/F.conv1d with
groups=dim and padding=W-1, slice to L, silu). Physical limit: torch copying the same bytes
(x read + out written) on the same threads. Two figures for ours: the public call
(causal_conv1d_fn, which allocates its output every call), and the library call alone into a
preallocated output (the kernel), also with seq_idx of four packed sequences per row
(`packed_seq_idx`). Goals: the kernel at >= 50% of the copy, the public call >= 5x the baseline.

The public call and the baseline allocate, and what an allocation costs depends on glibc's
malloc: a buffer above its mmap threshold gets new pages, whose first-touch faults (the kernel
zeroing each page) cost as much as the convolution here, while one below it reuses freed heap
memory. The threshold moves with the process's history, so a default run lands in either case
per row (the baseline's figure jumped 2.5x between runs). Both are measured, each forced with
mallopt: "fresh" (every buffer of 64 KiB or more in new pages) and "reused" (freed memory kept
for the next call). "Reused" also needs glibc's per-thread cache off: torch allocates with
posix_memalign, whose small trimmed-off tail parks in that cache, so the freed buffer cannot merge
back and the next one of the same size is carved from new pages (a 128 MiB output moved up the
heap by its own size each call, the process growing with it, 2026-12-07); the benchmarks restart
themselves once with GLIBC_TUNABLES=glibc.malloc.tcache_count=0, and the header says whether a
buffer of the largest output's size came back at the same address. "ceiling" is the copy over
the reused baseline: the most any kernel could beat that baseline by. Prints a markdown table
for bench/RESULTS.md, with the machine's load before and after.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/cpu_fwd.py [--quick] [--reps N] [--shape B,D,L ...]
"""
import argparse
import ctypes
import ctypes.util
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from causal_conv1d import _lib, _op_fwd, _pack, causal_conv1d_fn


def median_time(fn, reps, before=None):
    fn()  # warm up (thread pool start, first-touch)
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def allocator(mode):
    """Force glibc malloc's choice for large buffers: "fresh" (new pages, faulted in on first
    touch) or "reused" (freed memory kept in the heap for the next call). Returns what to call
    before each timed call (None: nothing), or False where malloc is not glibc's."""
    libc = ctypes.util.find_library("c") if platform.libc_ver()[0] == "glibc" else None
    if libc is None:
        return False
    libc = ctypes.CDLL(libc)
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    threshold, trim = (64 << 10, 128 << 10) if mode == "fresh" else (1 << 30, (1 << 31) - 1)
    if not (libc.mallopt(M_MMAP_THRESHOLD, threshold) and libc.mallopt(M_TRIM_THRESHOLD, trim)):
        return False
    # Fresh: buffers above 64 KiB are mmapped; and free heap chunks (left by a reused phase) give
    # their pages back before each call, so that a buffer carved from them faults too.
    return (lambda: libc.malloc_trim(0)) if mode == "fresh" else None


def reuse_heap():
    """Restart this process once with glibc's per-thread cache off (see the module's docstring),
    so that "reused" memory is reused. A no-op elsewhere."""
    tunable = "glibc.malloc.tcache_count=0"
    current = os.environ.get("GLIBC_TUNABLES", "")
    if platform.libc_ver()[0] != "glibc" or tunable in current:
        return
    env = dict(os.environ, GLIBC_TUNABLES=f"{current}:{tunable}" if current else tunable)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def reuse_note(nbytes):
    """The header's line on whether a freed buffer of nbytes comes back at the same address with
    the allocator in "reused" mode."""
    if allocator("reused") is False:
        return ""
    a = torch.empty(nbytes, dtype=torch.uint8)
    first = a.data_ptr()
    del a
    same = torch.empty(nbytes, dtype=torch.uint8).data_ptr() == first
    return (f"reused mode: a freed {nbytes >> 20} MiB buffer comes back at the same address: "
            f"{'yes' if same else 'NO (the reused figures include new pages)'}\n")


def packed_seq_idx(B, L, sequences=4):
    """seq_idx of `sequences` packed sequences of equal length in every batch row."""
    return (torch.arange(L) * sequences // L).to(torch.int32).expand(B, L).contiguous()


def baseline(x, w, b):
    L = x.shape[-1]
    y = F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., :L]
    return F.silu(y)


def shape_args(ap):
    """--quick and --shape, as the CPU benchmarks take them; returns a function of the parsed
    arguments giving the shapes to run."""
    ap.add_argument("--quick", action="store_true", help="smaller shapes, fewer repetitions")
    ap.add_argument("--shape", action="append", metavar="B,D,L", type=lambda s: tuple(int(v) for v in s.split(",")),
                    help="run this shape instead of the defaults (repeatable)")
    return lambda args: args.shape or ([(2, 512, 1024)] if args.quick else [(4, 2048, 2048), (1, 4096, 8192),
                                                                             (8, 1024, 1024)])


def main():
    reuse_heap()
    ap = argparse.ArgumentParser()
    shapes_of = shape_args(ap)
    ap.add_argument("--reps", type=int, default=0, help="repetitions per figure (median)")
    args = ap.parse_args()
    shapes = shapes_of(args)
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
    modes = ("fresh", "reused") if allocator("fresh") is not False else ("as found",)
    if len(modes) == 1:
        print("(not glibc: the allocator is measured as found, not forced)\n")
    print(reuse_note(max(B * D * L * 4 for B, D, L in shapes)))
    m = " / ".join(modes)
    print(f"| shape (B,D,L) | dtype | layout | kernel GB/s | % of copy | kernel + seq_idx GB/s | copy GB/s "
          f"| causal_conv1d_fn GB/s, {m} | baseline GB/s, {m} | fn vs baseline, {m} | ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
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
                t_copy = median_time(lambda: out.copy_(x), reps)
                t_fn, t_base = [], []
                for mode in modes:
                    before = allocator(mode) or None
                    t_fn.append(median_time(lambda: causal_conv1d_fn(x, w, b, activation="silu", backend="cpu"), reps,
                                            before))
                    t_base.append(median_time(lambda: baseline(x, w, b), reps, before))
                gbs = lambda t: nbytes / t / 1e9
                each = lambda f: " / ".join(f(i) for i in range(len(modes)))
                print(f"| {B},{D},{L} | {str(dtype)[6:]} | {layout} | {gbs(t_kernel):.2f} | "
                      f"{100 * t_copy / t_kernel:.0f}% | {gbs(t_seq):.2f} | {gbs(t_copy):.2f} | "
                      f"{each(lambda i: f'{gbs(t_fn[i]):.2f}')} | {each(lambda i: f'{gbs(t_base[i]):.2f}')} | "
                      f"{each(lambda i: f'{t_base[i] / t_fn[i]:.2f}x')} | {t_base[-1] / t_copy:.1f}x |")
    load = os.getloadavg()
    print(f"\nload average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
