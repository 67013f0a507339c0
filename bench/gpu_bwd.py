"""GPU backward benchmark: libcc1d's `nvrtc` backend beside a device-to-device copy of the same
bytes (the bandwidth ceiling) and beside transformers' fallback under autograd (depthwise F.conv1d
with groups=dim, padding=W-1, slice, silu), in the same process on the same GPU. Every kernel
layout of the backward is exercised: channel-first (time_vec), channel-first rows not 16-byte
aligned (time_vec, which peels each row's head, since 2026-12-05; time before), channel-first
views whose rows x and dout start at different offsets mod 16 bytes (time), channel-first with
seq_idx (time_seq), channel-last (channel_vec), channel-last with dim % 8 = 4 (channel),
channel-last with seq_idx (channel_vec_seq; channel_seq before 2026-12-04 22:42) and the same
with dim % 8 = 4 (channel_seq).

Each column times the backward alone: torch.autograd.grad(out, (x, weight, bias), dout,
retain_graph=True) on a graph built once; on CUDA that includes the autograd engine's hand-off to
its device thread (100-230 us a call on the H200 machine of 2026-12-04), so "direct" also times
upstream's cpp_functions.causal_conv1d_bwd_function (mamba_ssm's call, no engine) on the same
tensors. GB/s counts x and dout read and dx written; the copy
moves a tensor of x's size, scaled to those three tensors. Also checks the gradients against the
baseline's (float32 reference) and times each configuration's first backward (its three kernels
compiled in one NVRTC program, or loaded from the disk cache). Prints markdown tables.

    CAUSAL_CONV1D_LIBRARY=build/libcc1d.so python bench/gpu_bwd.py [--quick] [--check-only]

--device cpu --backend cpu checks the script itself on a machine without a GPU (--check-only: as
bench/gpu_fwd.py's).
"""
import time

import torch

from causal_conv1d import causal_conv1d_fn
from causal_conv1d.cpp_functions import causal_conv1d_bwd_function
from gpu_fwd import (Timer, baseline, baseline_seq, check_layouts, finish, library_report, make_seq_idx,  # same folder
                     make_x, parse_args, print_loaded)

SHAPES = [(8, 2048, 2048), (4, 4096, 4096), (64, 4096, 8)]  # the last: short rows
QUICK_SHAPES = [(2, 512, 1024)]
# (layout, dtypes): the fast path in both dtypes, the other layouts in bf16.
LAYOUTS = [("channel-first", (torch.bfloat16, torch.float32)), ("channel-last", (torch.bfloat16, torch.float32)),
           ("channel-first, seqlen % 8 = 7", (torch.bfloat16,)),
           ("channel-first view, dout contiguous", (torch.bfloat16,)), ("channel-first + seq_idx", (torch.bfloat16,)),
           ("channel-last, dim % 8 = 4", (torch.bfloat16,)), ("channel-last + seq_idx", (torch.bfloat16,)),
           ("channel-last + seq_idx, dim % 8 = 4", (torch.bfloat16,))]
WIDTH = 4


def grads(forward, x, w, b, dout):
    """(the gradients, a function computing them again on the same graph)."""
    leaves = [t.detach().requires_grad_() for t in (x, w, b)]
    out = forward(*leaves)
    again = lambda: torch.autograd.grad(out, leaves, dout, retain_graph=True)  # noqa: E731
    return again(), again


