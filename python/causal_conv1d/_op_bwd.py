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
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _dispatch, _lib, _op_fwd, _ops, _pack
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


def alloc_grads(x: Tensor, weight: Tensor, dx_out: Optional[Tensor], wants: tuple) -> tuple:
    """(dx, dweight, dbias, dinitial_states) as the op returns them: empty (0,) when not wanted."""
    batch, dim, _ = x.shape
    width = weight.shape[1]
    dx = torch.empty_like(x) if wants[0] and dx_out is None else x.new_empty((0,))
    dw = torch.empty_like(weight, memory_format=torch.contiguous_format) if wants[1] else weight.new_empty((0,))
    db = weight.new_empty((dim,)) if wants[2] else weight.new_empty((0,))
    if not wants[3]:
        di = x.new_empty((0,))
    elif _ops.channel_last(x):
        di = x.new_empty((batch, width - 1, dim)).transpose(1, 2)
    else:
        di = x.new_empty((batch, dim, width - 1))
    return dx, dw, db, di


def _workspace(t: dict, args) -> Optional[Tensor]:
    """The fp32 scratch the GPU kernels need for dweight/dbias (libcc1d allocates no device
    memory): asked of libcc1d, allocated by torch's caching allocator."""
    if t["x"].device.type != "cuda" or (t["dweight"] is None and t["dbias"] is None):
        return None
    n = _lib.library().query("cc1d_causal_conv1d_bwd_workspace", args)
    return torch.empty(n, dtype=torch.float32, device=t["x"].device)


def bwd_impl(x: Tensor, weight: Tensor, bias: Optional[Tensor], dout: Tensor, seq_idx: Optional[Tensor],
             initial_states: Optional[Tensor], dfinal_states: Optional[Tensor], dx_out: Optional[Tensor],
             silu: bool, want_dx: bool, want_dweight: bool, want_dbias: bool, want_dinitial_states: bool,
             deterministic: bool, backend: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Allocates the gradients, then lets the selected backend write them."""
    wants = (want_dx, want_dweight, want_dbias, want_dinitial_states)
    dx, dw, db, di = alloc_grads(x, weight, dx_out, wants)
    dx_target = (dx_out if dx_out is not None else dx) if want_dx else None
    targets = (dx_target, dw if want_dweight else None, db if want_dbias else None,
               di if want_dinitial_states else None)
    _ops.poison(*targets)
    scalars = dict(activation=_lib.ACT_SILU if silu else _lib.ACT_NONE, deterministic=int(bool(deterministic)))

    def run_lib(t, backend_id, stream):
        args = _pack.fill_args(CBwdArgs, t, backend=backend_id, stream=stream, **scalars)
        ws = _workspace(t, args)
        if ws is not None:
            args = _pack.fill_args(CBwdArgs, dict(t, workspace=ws), backend=backend_id, stream=stream, **scalars)
        _lib.library().call("cc1d_causal_conv1d_bwd", args)

    def run_aten():
        for target, g in zip(targets, ref_backward(x, weight, bias, dout, seq_idx, initial_states, dfinal_states,
                                                   silu, wants)):
            if target is not None:
                target.copy_(g)

    names = ("dx", "dweight", "dbias", "dinitial_states")
    call = _dispatch.OpCall(
        op="bwd", device=x.device, written=names, run_lib=run_lib, run_aten=run_aten,
        tensors=dict(x=x, weight=weight, bias=bias, seq_idx=seq_idx, initial_states=initial_states, dout=dout,
                     dfinal_states=dfinal_states, **dict(zip(names, targets))))
    _dispatch.run(call, backend or None)
    return dx, dw, db, di


SCHEMA = ("(Tensor x, Tensor weight, Tensor? bias, Tensor dout, Tensor? seq_idx, Tensor? initial_states, "
          "Tensor? dfinal_states, Tensor(a!)? dx_out, bool silu, bool want_dx, bool want_dweight, bool want_dbias, "
          "bool want_dinitial_states, bool deterministic, str backend) -> (Tensor, Tensor, Tensor, Tensor)")


def _fake(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx_out, silu, want_dx, want_dweight,
          want_dbias, want_dinitial_states, deterministic, backend):
    return alloc_grads(x, weight, dx_out, (want_dx, want_dweight, want_dbias, want_dinitial_states))


bwd = _ops.register("bwd", SCHEMA, bwd_impl, _fake, mutates=("dx_out",))


def deterministic_requested() -> bool:
    """torch's switch (torch.use_deterministic_algorithms); libcc1d adds CAUSAL_CONV1D_DETERMINISTIC."""
    return torch.are_deterministic_algorithms_enabled()


# ---- upstream's function ----------------------------------------------------------------------


def causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, return_dinitial_states,
                      silu_activation, *, backend: Optional[str] = None, fn: str = "causal_conv1d_bwd"):
    """Upstream's causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, initial_states,
    dfinal_states, dx, return_dinitial_states, silu_activation) -> (dx, dweight, dbias,
    dinitial_states), through this package's dispatch. dx: None, or a (batch, dim, seqlen) tensor
    of x's dtype and any strides written in place and returned (e.g. a chunk of a larger
    gradient). dbias is None without bias; dinitial_states is None unless return_dinitial_states
    (then channel-last when x is). dweight and dbias have weight's dtype. `fn` names the caller
    in errors (cpp_functions, causal_conv1d_cuda)."""
    check(TABLE, fn, dict(x=x, weight=weight, bias=bias, dout=dout, seq_idx=seq_idx, initial_states=initial_states,
                          dfinal_states=dfinal_states, dx=dx), FLOAT_DTYPES)
    if backend is not None:
        backend = _dispatch.check_backend_name(backend, f"{fn}: argument 'backend'")
    want_db, want_di = bias is not None, bool(return_dinitial_states)
    gx, gw, gb, gi = bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, bool(silu_activation),
                         True, True, want_db, want_di, deterministic_requested(), backend or "")
    return (gx if dx is None else dx), gw, (gb if want_db else None), (gi if want_di else None)
