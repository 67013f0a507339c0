"""The forward op: its argument table, its torch-ops reference (the 'aten' backend), its
libcc1d call, and its torch operator causal_conv1d::fwd.

    causal_conv1d::fwd(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx,
                       Tensor? initial_states, bool return_final_states, bool silu,
                       str backend) -> (Tensor out, Tensor final_states)

Functional (mutates nothing; both outputs are allocated inside), with a fake (meta)
implementation so torch.compile(fullgraph=True) traces through it, and an autograd formula.
`out` has x's shape, dtype and memory layout (torch.empty_like: channel-last in, channel-last
out). `final_states` is (batch, dim, width-1), channel-last when x is, else contiguous; it is
an empty (0,) tensor when return_final_states is False. `backend` is "" (no per-call choice)
or a backend name. The op trusts its arguments: the public entry (causal_conv1d_fn) validates
them once, with check().

Backward (INTERIM, until libcc1d's native backward lands): gradients are computed by re-running
the reference forward in fp32 under torch.enable_grad() and calling torch.autograd.grad on it.
Correct for every input the forward accepts, but it recomputes the forward and costs the memory
of an fp32 autograd graph.

The reference (ref_forward) computes in float32 (float64 when an input is float64), then casts
to x's dtype: the same accumulation type as libcc1d's kernels. It is a sum over the W taps of
shifted copies of x rather than F.conv1d: that makes seq_idx masking exact, and avoids TF32
convolutions on GPUs where torch.backends.cudnn.allow_tf32 is on (the default).

    y[b,c,t] = act(bias[c] + sum_k w[c,k] * xs[b,c,t-W+1+k])
where xs = concat(initial_states or zeros, x) along time; with seq_idx, a tap whose seq_idx
differs from token t's is skipped (positions before 0 carry token 0's seq_idx), and a token
with seq_idx < 0 outputs 0. final_states = the last W-1 entries of xs (x's dtype).
"""

from __future__ import annotations

import ctypes
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _dispatch, _lib, _ops
from ._validate import FLOAT_DTYPES, Arg, Table, check

TABLE = Table(
    args=(
        Arg("x", ("batch", "dim", "seqlen"), "float"),
        Arg("weight", ("dim", "width"), "float"),
        Arg("bias", ("dim",), "weight", optional=True),
        Arg("seq_idx", ("batch", "seqlen"), "int32", optional=True),
        Arg("initial_states", ("batch", "dim", ("width", -1)), "x", optional=True),
        Arg("final_states_out", ("batch", "dim", ("width", -1)), "x", optional=True, written=True),
    ),
    limits={"seqlen": (1, None), "width": (1, _lib.MAX_WIDTH)},
)


def check_args(x, weight, bias=None, seq_idx=None, initial_states=None, final_states_out=None, *,
               fn: str = "causal_conv1d_fn", float_dtypes=FLOAT_DTYPES) -> None:
    check(TABLE, fn, dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states,
                          final_states_out=final_states_out), float_dtypes)


class CFwdArgs(ctypes.Structure):
    """struct cc1d_fwd_args."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("x", ctypes.POINTER(_lib.CTensor)),
        ("weight", ctypes.POINTER(_lib.CTensor)),
        ("bias", ctypes.POINTER(_lib.CTensor)),
        ("seq_idx", ctypes.POINTER(_lib.CTensor)),
        ("initial_states", ctypes.POINTER(_lib.CTensor)),
        ("out", ctypes.POINTER(_lib.CTensor)),
        ("final_states", ctypes.POINTER(_lib.CTensor)),
        ("activation", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


# ---- the reference ------------------------------------------------------------------------


def compute_dtype(x: Tensor, weight: Tensor) -> torch.dtype:
    return torch.promote_types(torch.promote_types(x.dtype, weight.dtype), torch.float32)


def ref_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
                initial_states: Optional[Tensor], silu: bool, want_final_states: bool):
    """Returns (out, final_states or None); differentiable in x, weight, bias, initial_states."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    cdt = compute_dtype(x, weight)
    pre = initial_states.to(x.dtype) if initial_states is not None else x.new_zeros((batch, dim, width - 1))
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


# ---- the op -------------------------------------------------------------------------------


def alloc_outputs(x: Tensor, width: int, return_final_states: bool) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(x)  # preserve_format: x's layout when dense, else a dense one in x's order
    batch, dim, _ = x.shape
    if not return_final_states:
        fs = x.new_empty((0,))
    elif _ops.channel_last(x):
        fs = x.new_empty((batch, width - 1, dim)).transpose(1, 2)
    else:
        fs = x.new_empty((batch, dim, width - 1))
    return out, fs


def fwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
             initial_states: Optional[Tensor], return_final_states: bool, silu: bool,
             backend: str) -> Tuple[Tensor, Tensor]:
    """Allocates the outputs, then lets the selected backend write them."""
    out, fs = alloc_outputs(x, weight.shape[1], return_final_states)
    _ops.poison(out, fs)
    final = fs if return_final_states else None

    def run_lib(t, backend_id, stream):
        args = _lib.fill_args(CFwdArgs, t, activation=_lib.ACT_SILU if silu else _lib.ACT_NONE,
                              backend=backend_id, stream=stream)
        _lib.library().call("cc1d_causal_conv1d_fwd", args)

    def run_aten():
        res, f = ref_forward(x, weight, bias, seq_idx, initial_states, silu, final is not None)
        out.copy_(res)
        if final is not None:
            final.copy_(f)

    call = _dispatch.OpCall(
        op="fwd", device=x.device, written=("out", "final_states"), run_lib=run_lib, run_aten=run_aten,
        tensors=dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states, out=out,
                     final_states=final))
    _dispatch.run(call, backend or None)
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

if _ops.USE_CUSTOM_OP:

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
        if _dispatch.eager_ok(x, weight, bias, seq_idx, initial_states):  # what the op would run, sooner
            return fwd_impl(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend)
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
