"""The decode-step update op: its argument table, its torch-ops reference (the 'aten' backend),
its libcc1d call, its torch operator causal_conv1d::update, and the public functions
causal_conv1d_update and causal_conv1d_update_ref (upstream 1.6 signatures).

    causal_conv1d::update(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias,
                          Tensor? cache_seqlens, Tensor? conv_state_indices, bool silu,
                          str backend) -> Tensor

Mutates conv_state in place (declared, so torch.compile and CUDA graphs see it) and returns the
output, allocated like x. Nothing else is allocated on the GPU path, so the call can be captured
in a CUDA graph. Not differentiable (neither is upstream's).

Semantics (upstream causal_conv1d_update): x is (batch, dim) or (batch, dim, seqlen); conv_state
is (pool, dim, state_len), state_len >= width-1, in x's dtype. Without cache_seqlens the state
shifts left by seqlen and x is appended; with cache_seqlens (batch,) int32 it is a circular
buffer and token t of row b goes to (cache_seqlens[b] + t) % state_len, its window being the
width-1 entries before that position (the caller advances cache_seqlens). With
conv_state_indices (batch,) int32, row b uses conv_state[indices[b]]; an index < 0 is a padding
slot: outputs 0, no state touched. Accumulation in fp32.

An index >= pool, a duplicated index or a negative cache_seqlens: host tensors raise before
anything is written (libcc1d reads them); on CUDA tensors the kernel treats such a row as
padding, and CAUSAL_CONV1D_CHECK_INDICES=1 makes the call check them first (one device-to-host
copy and a synchronisation; skipped, with a warning, inside CUDA-graph capture).
"""

from __future__ import annotations

import ctypes
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _dispatch, _lib, _ops, _pack
from ._diag import index_check_wanted
from ._validate import FLOAT_DTYPES, Arg, Table, check, check_activation

TABLE = Table(
    args=(
        Arg("x", ("batch", "dim", "seqlen"), "float", min_rank=2),
        Arg("weight", ("dim", "width"), "float"),
        Arg("bias", ("dim",), "weight", optional=True),
        Arg("conv_state", ("pool", "dim", ("width", -1, ">=")), "x", written=True),
        Arg("cache_seqlens", ("batch",), "int32", optional=True),
        Arg("conv_state_indices", ("batch",), "int32", optional=True),
    ),
    limits={"seqlen": (1, None), "width": (1, _lib.MAX_WIDTH)},
)


# With the `out` of upstream's 1.5.1-1.6 raw form (causal_conv1d_cuda.causal_conv1d_update).
TABLE_OUT = Table(args=TABLE.args + (Arg("out", ("batch", "dim", "seqlen"), "x", min_rank=2, written=True),),
                  limits=TABLE.limits)


def check_out_shape(x, out, fn: str) -> None:
    """out has x's shape: the one rule libcc1d's table does not make (it takes out of rank 2 or 3
    whatever x's rank), checked before either path."""
    if out is not None and isinstance(out, Tensor) and isinstance(x, Tensor) and out.shape != x.shape:
        raise ValueError(f"{fn}: argument 'out' must have x's shape {tuple(x.shape)}; got {tuple(out.shape)}")


def check_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, *, fn: str,
               float_dtypes=FLOAT_DTYPES, out=None) -> None:
    """Validates every argument, as libcc1d's table does, plus what only Python can see."""
    tensors = dict(x=x, conv_state=conv_state, weight=weight, bias=bias, cache_seqlens=cache_seqlens,
                   conv_state_indices=conv_state_indices, out=out)  # TABLE has no row for out
    sym = check(TABLE if out is None else TABLE_OUT, fn, tensors, float_dtypes)
    check_out_shape(x, out, fn)
    if conv_state_indices is None and sym["pool"] != sym["batch"]:
        raise ValueError(f"{fn}: argument 'conv_state' has {sym['pool']} rows but x has batch {sym['batch']}; "
                         f"without conv_state_indices they must be equal")
    if conv_state.shape[2] == 0 and x.numel() > 0:
        raise ValueError(f"{fn}: argument 'conv_state' has state_len (conv_state.shape[2]) 0; it must hold at "
                         f"least one step")


