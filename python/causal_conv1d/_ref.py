"""The forward written with torch ops: causal_conv1d_ref, and the 'aten' backend.

It runs on any device torch supports and computes in float32 (float64 when an input is
float64), then casts to x's dtype — the same accumulation type as libcc1d's kernels. It is
written as a sum over the W taps of shifted copies of x rather than with F.conv1d: that
makes seq_idx masking exact, and avoids TF32 convolutions on GPUs where
torch.backends.cudnn.allow_tf32 is on (the default), which would cost ~3 digits.

Semantics (a superset of upstream's reference):
    y[b,c,t] = act(bias[c] + sum_k w[c,k] * xs[b,c,t-W+1+k])
where xs = concat(initial_states or zeros, x) along time; with seq_idx, a tap whose seq_idx
differs from token t's is skipped (positions before 0 carry token 0's seq_idx), and a token
with seq_idx < 0 outputs 0. final_states = the last W-1 entries of xs (x's dtype).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F


def compute_dtype(x: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    return torch.promote_types(torch.promote_types(x.dtype, weight.dtype), torch.float32)


def ref_forward(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                seq_idx: Optional[torch.Tensor], initial_states: Optional[torch.Tensor],
                silu: bool, want_final_states: bool):
    """Returns (out, final_states or None); differentiable in x, weight, bias, initial_states."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    cdt = compute_dtype(x, weight)
    if initial_states is not None:
        pre = initial_states.to(x.dtype)
    else:
        pre = x.new_zeros((batch, dim, width - 1))
    xs = torch.cat([pre.to(cdt), x.to(cdt)], dim=-1)  # (B, D, W-1+L): position s is xs[..., s+W-1]
    w = weight.to(cdt)
    if seq_idx is not None:
        seq_idx = seq_idx.to(torch.int32)
        seq_pad = torch.cat([seq_idx[:, :1].expand(batch, width - 1), seq_idx], dim=1)
    acc = None
    for k in range(width):
        term = xs[..., k:k + seqlen] * w[:, k, None]  # tap at t-W+1+k
        if seq_idx is not None:
            same = (seq_pad[:, k:k + seqlen] == seq_idx)[:, None, :]
            term = torch.where(same, term, torch.zeros((), dtype=cdt, device=term.device))
        acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + bias.to(cdt)[:, None]
    if silu:
        acc = F.silu(acc)
    if seq_idx is not None:
        acc = torch.where((seq_idx >= 0)[:, None, :], acc, torch.zeros((), dtype=cdt, device=acc.device))
    out = acc.to(x.dtype)
    final = None
    if want_final_states:
        # Last W-1 entries of concat(pre, x), in x's dtype (no round trip through cdt).
        final = torch.cat([pre[..., seqlen:], x[..., max(0, seqlen - (width - 1)):]], dim=-1)
    return out, final
