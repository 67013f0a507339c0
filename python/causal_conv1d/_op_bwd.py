"""The backward op: its argument table, its torch-ops reference (the 'aten' backend: the
gradient of the forward's reference written out with torch ops), its libcc1d call, its torch operator causal_conv1d::bwd, and
causal_conv1d_bwd, the function behind upstream's cpp_functions.causal_conv1d_bwd_function.

    causal_conv1d::bwd(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor? seq_idx,
                       Tensor? initial_states, Tensor? dfinal_states, Tensor(a!)? dx_out,
                       bool silu, bool want_dx, bool want_dweight, bool want_dbias,
                       bool want_dinitial_states, bool deterministic, str backend)
        -> (Tensor dx, Tensor dweight, Tensor dbias, Tensor dinitial_states)

Each gradient is computed only when wanted; an unwanted one is an empty (0,) tensor. dx is
written into dx_out when given (then the returned dx is empty), else allocated like x. dweight
and dbias have weight's dtype (fp32 accumulation inside); dinitial_states is (batch, dim,
width-1) in x's dtype, channel-last when x is (like the forward's final states). dbias and
dinitial_states may be asked for without bias or initial_states (the gradient at zero).
`deterministic` asks for bitwise-reproducible dweight/dbias (libcc1d also reads
CAUSAL_CONV1D_DETERMINISTIC itself). `backend` is "" or a backend name, as for the forward.
"""

from __future__ import annotations

import ctypes
import os
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _diag, _dispatch, _lib, _op_fwd, _ops, _pack
from ._validate import FLOAT_DTYPES, Arg, Table, check

TABLE = Table(
    args=(
        Arg("x", ("batch", "dim", "seqlen"), "float"),
        Arg("weight", ("dim", "width"), "float"),
        Arg("bias", ("dim",), "weight", optional=True),
        Arg("dout", ("batch", "dim", "seqlen"), "x"),
        Arg("seq_idx", ("batch", "seqlen"), "int32", optional=True),
        Arg("initial_states", ("batch", "dim", ("width", -1)), "x", optional=True),
        Arg("dfinal_states", ("batch", "dim", ("width", -1)), "x", optional=True),
        Arg("dx", ("batch", "dim", "seqlen"), "x", optional=True, written=True),
    ),
    limits={"seqlen": (1, None), "width": (1, _lib.MAX_WIDTH)},
)