def main():
    args, device, name = parse_args()
    check_layouts(args, LAYOUTS)
    timer = Timer(device)
    print(f"device: {name}; torch {torch.__version__} (CUDA {torch.version.cuda}); backend {args.backend}; "
          f"width {WIDTH}, bias, silu; dx, dweight, dbias\n")
    rows, cold, failures = [], [], []
    for B, D, L in QUICK_SHAPES if args.quick else SHAPES:
        for layout, dtypes in LAYOUTS:
            if args.layout and layout not in args.layout:
                continue
            Lx = L - 1 if "seqlen % 8" in layout else L  # 8k - 1: rows not 16-byte aligned
            Dx = D - 4 if "dim % 8" in layout else D  # channel vectors not 16-byte aligned
            for dtype in dtypes:
                torch.manual_seed(0)
                x = make_x(B, Dx, Lx, dtype, layout, device)
                dout = make_x(B, Dx, Lx, dtype, "channel-first" if "dout contiguous" in layout else layout, device)
                w = torch.randn(Dx, WIDTH, dtype=dtype, device=device) * 0.5
                b = torch.randn(Dx, dtype=dtype, device=device)
                seq_idx = make_seq_idx(B, Lx, device) if "seq_idx" in layout else None

                def ours(x, w, b):
                    return causal_conv1d_fn(x, w, b, seq_idx=seq_idx, activation="silu", backend=args.backend)

                def base(x, w, b):
                    return baseline(x, w, b) if seq_idx is None else baseline_seq(x, w, b, seq_idx)

                timer.sync()
                t0 = time.perf_counter()
                got, again_ours = grads(ours, x, w, b, dout)
                timer.sync()
                cold.append((f"{str(dtype)[6:]} {layout}", (B, Dx, Lx), (time.perf_counter() - t0) * 1e3))
                tf32 = torch.backends.cudnn.allow_tf32
                torch.backends.cudnn.allow_tf32 = False  # a true fp32 reference
                want, _ = grads(base, x.float(), w.float(), b.float(), dout.float())
                torch.backends.cudnn.allow_tf32 = tf32
                # Error relative to the gradient's own scale (dweight and dbias sum over B*L terms).
                err = max(((g.float() - r).abs().max() / (1 + r.abs().max())).item() for g, r in zip(got, want))
                tol = 1e-4 if dtype == torch.float32 else 2e-2
                if not err <= tol:  # also catches NaN
                    failures.append(f"{(B, Dx, Lx)} {dtype} {layout}: max relative error {err:.3g} > {tol:.3g}")
                if args.check_only:
                    continue
                _, again_base = grads(base, x, w, b, dout)
                dst, src = torch.empty_like(x), x.contiguous()
                t_ours = timer(again_ours)
                t_direct = timer(lambda: causal_conv1d_bwd_function(x, w, b, dout, seq_idx, None, None, None, False, True,
                                                                    backend=args.backend))
                t_base = timer(again_base)
                t_copy = timer(lambda: dst.copy_(x) if layout.startswith("channel-last") else dst.copy_(src)) * 1.5
                rows.append(((B, Dx, Lx), str(dtype)[6:], layout, 3 * x.numel() * x.element_size(), t_ours, t_direct,
                             t_base, t_copy, err))
                del x, dout, w, b, got, want, dst, src, again_ours, again_base
        if device.type == "cuda":
            torch.cuda.empty_cache()

    print("| shape (B,D,L) | dtype | layout | ours us | ours GB/s | copy GB/s | % of copy | direct us | direct % of copy "
          "| baseline us | speedup vs baseline | max rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, dt, layout, nbytes, t_o, t_d, t_b, t_c, err in rows:
        print(f"| {shape} | {dt} | {layout} | {t_o * 1e6:.1f} | {nbytes / t_o / 1e9:.0f} | {nbytes / t_c / 1e9:.0f} | "
              f"{100 * t_c / t_o:.0f}% | {t_d * 1e6:.1f} | {100 * t_c / t_d:.0f}% | {t_b * 1e6:.1f} | {t_b / t_o:.2f}x "
              f"| {err:.2g} |")
    print("\nFirst backward per configuration (its kernels compiled in one program, or loaded; + sync), ms:\n")
    print("| variant | shape | first backward ms |")
    print("|---|---|---|")
    for v, shape, ms in cold:
        print(f"| {v} | {shape} | {ms:.1f} |")
    print_loaded(library_report().get("backends", {}).get("nvrtc", {}))
    finish(failures, "gradients")


if __name__ == "__main__":
    main()