def check_index_values(x, conv_state, cache_seqlens, conv_state_indices, fn: str) -> None:
    """The value checks libcc1d does for host tensors, done here for any device (a copy to the
    host and a synchronisation on CUDA)."""
    if cache_seqlens is not None and cache_seqlens.numel():
        bad = (cache_seqlens < 0).nonzero()
        if bad.numel():
            i = int(bad[0])
            raise ValueError(f"{fn}: argument 'cache_seqlens': cache_seqlens[{i}] is {int(cache_seqlens[i])}; "
                             f"expected >= 0")
    if conv_state_indices is not None and conv_state_indices.numel():
        idx = conv_state_indices.cpu()
        pool = conv_state.shape[0]
        for i, v in enumerate(idx.tolist()):
            if v >= pool:
                raise ValueError(f"{fn}: argument 'conv_state_indices': conv_state_indices[{i}] is {v}; expected "
                                 f"< pool = conv_state.shape[0] = {pool} (or < 0 for a padding slot)")
        used = idx[idx >= 0]
        if used.unique().numel() != used.numel():
            raise ValueError(f"{fn}: argument 'conv_state_indices': an index appears twice; two rows would "
                             f"update one state slot")


class CUpdateArgs(ctypes.Structure):
    """struct cc1d_update_args."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("x", ctypes.POINTER(_lib.CTensor)),
        ("conv_state", ctypes.POINTER(_lib.CTensor)),
        ("weight", ctypes.POINTER(_lib.CTensor)),
        ("bias", ctypes.POINTER(_lib.CTensor)),
        ("cache_seqlens", ctypes.POINTER(_lib.CTensor)),
        ("conv_state_indices", ctypes.POINTER(_lib.CTensor)),
        ("out", ctypes.POINTER(_lib.CTensor)),
        ("activation", ctypes.c_int32),
        ("backend", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


# ---- the reference ------------------------------------------------------------------------


def ref_update(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor], silu: bool,
               cache_seqlens: Optional[Tensor], conv_state_indices: Optional[Tensor]) -> Tensor:
    """Upstream's update written with torch ops: updates conv_state in place, returns out (x's
    shape and dtype). Computes in float32 (float64 if an input is float64)."""
    squeeze = x.dim() == 2
    if squeeze:
        x = x.unsqueeze(-1)
    batch, dim, seqlen = x.shape
    width = weight.shape[1]
    state_len = conv_state.shape[2]
    cdt = torch.promote_types(torch.promote_types(x.dtype, weight.dtype), torch.float32)
    rows = torch.arange(batch, device=x.device) if conv_state_indices is None else conv_state_indices.long()
    live = (rows >= 0) & (rows < conv_state.shape[0])  # as the kernel: anything else is padding
    if cache_seqlens is not None:
        live = live & (cache_seqlens >= 0)
    rows = torch.where(live, rows, torch.zeros_like(rows))
    state = conv_state[rows]  # (batch, dim, state_len): a gathered copy
    if cache_seqlens is None:
        window = state[..., state_len - (width - 1):]
        new_state = torch.cat([state, x.to(state.dtype)], dim=-1)[..., -state_len:]
    else:
        cs = cache_seqlens.long()
        width_idx = torch.remainder(cs[:, None] + torch.arange(-(width - 1), 0, device=x.device), state_len)
        window = state.gather(2, width_idx[:, None, :].expand(batch, dim, width - 1))
        new_state = state.clone()
        first = max(0, seqlen - state_len)  # later tokens overwrite earlier ones at the same slot
        copy_idx = torch.remainder(cs[:, None] + torch.arange(first, seqlen, device=x.device), state_len)
        new_state.scatter_(2, copy_idx[:, None, :].expand(batch, dim, seqlen - first), x[..., first:].to(state.dtype))
    seq = torch.cat([window.to(cdt), x.to(cdt)], dim=-1)  # (batch, dim, width-1+seqlen)
    out = F.conv1d(seq, weight.to(cdt)[:, None, :], None if bias is None else bias.to(cdt), groups=dim)
    if silu:
        out = F.silu(out)
    out = torch.where(live[:, None, None], out, torch.zeros((), dtype=cdt, device=x.device)).to(x.dtype)
    if bool(live.any()):
        conv_state[rows[live]] = new_state[live]
    return out.squeeze(-1) if squeeze else out


# ---- the op -------------------------------------------------------------------------------


_ARGS = _pack.packer(CUpdateArgs)
_OUT_LIKE_X = (_ARGS.tensors.index("out"), _ARGS.tensors.index("x"))  # ArgPacker.pack's like=
_ENTRY = "cc1d_causal_conv1d_update"


def _op_call(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu: bool, out) -> _dispatch.OpCall:
    def run_lib(t, backend_id, stream):
        args = _pack.fill_args(CUpdateArgs, t, activation=_lib.ACT_SILU if silu else _lib.ACT_NONE,
                               backend=backend_id, stream=stream)
        _lib.library().call(_ENTRY, args)

    def run_aten():
        if x.device.type == "cpu":  # raise as libcc1d does for host tensors, before writing
            check_index_values(x, conv_state, cache_seqlens, conv_state_indices, "causal_conv1d_update")
        out.copy_(ref_update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices))

    return _dispatch.OpCall(
        op="update", device=x.device, written=("out", "conv_state"), run_lib=run_lib, run_aten=run_aten,
        tensors=dict(x=x, conv_state=conv_state, weight=weight, bias=bias, cache_seqlens=cache_seqlens,
                     conv_state_indices=conv_state_indices, out=out))


def fast(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu: bool, backend: str,
         out: Optional[Tensor] = None):
    """An eager call that a libcc1d backend serves where the tensors are: as _op_fwd.fast (out,
    the caller's or allocated here, or None for the full path). CUDA calls under
    CAUSAL_CONV1D_CHECK_INDICES take the full path."""
    try:
        r = _dispatch.route("update", x, backend) if _ops.MODES["update"] != "cc1d_torch" else None
        if r is None or index_check_wanted(x, "causal_conv1d_update"):
            return None
        like = None
        if out is None:
            out = torch.empty_like(x)
            like = _OUT_LIKE_X if x.is_contiguous() else None
            _ops.poison(out)
        status = _ARGS.call(_ENTRY, (x, conv_state, weight, bias, cache_seqlens, conv_state_indices, out),
                            (_lib.ACT_SILU if silu else _lib.ACT_NONE, r.backend_id, _dispatch.stream_of(x)), like)
    except Exception:  # anything libcc1d cannot be given as it is (a non-tensor, a dtype, a device)
        return None
    if not _dispatch.after_direct(r, _ENTRY, status, lambda: _op_call(
            x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, out), backend):
        return None
    return out


def call(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu: bool, backend: str, *, fn: str,
         out: Optional[Tensor] = None) -> Tensor:
    """The update of every public entry point (causal_conv1d_update, upstream's cpp_functions and
    raw forms): the eager fast path where it serves, else validation (errors name `fn`) and the
    torch operator. `out`, when given, is written (directly on the fast path, by a copy of the
    operator's result otherwise) and returned."""
    check_out_shape(x, out, fn)
    if _dispatch.eager_ok(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, out):
        res = fast(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, backend, out)
        if res is not None:
            return res
    check_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, fn=fn, out=out)
    res = update(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, backend)
    if out is None:
        return res
    out.copy_(res)
    return out


def update_impl(x: Tensor, conv_state: Tensor, weight: Tensor, bias: Optional[Tensor],
                cache_seqlens: Optional[Tensor], conv_state_indices: Optional[Tensor], silu: bool,
                backend: str) -> Tensor:
    """Allocates the output, then lets the selected backend write it and the state."""
    if index_check_wanted(x, "causal_conv1d_update"):
        check_index_values(x, conv_state, cache_seqlens, conv_state_indices, "causal_conv1d_update")
    out = torch.empty_like(x)
    _ops.poison(out)
    _dispatch.run(_op_call(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, out), backend or None)
    return out


SCHEMA = ("(Tensor x, Tensor(a!) conv_state, Tensor weight, Tensor? bias, Tensor? cache_seqlens, "
          "Tensor? conv_state_indices, bool silu, str backend) -> Tensor")


def _fake(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, backend):
    return torch.empty_like(x)


update = _ops.register("update", SCHEMA, update_impl, _fake, mutates=("conv_state",))


# ---- the public functions ------------------------------------------------------------------


def causal_conv1d_update(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                         conv_state_indices=None, *, backend: Optional[str] = None):
    """One decode step: returns out (x's shape and dtype) and updates conv_state in place.

    x: (batch, dim) or (batch, dim, seqlen); conv_state: (pool, dim, state_len) with
    state_len >= width-1, any strides; weight: (dim, width), width 1..8; bias: (dim,);
    activation: None, "silu" or "swish"; cache_seqlens: (batch,) int32, the circular-buffer
    position of each row; conv_state_indices: (batch,) int32, the state row of each batch row
    (< 0: a padding slot whose output is 0). backend: as for causal_conv1d_fn.
    """
    fn = "causal_conv1d_update"
    silu = check_activation(activation, fn)
    if backend is not None:
        backend = _dispatch.check_backend_name(backend, f"{fn}: argument 'backend'")
    return call(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu, backend or "", fn=fn)


def causal_conv1d_update_ref(x, conv_state, weight, bias=None, activation=None, cache_seqlens=None,
                             conv_state_indices=None):
    """The update written with torch ops (upstream's reference, plus conv_state_indices); updates
    conv_state in place and returns out. Also accepts float64 inputs."""
    fn = "causal_conv1d_update_ref"
    silu = check_activation(activation, fn)
    check_args(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, fn=fn,
               float_dtypes=FLOAT_DTYPES + (torch.float64,))
    check_index_values(x, conv_state, cache_seqlens, conv_state_indices, fn)
    return ref_update(x, conv_state, weight, bias, silu, cache_seqlens, conv_state_indices)