class CBwdArgs(ctypes.Structure):
    """struct cc1d_bwd_args."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("x", ctypes.POINTER(_lib.CTensor)),
        ("weight", ctypes.POINTER(_lib.CTensor)),
        ("bias", ctypes.POINTER(_lib.CTensor)),
        ("seq_idx", ctypes.POINTER(_lib.CTensor)),
        ("initial_states", ctypes.POINTER(_lib.CTensor)),
        ("dout", ctypes.POINTER(_lib.CTensor)),
        ("dfinal_states", ctypes.POINTER(_lib.CTensor)),
        ("dx", ctypes.POINTER(_lib.CTensor)),
        ("dweight", ctypes.POINTER(_lib.CTensor)),
        ("dbias", ctypes.POINTER(_lib.CTensor)),
        ("dinitial_states", ctypes.POINTER(_lib.CTensor)),
        ("workspace", ctypes.POINTER(_lib.CTensor)),
        ("activation", ctypes.c_int32),
        ("deterministic", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


# ---- the reference (the aten backend) -------------------------------------------------------


def ref_backward(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, silu: bool, wants: tuple):
    """(dx, dweight, dbias, dinitial_states), None where not wanted: the gradient of the forward's
    reference (_op_fwd.ref_forward) written out with torch ops, in its compute dtype. (Not autograd
    through that reference: inside a torch custom op autograd is off; this needs no graph either.)

    With xs = concat(initial_states or 0, x), g = dout * silu'(z) (dout without silu; 0 at padding
    tokens) and m_k the seq_idx mask of tap k: dxs[t+k] += m_k w_k g[t], dw_k = sum m_k g xs[t+k],
    db = sum g, and dfinal_states adds to the last W-1 entries of xs (the final states)."""
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    cdt = _op_fwd.compute_dtype(x, weight)
    pre = initial_states.to(cdt) if initial_states is not None else x.new_zeros((batch, dim, width - 1), dtype=cdt)
    xs = torch.cat([pre, x.to(cdt)], dim=-1)
    w = weight.to(cdt)
    zero = torch.zeros((), dtype=cdt, device=x.device)
    same = [None] * width
    if seq_idx is not None:
        seq = seq_idx.to(torch.int32)
        seq_pad = torch.cat([seq[:, :1].expand(batch, width - 1), seq], dim=1)
        same = [(seq_pad[:, k:k + seqlen] == seq)[:, None, :] for k in range(width)]
    tap = [(lambda t, k=k: t if same[k] is None else torch.where(same[k], t, zero)) for k in range(width)]
    g = dout.to(cdt)
    if silu:
        z = sum(tap[k](xs[..., k:k + seqlen] * w[:, k, None]) for k in range(width))
        if bias is not None:
            z = z + bias.to(cdt)[:, None]
        s = torch.sigmoid(z)
        g = g * s * (1 + z * (1 - s))
    if seq_idx is not None:
        g = torch.where((seq >= 0)[:, None, :], g, zero)  # padding tokens output a constant 0
    dxs = torch.zeros_like(xs) if wants[0] or wants[3] else None
    dw = []
    for k in range(width):
        gk = tap[k](g)
        if dxs is not None:
            dxs[..., k:k + seqlen] += gk * w[:, k, None]
        if wants[1]:
            dw.append((gk * xs[..., k:k + seqlen]).sum(dim=(0, 2)))
    if dxs is not None and dfinal_states is not None:
        dxs[..., seqlen:] += dfinal_states.to(cdt)  # the final states are the last W-1 entries of xs
    return (dxs[..., width - 1:].to(x.dtype) if wants[0] else None,
            torch.stack(dw, dim=1).to(weight.dtype) if wants[1] else None,
            g.sum(dim=(0, 2)).to(weight.dtype) if wants[2] else None,
            dxs[..., :width - 1].to(x.dtype) if wants[3] else None)


# ---- the op ---------------------------------------------------------------------------------


def _alloc(x: Tensor, weight: Tensor, wants: tuple) -> tuple:
    """(dx, dweight, dbias, dinitial_states), None where not wanted."""
    dim, width = weight.shape
    return (torch.empty_like(x) if wants[0] else None,
            torch.empty_like(weight, memory_format=torch.contiguous_format) if wants[1] else None,
            weight.new_empty((dim,)) if wants[2] else None,
            _op_fwd.alloc_final_states(x, width) if wants[3] else None)


def alloc_grads(x: Tensor, weight: Tensor, dx_out: Optional[Tensor], wants: tuple) -> tuple:
    """(dx, dweight, dbias, dinitial_states) as the op returns them: empty (0,) when not wanted,
    and dx when it is written into dx_out."""
    grads = _alloc(x, weight, (wants[0] and dx_out is None, *wants[1:]))
    return tuple(g if g is not None else (x if i in (0, 3) else weight).new_empty((0,)) for i, g in enumerate(grads))


def _workspace(x: Tensor, args) -> Tensor:
    """The fp32 scratch the GPU kernels need for dweight/dbias on CUDA tensors (libcc1d
    allocates no device memory): its size asked of libcc1d with the packed `args`, allocated by
    torch's caching allocator."""
    n = _lib.library().query("cc1d_causal_conv1d_bwd_workspace", args)
    return torch.empty(n, dtype=torch.float32, device=x.device)


