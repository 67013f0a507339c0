"""Public API, names and signatures as upstream causal-conv1d 1.6 (plus a keyword-only `backend`).

    causal_conv1d_fn(x, weight, bias=None, seq_idx=None, initial_states=None,
                     return_final_states=False, final_states_out=None, activation=None,
                     *, backend=None)

x (batch, dim, seqlen) fp32/fp16/bf16 with any strides (channel-first, channel-last = a
(batch, seqlen, dim) tensor transposed, or any other view); weight (dim, width), width 1..8, of
any of the three float dtypes; bias (dim,) in weight's dtype; seq_idx (batch, seqlen) int32;
initial_states (batch, dim, width-1) in x's dtype, any layout. Unlike upstream, seq_idx,
initial_states and final states combine freely and work in both layouts. Accumulation is fp32;
out has x's dtype and layout. Returns out, or (out, final_states) when return_final_states.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _op_fwd
from ._op_update import causal_conv1d_update, causal_conv1d_update_ref
from ._dispatch import check_backend_name
from ._validate import FLOAT_DTYPES, check_activation

__all__ = [
    "causal_conv1d_fn",
    "causal_conv1d_ref",
    "causal_conv1d_update",
    "causal_conv1d_update_ref",
]


def causal_conv1d_fn(
    x,
    weight,
    bias=None,
    seq_idx=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
    *,
    backend: Optional[str] = None,
):
    """Depthwise causal 1-D convolution with optional bias and silu.

    x: (batch, dim, seqlen); weight: (dim, width); bias: (dim,); seq_idx: (batch, seqlen) int32,
    a tap whose seq_idx differs from the output token's is masked and a token with seq_idx < 0
    outputs 0; initial_states: (batch, dim, width-1), x at positions -(width-1)..-1 (they belong
    to token 0's segment); final_states_out: (batch, dim, width-1), written in place and returned
    when return_final_states; activation: None, "silu" or "swish".
    backend: None (use_backend()/CAUSAL_CONV1D_BACKEND/auto), "auto", "cpu", "aten", "nvrtc",
    "emulate"; see causal_conv1d.last_backend() for which one served.

    out: (batch, dim, seqlen) in x's dtype and x's memory layout; returns out, or
    (out, final_states).

    Differentiable in x, weight, bias and initial_states (and through final_states): the
    backward is the native op causal_conv1d::bwd on the backend this call's dispatch picks
    (deterministic under torch.use_deterministic_algorithms(True) or
    CAUSAL_CONV1D_DETERMINISTIC=1); only the inputs are saved.
    """
    silu = check_activation(activation, "causal_conv1d_fn")
    return_final_states = bool(return_final_states)
    if backend is not None:
        backend = check_backend_name(backend, "causal_conv1d_fn: argument 'backend'")
    out, fs = _op_fwd.call(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend or "",
                           fn="causal_conv1d_fn", final_states_out=final_states_out)
    return (out, fs) if return_final_states else out


def causal_conv1d_ref(
    x,
    weight,
    bias=None,
    initial_states=None,
    return_final_states=False,
    final_states_out=None,
    activation=None,
    seq_idx=None,
):
    """Reference forward written with torch ops; runs on any device, differentiable.

    Upstream's signature, plus `seq_idx` (last, keyword-friendly) with the same semantics as
    causal_conv1d_fn. Computes in float32 (float64 if x or weight is float64) and returns x's
    dtype. Also accepts float64 inputs (for high-precision references).
    """
    silu = check_activation(activation, "causal_conv1d_ref")
    _op_fwd.check_args(x, weight, bias, seq_idx, initial_states, final_states_out if return_final_states else None,
                       fn="causal_conv1d_ref", float_dtypes=FLOAT_DTYPES + (torch.float64,))
    out, fs = _op_fwd.ref_forward(x, weight, bias, seq_idx, initial_states, silu, bool(return_final_states))
    if not return_final_states:
        return out
    if final_states_out is not None:
        final_states_out.copy_(fs)
        fs = final_states_out
    return out, fs
