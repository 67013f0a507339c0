"""CPU backward benchmark: libcc1d's `cpu` backend beside the torch autograd baseline, the aten
backend and the physical limit, in one run.

Every column times the backward alone, as torch.autograd.grad(out, (x, weight, bias), dout,
retain_graph=True) on a graph built once: ours is causal_conv1d_fn(backend="cpu"); the baseline
is transformers' path without the package (depthwise F.conv1d with groups=dim and padding W-1,
slice to L, silu) under autograd; aten is causal_conv1d_fn(backend="aten") (the torch-ops
reference gradient); "+ seq_idx" is ours with four packed sequences per row; "+ states" is ours
with initial states and return_final_states (Mamba-2's chunked training: the backward also
writes dinitial_states and takes dfinal_states). GB/s counts x and
dout read plus dx written; the physical limit is torch copying a tensor of x's size on the same
threads, scaled to those three tensors' bytes. Ours and the baseline are timed with the gradients'
buffers in fresh pages and in reused memory, as in cpu_fwd.py (glibc's mallopt; see there why);
the other columns with memory reused. Prints a markdown table for bench/RESULTS.md.

    ~/.cache/causal-conv1d/venv/bin/python bench/cpu_bwd.py [--quick] [--shape B,D,L ...]
"""
import argparse
import os
import platform
import torch
import torch.nn.functional as F

from causal_conv1d import causal_conv1d_fn
# same folder: the forward's rules
from cpu_fwd import allocator, median_time, packed_seq_idx, reuse_heap, reuse_note, shape_args


def baseline(x, w, b):
    L = x.shape[-1]
    return F.silu(F.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=x.shape[1])[..., :L])


def backward_time(forward, x, w, b, dout, reps, mode="reused", init=None, dfinal=None):
    """The backward of forward(x, w, b) (or, with init, forward(x, w, b, init) returning the
    output and the final states, whose gradient is dfinal)."""
    leaves = [t.detach().requires_grad_() for t in (x, w, b) + ((init,) if init is not None else ())]
    out = forward(*leaves)
    grads = dout if init is None else (dout, dfinal)
    before = allocator(mode) or None
    return median_time(lambda: torch.autograd.grad(out, leaves, grads, retain_graph=True), reps, before)


def main():
    reuse_heap()
    ap = argparse.ArgumentParser()
    shapes_of = shape_args(ap)
    args = ap.parse_args()
    shapes = shapes_of(args)
    reps = 3 if args.quick else 5
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads)\n")
    modes = ("fresh", "reused") if allocator("fresh") is not False else ("as found",)
    print(reuse_note(max(B * D * L * 4 for B, D, L in shapes)))
    m = " / ".join(modes)
    print(f"| shape (B,D,L) | dtype | layout | cpu backend ms, {m} | GB/s, {m} | + seq_idx ms | + states ms | "
          f"baseline autograd ms, {m} | aten ms | copy GB/s | cpu vs baseline, {m} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for B, D, L in shapes:
        for dtype in (torch.bfloat16, torch.float32):
            for layout in ("channel-first", "channel-last"):
                torch.manual_seed(0)

                def make(n):
                    if layout == "channel-first":
                        return torch.randn(B, D, n, dtype=dtype)
                    return torch.randn(B, n, D, dtype=dtype).transpose(1, 2)

                x, dout, init, dfinal = make(L), make(L), make(3), make(3)
                w = torch.randn(D, 4, dtype=dtype)
                b = torch.randn(D, dtype=dtype)
                nbytes = 3 * x.numel() * x.element_size()
                ours = lambda x, w, b: causal_conv1d_fn(x, w, b, activation="silu", backend="cpu")
                t_ours = [backward_time(ours, x, w, b, dout, reps, mode) for mode in modes]
                t_base = [backward_time(baseline, x, w, b, dout, reps, mode) for mode in modes]
                seq = packed_seq_idx(B, L)
                t_seq = backward_time(
                    lambda x, w, b: causal_conv1d_fn(x, w, b, seq_idx=seq, activation="silu", backend="cpu"),
                    x, w, b, dout, reps)
                t_states = backward_time(
                    lambda x, w, b, init: causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True,
                                                           activation="silu", backend="cpu"),
                    x, w, b, dout, reps, init=init, dfinal=dfinal)
                t_aten = backward_time(lambda x, w, b: causal_conv1d_fn(x, w, b, activation="silu", backend="aten"),
                                       x, w, b, dout, reps)
                dst = torch.empty_like(x)
                t_copy = median_time(lambda: dst.copy_(x), reps) * 1.5  # moves 2 of our 3 tensors' bytes
                gbs = lambda t: nbytes / t / 1e9
                each = lambda f: " / ".join(f(i) for i in range(len(modes)))
                print(f"| {B},{D},{L} | {str(dtype)[6:]} | {layout} | {each(lambda i: f'{t_ours[i] * 1e3:.1f}')} | "
                      f"{each(lambda i: f'{gbs(t_ours[i]):.2f}')} | {t_seq * 1e3:.1f} | {t_states * 1e3:.1f} | "
                      f"{each(lambda i: f'{t_base[i] * 1e3:.1f}')} | {t_aten * 1e3:.1f} | {gbs(t_copy):.2f} | "
                      f"{each(lambda i: f'{t_base[i] / t_ours[i]:.1f}x')} |")


if __name__ == "__main__":
    main()