_ARGS = _pack.packer(CBwdArgs)
_ENTRY = "cc1d_causal_conv1d_bwd"
_NAMES = ("dx", "dweight", "dbias", "dinitial_states")


def _op_call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, silu, wants, deterministic,
             targets) -> _dispatch.OpCall:
    """The call for _dispatch.run: targets are the gradients to write, None where not wanted."""
    scalars = dict(activation=_lib.ACT_SILU if silu else _lib.ACT_NONE, deterministic=int(bool(deterministic)))

    def run_lib(t, backend_id, stream):
        args = _pack.fill_args(CBwdArgs, t, backend=backend_id, stream=stream, **scalars)
        if t["x"].is_cuda and (t["dweight"] is not None or t["dbias"] is not None):
            args = _pack.fill_args(CBwdArgs, dict(t, workspace=_workspace(t["x"], args)), backend=backend_id,
                                   stream=stream, **scalars)
        _lib.library().call(_ENTRY, args)

    def run_aten():
        for target, g in zip(targets, ref_backward(x, weight, bias, dout, seq_idx, initial_states, dfinal_states,
                                                   silu, wants)):
            if target is not None:
                target.copy_(g)

    return _dispatch.OpCall(
        op="bwd", device=x.device, written=_NAMES, run_lib=run_lib, run_aten=run_aten,
        tensors=dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states, dout=dout,
                     dfinal_states=dfinal_states, **dict(zip(_NAMES, targets))))


def bwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], dout: Tensor, seq_idx: Optional[Tensor],
             initial_states: Optional[Tensor], dfinal_states: Optional[Tensor], dx_out: Optional[Tensor],
             silu: bool, want_dx: bool, want_dweight: bool, want_dbias: bool, want_dinitial_states: bool,
             deterministic: bool, backend: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Allocates the gradients, then lets the selected backend write them."""
    wants = (want_dx, want_dweight, want_dbias, want_dinitial_states)
    dx, dw, db, di = alloc_grads(x, weight, dx_out, wants)
    targets = _targets(dx_out if dx_out is not None else dx, dw, db, di, wants)
    _ops.poison(*targets)
    _dispatch.run(_op_call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, silu, wants, deterministic,
                           targets), backend or None)
    return dx, dw, db, di


def _targets(dx, dw, db, di, wants) -> tuple:
    return tuple(g if w else None for g, w in zip((dx, dw, db, di), wants))


def fast(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu: bool, wants: tuple,
         deterministic: bool, backend: str):
    """An eager call that a libcc1d backend serves where the tensors are, as _op_fwd.fast: the
    wanted gradients, allocated here (dx: dx_out when given), written by one call into libcc1d
    (two on CUDA with dweight or dbias: the workspace's size first). Returns (dx, dweight, dbias,
    dinitial_states), None where not wanted, or None for the full path."""
    try:
        r = _dispatch.route("bwd", x, backend) if _ops.MODES["bwd"] != "cc1d_torch" else None
        if r is None:
            return None
        targets = _alloc(x, weight, (wants[0] and dx_out is None, *wants[1:]))
        if wants[0] and dx_out is not None:
            targets = (dx_out, *targets[1:])
        _ops.poison(*targets)
        tensors = (x, weight, bias, seq_idx, initial_states, dout, dfinal_states, *targets, None)
        scalars = (_lib.ACT_SILU if silu else _lib.ACT_NONE, int(bool(deterministic)), r.backend_id,
                   _dispatch.stream_of(x))
        if x.is_cuda and (wants[1] or wants[2]):
            tensors = tensors[:-1] + (_workspace(x, _ARGS.pack(tensors, scalars)),)
        status = _ARGS.call(_ENTRY, tensors, scalars)
    except Exception:  # anything libcc1d cannot be given as it is (a non-tensor, a bad rank, a dtype)
        return None
    if not _dispatch.after_direct(r, _ENTRY, status, lambda: _op_call(
            x, weight, bias, dout, seq_idx, initial_states, dfinal_states, silu, wants, deterministic, targets),
            backend):
        return None
    return targets


SCHEMA = ("(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor? seq_idx, Tensor? initial_states, "
          "Tensor? dfinal_states, Tensor(a!)? dx_out, bool silu, bool want_dx, bool want_dweight, bool want_dbias, "
          "bool want_dinitial_states, bool deterministic, str backend) -> (Tensor, Tensor, Tensor, Tensor)")


def _fake(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu, want_dx, want_dweight,
          want_dbias, want_dinitial_states, deterministic, backend):
    return alloc_grads(x, weight, dx_out, (want_dx, want_dweight, want_dbias, want_dinitial_states))


bwd = _ops.register("bwd", SCHEMA, bwd_impl, _fake, mutates=("dx_out",))


def _env_turns_deterministic_off() -> bool:
    value = os.environ.get("CAUSAL_CONV1D_DETERMINISTIC", "").strip().lower()
    return bool(value) and value in _diag.FALSE_WORDS


# TorchDynamo before torch 2.4 (which added torch.library.custom_op) cannot read os.environ: there
# the value is a constant of the trace. Only there: the decorator imports torch._dynamo, which
# took 1.1 s of `import causal_conv1d` under torch 2.15.
if not hasattr(torch.library, "custom_op"):
    _env_turns_deterministic_off = torch.compiler.assume_constant_result(_env_turns_deterministic_off)


def deterministic_requested() -> bool:
    """torch's switch (torch.use_deterministic_algorithms), unless CAUSAL_CONV1D_DETERMINISTIC turns
    it off (0, false, no, off: the atomics even under torch's switch, upstream's rule). libcc1d
    reads CAUSAL_CONV1D_DETERMINISTIC=1 itself on every call."""
    return not _env_turns_deterministic_off() and torch.are_deterministic_algorithms_enabled()


# ---- the entry points ------------------------------------------------------------------------


def call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu: bool, wants: tuple,
         deterministic: bool, backend: str, *, fn: Optional[str] = None) -> tuple:
    """The backward of every entry point (upstream's functions, the forward's autograd): the eager
    fast path where it serves, else validation (when `fn` names the caller: errors name it) and
    the torch operator. Returns (dx, dweight, dbias, dinitial_states), None where not wanted; dx
    is dx_out when given."""
    if _dispatch.eager_ok(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out):
        res = fast(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu, wants,
                   deterministic, backend)
        if res is not None:
            return res
    if fn is not None:
        check(TABLE, fn, dict(x=x, weight=weight, bias=bias, dout=dout, seq_idx=seq_idx,
                              initial_states=initial_states, dfinal_states=dfinal_states, dx=dx_out), FLOAT_DTYPES)
    dx, dw, db, di = bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu, *wants,
                         deterministic, backend)
    return _targets(dx_out if dx_out is not None else dx, dw, db, di, wants)


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, return_dinitial_states,
                      silu_activation, *, backend: Optional[str] = None, fn: str = "causal_conv1d_bwd"):
    """Upstream's causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, initial_states,
    dfinal_states, dx, return_dinitial_states, silu_activation) -> (dx, dweight, dbias,
    dinitial_states), through this package's dispatch. dx: None, or a (batch, dim, seqlen) tensor
    of x's dtype and any strides written in place and returned (e.g. a chunk of a larger
    gradient). dbias is None without bias; dinitial_states is None unless return_dinitial_states
    (then channel-last when x is). dweight and dbias have weight's dtype. `fn` names the caller
    in errors (cpp_functions, causal_conv1d_cuda)."""
    if backend is not None:
        backend = _dispatch.check_backend_name(backend, f"{fn}: argument 'backend'")
    wants = (True, True, bias is not None, bool(return_dinitial_states))
    return call(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, bool(silu_activation), wants,
                deterministic_requested(), backend or "", fn=fn)
