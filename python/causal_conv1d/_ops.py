"""The forward as a torch operator: causal_conv1d::fwd.

    causal_conv1d::fwd(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx,
                       Tensor? initial_states, bool return_final_states, bool silu,
                       str backend) -> (Tensor out, Tensor final_states)

Functional (mutates nothing; both outputs are allocated inside), with a fake (meta)
implementation so torch.compile(fullgraph=True) traces through it, and an autograd formula.
`out` has x's shape, dtype and memory layout (torch.empty_like: channel-last in, channel-last
out). `final_states` is (batch, dim, width-1), channel-last when x is, else contiguous; it is
an empty (0,) tensor when return_final_states is False. `backend` is "" (no per-call choice:
use_backend()/CAUSAL_CONV1D_BACKEND/auto decide when the op runs) or a backend name.

Backward (INTERIM, until libcc1d's native backward lands): gradients are computed by re-running
causal_conv1d_ref's torch-ops forward in fp32 under torch.enable_grad() and calling
torch.autograd.grad on it. Correct for every input the forward accepts, but it recomputes the
forward and costs the memory of an fp32 autograd graph.

On torch < 2.4 (no torch.library.custom_op) the same implementation is called as a plain
Python function wrapped in a torch.autograd.Function; this is logged at debug level.
CAUSAL_CONV1D_NO_CUSTOM_OP=1 forces that path (a testing aid).
"""

from __future__ import annotations

import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _dispatch
from ._diag import logger
from ._ref import ref_forward
from ._validate import check_fwd

# Testing hook: when True, outputs are filled with NaN before a backend writes them, so an
# element a backend forgets to write shows up as NaN.
poison_outputs = False

_HAS_CUSTOM_OP = all(hasattr(torch.library, n) for n in ("custom_op", "register_fake", "register_autograd"))
_FORCE_PLAIN = os.environ.get("CAUSAL_CONV1D_NO_CUSTOM_OP", "").strip() not in ("", "0")
USE_CUSTOM_OP = _HAS_CUSTOM_OP and not _FORCE_PLAIN
if not USE_CUSTOM_OP:
    logger.debug("causal_conv1d: %s; using a plain Python function with torch.autograd.Function "
                 "(torch.compile will graph-break at causal_conv1d_fn)",
                 "CAUSAL_CONV1D_NO_CUSTOM_OP is set" if _FORCE_PLAIN else
                 f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)")


def _channel_last(x: Tensor) -> bool:
    return x.stride(1) == 1 and x.stride(2) != 1


def alloc_outputs(x: Tensor, width: int, return_final_states: bool) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(x)  # preserve_format: x's layout when dense, else a dense one in x's order
    batch, dim, _ = x.shape
    if not return_final_states:
        fs = x.new_empty((0,))
    elif _channel_last(x):
        fs = x.new_empty((batch, width - 1, dim)).transpose(1, 2)
    else:
        fs = x.new_empty((batch, dim, width - 1))
    return out, fs


def fwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
             initial_states: Optional[Tensor], return_final_states: bool, silu: bool,
             backend: str) -> Tuple[Tensor, Tensor]:
    """The real implementation: allocate, then let the selected backend write."""
    check_fwd(x, weight, bias, seq_idx, initial_states, fn="causal_conv1d::fwd")
    out, fs = alloc_outputs(x, weight.shape[1], return_final_states)
    if poison_outputs:
        out.fill_(float("nan"))
        fs.fill_(float("nan"))
    _dispatch.run_fwd(x, weight, bias, seq_idx, initial_states, out, fs if return_final_states else None,
                      silu, backend or None)
    return out, fs


# ---- backward (interim: autograd through the torch-ops reference) ---------------------------


def backward_via_ref(x, weight, bias, seq_idx, initial_states, silu: bool, return_final_states: bool,
                     needs: tuple, grad_out: Optional[Tensor], grad_final: Optional[Tensor]):
    """Returns (dx, dweight, dbias, dinitial_states); None where not needed."""
    leaves = []
    with torch.enable_grad():
        def leaf(t, need):
            if t is None:
                return None
            t = t.detach()
            if need:
                t.requires_grad_(True)
                leaves.append(t)
            return t

        xl = leaf(x, needs[0])
        wl = leaf(weight, needs[1])
        bl = leaf(bias, needs[2])
        il = leaf(initial_states, needs[3])
        if not leaves:
            return None, None, None, None
        out, fs = ref_forward(xl, wl, bl, seq_idx, il, silu, return_final_states and grad_final is not None)
        outputs, grads = [], []
        if grad_out is not None:
            outputs.append(out)
            grads.append(grad_out.to(out.dtype))
        if fs is not None and grad_final is not None and fs.numel() > 0:
            outputs.append(fs)
            grads.append(grad_final.to(fs.dtype))
        if outputs:
            g = list(torch.autograd.grad(outputs, leaves, grads, allow_unused=True))
        else:
            g = [None] * len(leaves)
    result = []
    for t, need in ((xl, needs[0]), (wl, needs[1]), (bl, needs[2]), (il, needs[3])):
        if t is not None and need:
            gi = g.pop(0)
            result.append(torch.zeros_like(t) if gi is None else gi)
        else:
            result.append(None)
    return tuple(result)


def _setup_context(ctx, inputs, output):
    x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend = inputs
    ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
    ctx.silu = silu
    ctx.return_final_states = return_final_states


def _backward(ctx, grad_out, grad_final):
    x, weight, bias, seq_idx, initial_states = ctx.saved_tensors
    n = ctx.needs_input_grad
    dx, dw, db, di = backward_via_ref(x, weight, bias, seq_idx, initial_states, ctx.silu,
                                      ctx.return_final_states, (n[0], n[1], n[2], n[4]), grad_out, grad_final)
    return dx, dw, db, None, di, None, None, None


# ---- registration ---------------------------------------------------------------------------

if USE_CUSTOM_OP:

    @torch.library.custom_op("causal_conv1d::fwd", mutates_args=())
    def fwd_op(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
               initial_states: Optional[Tensor], return_final_states: bool, silu: bool,
               backend: str) -> Tuple[Tensor, Tensor]:
        return fwd_impl(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend)

    @fwd_op.register_fake
    def _fwd_fake(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend):
        return alloc_outputs(x, weight.shape[1], return_final_states)

    fwd_op.register_autograd(_backward, setup_context=_setup_context)

    def fwd(x, weight, bias, seq_idx, initial_states, return_final_states: bool, silu: bool,
            backend: str) -> Tuple[Tensor, Tensor]:
        return torch.ops.causal_conv1d.fwd(x, weight, bias, seq_idx, initial_states,
                                           return_final_states, silu, backend)

else:

    class _Fwd(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend):
            ctx.set_materialize_grads(False)
            out, fs = fwd_impl(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend)
            ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
            ctx.silu = silu
            ctx.return_final_states = return_final_states
            return out, fs

        @staticmethod
        def backward(ctx, grad_out, grad_final):
            return _backward(ctx, grad_out, grad_final)

    fwd_op = None

    def fwd(x, weight, bias, seq_idx, initial_states, return_final_states: bool, silu: bool,
            backend: str) -> Tuple[Tensor, Tensor]:
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                           for t in (x, weight, bias, initial_states)):
            return _Fwd.apply(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend)
        return fwd_impl(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend)
