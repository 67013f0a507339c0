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

Backward: the op causal_conv1d::bwd (_op_bwd.py), or in plain eager mode its direct route
(_op_bwd.call, from _EagerAutograd), through the same dispatch as the forward (the call's
`backend`, use_backend(), CAUSAL_CONV1D_BACKEND, fallbacks, strict mode, last_backend()),
deterministic when torch.are_deterministic_algorithms_enabled() (libcc1d adds
CAUSAL_CONV1D_DETERMINISTIC). Only the inputs are saved; nothing of the forward is kept.

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

from . import _dispatch, _lib, _op_bwd, _ops, _pack
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


# With the `out` of upstream's 1.5.1-1.6 raw form (causal_conv1d_cuda.causal_conv1d_fwd).
TABLE_OUT = Table(args=TABLE.args + (Arg("out", ("batch", "dim", "seqlen"), "x", written=True),),
                  limits=TABLE.limits)


def check_args(x, weight, bias=None, seq_idx=None, initial_states=None, final_states_out=None, *,
               fn: str = "causal_conv1d_fn", float_dtypes=FLOAT_DTYPES, out=None) -> None:
    tensors = dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states,
                   final_states_out=final_states_out, out=out)  # TABLE has no row for out
    check(TABLE if out is None else TABLE_OUT, fn, tensors, float_dtypes)


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


def alloc_final_states(x: Tensor, width: int) -> Tensor:
    """(batch, dim, width-1) in x's dtype: channel-last when x is, else contiguous."""
    batch, dim, _ = x.shape
    if _ops.channel_last(x):
        return x.new_empty((batch, width - 1, dim)).transpose(1, 2)
    return x.new_empty((batch, dim, width - 1))


def alloc_outputs(x: Tensor, width: int, return_final_states: bool) -> Tuple[Tensor, Tensor]:
    out = torch.empty_like(x)  # preserve_format: x's layout when dense, else a dense one in x's order
    return out, alloc_final_states(x, width) if return_final_states else x.new_empty((0,))


_ARGS = _pack.packer(CFwdArgs)
_OUT_LIKE_X = (_ARGS.tensors.index("out"), _ARGS.tensors.index("x"))  # ArgPacker.pack's like=
_ENTRY = "cc1d_causal_conv1d_fwd"


def _op_call(x, weight, bias, seq_idx, initial_states, silu: bool, out, final) -> _dispatch.OpCall:
    def run_lib(t, backend_id, stream):
        args = _pack.fill_args(CFwdArgs, t, activation=_lib.ACT_SILU if silu else _lib.ACT_NONE,
                               backend=backend_id, stream=stream)
        _lib.library().call(_ENTRY, args)

    def run_aten():
        res, f = ref_forward(x, weight, bias, seq_idx, initial_states, silu, final is not None)
        out.copy_(res)
        if final is not None:
            final.copy_(f)

    return _dispatch.OpCall(
        op="fwd", device=x.device, written=("out", "final_states"), run_lib=run_lib, run_aten=run_aten,
        tensors=dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states, out=out,
                     final_states=final))


def fast(x, weight, bias, seq_idx, initial_states, return_final_states: bool, silu: bool, backend: str,
         out: Optional[Tensor] = None, final_states: Optional[Tensor] = None):
    """An eager call that a libcc1d backend serves where the tensors are (_dispatch.route):
    allocate, pack, call, with libcc1d's validation the only one. `out` and `final_states`: the
    caller's tensors to write (upstream's forms that take them; any strides), else allocated
    here. Returns (out, final_states or None), or None when the call takes the full path
    instead: cc1d_torch defines the op, another backend or a fallback to announce, or arguments
    libcc1d refused (nothing written; the full path's validation words the error)."""
    try:
        r = _dispatch.route("fwd", x, backend) if _ops.MODES["fwd"] != "cc1d_torch" else None
        if r is None:
            return None
        like = None
        if out is None:
            out = torch.empty_like(x)
            like = _OUT_LIKE_X if x.is_contiguous() else None
            _ops.poison(out)
        fs = final_states
        if fs is None and return_final_states:
            fs = alloc_final_states(x, weight.shape[1])
            _ops.poison(fs)
        status = _ARGS.call(_ENTRY, (x, weight, bias, seq_idx, initial_states, out, fs),
                            (_lib.ACT_SILU if silu else _lib.ACT_NONE, r.backend_id, _dispatch.stream_of(x)), like)
    except Exception:  # anything libcc1d cannot be given as it is (a non-tensor, a bad rank, a dtype)
        return None
    if not _dispatch.after_direct(r, _ENTRY, status,
                                  lambda: _op_call(x, weight, bias, seq_idx, initial_states, silu, out, fs), backend):
        return None
    return out, fs


