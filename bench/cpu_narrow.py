"""CPU forward and backward over narrow steps and short rows: the cpu backend on channel-first
and channel-last bf16 of few channels (dims 3 to 64) or few steps (1 to 48), each shape 2^24
elements, width 4 with bias and silu. Shows where the two tilings cross (fallback/cpu/tiling.h:
channel-last under 16 channels takes the time-major tiling, channel-first rows under 40 steps
the channel-major one). Times causal_conv1d_fn and the backward op with every gradient
(causal_conv1d_bwd, dx and dweight and dbias), medians, in ns an element. Prints a markdown table
for bench/RESULTS.md.

    ~/.cache/causal-conv1d/venv/bin/python bench/cpu_narrow.py [--quick]
"""
import argparse
import platform

import torch

from causal_conv1d import causal_conv1d_fn
from causal_conv1d._op_bwd import causal_conv1d_bwd
from cpu_fwd import median_time  # same folder


def rows(batch, dim, length, layout, gen):
    """A (batch, dim, length) bf16 tensor, channel-first or a channel-last view."""
    if layout == "channel-first":
        return torch.randn(batch, dim, length, generator=gen).to(torch.bfloat16)
    return torch.randn(batch, length, dim, generator=gen).to(torch.bfloat16).transpose(1, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2^16 elements a shape, fewer repetitions")
    args = ap.parse_args()
    n, reps = (1 << 16, 3) if args.quick else (1 << 24, 5)
    gen = torch.Generator().manual_seed(0)
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {n} elements a shape, median of {reps}")
    print("| shape (B,D,L) | layout | forward ns/element | backward ns/element |")
    print("|---|---|---|---|")
    narrow = [(1, dim, n // dim) for dim in (3, 8, 15, 16, 64)]
    short = [(n // (256 * length), 256, length) for length in (1, 4, 16, 32, 48)]
    for batch, dim, length in narrow + short:
        for layout in ("channel-first", "channel-last"):
            x, dout = rows(batch, dim, length, layout, gen), rows(batch, dim, length, layout, gen)
            w, b = torch.randn(dim, 4, generator=gen), torch.randn(dim, generator=gen)
            fwd = median_time(lambda: causal_conv1d_fn(x, w, b, activation="silu", backend="cpu"), reps)
            bwd = median_time(lambda: causal_conv1d_bwd(x, w, b, dout, None, None, None, None, False, True,
                                                        backend="cpu"), reps)
            print(f"| {batch},{dim},{length} | {layout} | {fwd / x.numel() * 1e9:.2f} | {bwd / x.numel() * 1e9:.2f} |")


if __name__ == "__main__":
    main()