def call(x, weight, bias, seq_idx, initial_states, want_final_states: bool, silu: bool, backend: str, *, fn: str,
         out: Optional[Tensor] = None, final_states_out: Optional[Tensor] = None) -> Tuple[Tensor, Optional[Tensor]]:
    """The forward of every public entry point (causal_conv1d_fn, upstream's cpp_functions and raw
    forms): the eager fast path where it serves, else validation (errors name `fn`) and the torch
    operator. `out` and `final_states_out` (used only when want_final_states), when given, are
    written and returned: directly on the fast path, by a copy of the operator's results
    otherwise. Returns (out, final_states or None)."""
    fs_out = final_states_out if want_final_states else None
    if _dispatch.eager_ok(x, weight, bias, seq_idx, initial_states, out, fs_out, autograd=True):
        if not (torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                                for t in (x, weight, bias, initial_states, out, fs_out))):
            res = fast(x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend, out, fs_out)
            if res is not None:
                return res
        elif out is None and fs_out is None and _ops.MODES["fwd"] != "cc1d_torch":
            res, fs = _EagerAutograd.apply(x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend,
                                           fn)
            return res, fs if want_final_states else None
    check_args(x, weight, bias, seq_idx, initial_states, fs_out, fn=fn, out=out)
    res, fs = fwd(x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend)
    if out is not None:
        out.copy_(res)
        res = out
    if fs_out is not None:
        fs_out.copy_(fs)
        fs = fs_out
    return res, fs if want_final_states else None


def fwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], seq_idx: Optional[Tensor],
             initial_states: Optional[Tensor], return_final_states: bool, silu: bool,
             backend: str) -> Tuple[Tensor, Tensor]:
    """Allocates the outputs, then lets the selected backend write them."""
    out, fs = alloc_outputs(x, weight.shape[1], return_final_states)
    _ops.poison(out, fs)
    _dispatch.run(_op_call(x, weight, bias, seq_idx, initial_states, silu, out, fs if return_final_states else None),
                  backend or None)
    return out, fs


# ---- backward: the native op -----------------------------------------------------------------


def _setup_context(ctx, inputs, output):
    x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend = inputs
    ctx.save_for_backward(x, weight, bias, seq_idx, initial_states)
    ctx.silu = silu
    # A per-call backend= is the backward's too; a use_backend() block (which cc1d_torch's ops
    # receive as "name|source", _dispatch.context_choice) is not: the backward follows the
    # context it runs in (on torch's own thread for CUDA tensors, the forward's: for_forward_of).
    ctx.backend = "" if "|" in backend else backend
    ctx.caller = _dispatch.forward_caller()


def _backward(ctx, grad_out, grad_final):
    x, weight, bias, seq_idx, initial_states = ctx.saved_tensors
    n = ctx.needs_input_grad
    wants = (n[0], n[1], n[2] and bias is not None, n[4] and initial_states is not None)
    if not any(wants):
        return None, None, None, None, None, None, None, None
    dout = grad_out.to(x.dtype) if grad_out is not None else x.new_zeros(()).expand(x.shape)
    dfinal = grad_final.to(x.dtype) if grad_final is not None and grad_final.numel() > 0 else None
    with _dispatch.for_forward_of(ctx.caller):
        dx, dw, db, di = _op_bwd.call(x, weight, bias, dout, seq_idx, initial_states, dfinal, None, ctx.silu, wants,
                                      _op_bwd.deterministic_requested(), ctx.backend)
    return dx, dw, db, None, di, None, None, None


class _EagerAutograd(torch.autograd.Function):
    """The operator's autograd formula (_setup_context, _backward) for plain eager calls, whose
    forward and backward then take the direct route (fast, _op_bwd.call) instead of torch.ops'
    dispatch and custom-op machinery: several times less host time a training step. Anything
    torch must see (torch.compile, tracing, modes, functorch) still goes through the operator."""

    @staticmethod
    def forward(ctx, x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend, fn):
        ctx.set_materialize_grads(False)
        res = fast(x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend)
        if res is None:
            check_args(x, weight, bias, seq_idx, initial_states, fn=fn)
            out, fs = fwd_impl(x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend)
        else:
            out, fs = res[0], res[1] if want_final_states else x.new_empty((0,))
        if not want_final_states:
            ctx.mark_non_differentiable(fs)
        _setup_context(ctx, (x, weight, bias, seq_idx, initial_states, want_final_states, silu, backend), None)
        return out, fs

    @staticmethod
    def backward(ctx, grad_out, grad_final):
        return (*_backward(ctx, grad_out, grad_final), None)


# ---- registration ----------------------------------------------------------------------------

SCHEMA = ("(Tensor x, Tensor weight, Tensor? bias, Tensor? seq_idx, Tensor? initial_states, "
          "bool return_final_states, bool silu, str backend) -> (Tensor, Tensor)")


def _fake(x, weight, bias, seq_idx, initial_states, return_final_states, silu, backend):
    return alloc_outputs(x, weight.shape[1], return_final_states)


fwd = _ops.register("fwd", SCHEMA, fwd_impl, _fake, backward=_backward, setup_context=_setup_context)
