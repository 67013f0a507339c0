"""The varlen-states op: its argument checks, its torch-ops reference (the 'aten' backend), its
libcc1d call, its torch operator causal_conv1d::varlen_states, and the public functions
causal_conv1d_varlen_states and causal_conv1d_varlen_states_ref (upstream 1.6 signatures, in
causal_conv1d.causal_conv1d_varlen).

    causal_conv1d::varlen_states(Tensor x, Tensor cu_seqlens, int state_len, str backend) -> Tensor

Semantics (upstream causal_conv1d_varlen_states): x is (total_tokens, dim), the sequences of a
batch packed along its first dimension; cu_seqlens is (batch+1,) int32, sequence b being tokens
[cu_seqlens[b], cu_seqlens[b+1]). The result is (batch, dim, state_len) in x's dtype: sequence b's
last min(len_b, state_len) tokens, transposed and right-aligned, zeros before them. It is
allocated as upstream does, empty(batch, state_len, dim).transpose(1, 2) (channel-last).
x may have any strides (upstream's kernel wants x.stride(1) == 1; here that layout is the fast
path). The op only copies: its result is bit-exact on every backend.

Not differentiable, like upstream's (a Triton kernel writing a fresh tensor): the public function
runs under torch.no_grad(), so its result never requires grad.

cu_seqlens values (non-decreasing, each in [0, total_tokens]): host tensors raise before anything
is written (libcc1d reads them); on CUDA tensors the kernel clamps them instead (end to
[0, total], begin to [0, end]: never a read outside x), and CAUSAL_CONV1D_CHECK_INDICES=1 makes
the call check them first (one device-to-host copy and a synchronisation; skipped, with a warning,
inside CUDA-graph capture).
"""

from __future__ import annotations

import ctypes
import operator

import torch
from torch import Tensor

from . import _dispatch, _lib, _ops, _pack
from ._diag import index_check_wanted
from ._validate import FLOAT_DTYPES, Arg, Table, check

TABLE = Table(
    args=(
        Arg("x", ("total_tokens", "dim"), "float"),
        Arg("cu_seqlens", (("batch", 1),), "int32"),
    ),
    limits={},
)


def check_args(x, cu_seqlens, state_len, *, fn: str, float_dtypes=FLOAT_DTYPES) -> int:
    """Validates every argument, as libcc1d's table does; returns state_len as an int."""
    if isinstance(cu_seqlens, torch.Tensor) and cu_seqlens.dim() == 1 and cu_seqlens.shape[0] == 0:
        raise ValueError(f"{fn}: argument 'cu_seqlens' must hold batch+1 >= 1 cumulative lengths (batch >= 0); "
                         f"got shape (0,)")
    check(TABLE, fn, dict(x=x, cu_seqlens=cu_seqlens), float_dtypes)
    return check_state_len(state_len, fn)


def check_state_len(state_len, fn: str) -> int:
    """state_len as an int in 1..MAX_VARLEN_STATE_LEN (checked before anything is allocated)."""
    if isinstance(state_len, bool) or not hasattr(state_len, "__index__"):
        raise TypeError(f"{fn}: argument 'state_len' must be an int; got {type(state_len).__name__}")
    state_len = operator.index(state_len)
    if not 1 <= state_len <= _lib.MAX_VARLEN_STATE_LEN:
        raise ValueError(f"{fn}: argument 'state_len' must be between 1 and {_lib.MAX_VARLEN_STATE_LEN}; "
                         f"got {state_len}")
    return state_len


def int32_lengths(x, cu_seqlens, fn: str):
    """cu_seqlens as int32. Upstream also takes int64 (what a cumsum gives): converted here, after
    the host check (exact messages) on CPU; on CUDA clamped to [-1, total+1] first, which keeps
    every bad value bad (the kernel clamps; CAUSAL_CONV1D_CHECK_INDICES still reports it) without
    a synchronisation. Anything else is left to check_args to refuse."""
    if not (isinstance(cu_seqlens, Tensor) and cu_seqlens.dtype == torch.int64 and cu_seqlens.dim() == 1
            and isinstance(x, Tensor) and x.dim() >= 1):
        return cu_seqlens
    total = x.shape[0]
    if total + 1 > torch.iinfo(torch.int32).max:
        raise ValueError(f"{fn}: argument 'x' has {total} tokens; int64 cu_seqlens are converted to int32, "
                         f"which holds at most {torch.iinfo(torch.int32).max - 1}")
    if cu_seqlens.device.type == "cpu":
        check_cu_values(x, cu_seqlens, fn)
    else:
        cu_seqlens = cu_seqlens.clamp(-1, total + 1)
    return cu_seqlens.to(torch.int32)


def check_cu_values(x: Tensor, cu_seqlens: Tensor, fn: str) -> None:
    """The value checks libcc1d does for host tensors, done here for any device (a copy to the
    host and a synchronisation on CUDA)."""
    total = x.shape[0]
    prev = None
    for i, v in enumerate(cu_seqlens.cpu().tolist()):
        if not 0 <= v <= total:
            raise ValueError(f"{fn}: argument 'cu_seqlens': cu_seqlens[{i}] is {v}; expected cumulative lengths in "
                             f"[0, total_tokens = x.shape[0] = {total}]")
        if prev is not None and v < prev:
            raise ValueError(f"{fn}: argument 'cu_seqlens': cu_seqlens[{i}] is {v}, below cu_seqlens[{i - 1}] = "
                             f"{prev}; expected non-decreasing cumulative lengths")
        prev = v


class CVarlenStatesArgs(ctypes.Structure):
    """struct cc1d_varlen_states_args."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("x", ctypes.POINTER(_lib.CTensor)),
        ("cu_seqlens", ctypes.POINTER(_lib.CTensor)),
        ("out", ctypes.POINTER(_lib.CTensor)),
        ("backend", ctypes.c_int32),
        ("stream", ctypes.c_void_p),
    ]


def empty_states(x: Tensor, batch: int, state_len: int) -> Tensor:
    """(batch, dim, state_len) in x's dtype and device, laid out as upstream allocates it."""
    return x.new_empty((batch, state_len, x.shape[1])).transpose(1, 2)


# ---- the reference ------------------------------------------------------------------------


def ref_varlen_states(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """The states written with torch ops, gathered at once (no loop over sequences, no
    synchronisation): (batch, dim, state_len), upstream's layout. Values are clamped as the
    CUDA kernel clamps them."""
    total = x.shape[0]
    cu = cu_seqlens.long()
    end = cu[1:].clamp(0, total)
    begin = torch.maximum(torch.minimum(cu[:-1].clamp(min=0), end), end - state_len)
    token = end[:, None] - state_len + torch.arange(state_len, device=x.device)  # (batch, state_len)
    if total == 0:
        rows = x.new_zeros((cu.shape[0] - 1, state_len, x.shape[1]))
    else:
        rows = x[token.clamp(0, total - 1)]  # (batch, state_len, dim)
    rows = torch.where((token >= begin[:, None])[..., None], rows, torch.zeros((), dtype=x.dtype, device=x.device))
    return rows.transpose(1, 2)


# ---- the op -------------------------------------------------------------------------------


_ARGS = _pack.packer(CVarlenStatesArgs)
_ENTRY = "cc1d_causal_conv1d_varlen_states"


def _op_call(x: Tensor, cu_seqlens: Tensor, state_len: int, out: Tensor) -> _dispatch.OpCall:
    def run_lib(t, backend_id, stream):
        _lib.library().call(_ENTRY, _pack.fill_args(CVarlenStatesArgs, t, backend=backend_id, stream=stream))

    def run_aten():
        if x.device.type == "cpu":  # raise as libcc1d does for host tensors, before writing
            check_cu_values(x, cu_seqlens, "causal_conv1d_varlen_states")
        out.copy_(ref_varlen_states(x, cu_seqlens, state_len))

    return _dispatch.OpCall(op="varlen_states", device=x.device, written=("out",), run_lib=run_lib,
                            run_aten=run_aten, tensors=dict(x=x, cu_seqlens=cu_seqlens, out=out))


def varlen_states_impl(x: Tensor, cu_seqlens: Tensor, state_len: int, backend: str) -> Tensor:
    """Allocates the states, then lets the selected backend write them."""
    if index_check_wanted(x, "causal_conv1d_varlen_states"):
        check_cu_values(x, cu_seqlens, "causal_conv1d_varlen_states")
    out = empty_states(x, cu_seqlens.shape[0] - 1, state_len)
    _ops.poison(out)
    _dispatch.run(_op_call(x, cu_seqlens, state_len, out), backend or None)
    return out


def fast(x, cu_seqlens, state_len: int, backend: str):
    """An eager call that a libcc1d backend serves where the tensors are, as _op_fwd.fast: the
    states (allocated here), or None for the full path. CUDA calls under
    CAUSAL_CONV1D_CHECK_INDICES take the full path."""
    try:
        r = _dispatch.route("varlen_states", x, backend) if _ops.MODES["varlen_states"] != "cc1d_torch" else None
        if r is None or index_check_wanted(x, "causal_conv1d_varlen_states") or x.dim() != 2 or cu_seqlens.dim() != 1:
            return None  # (the ranks first: the output's size comes from them)
        out = empty_states(x, cu_seqlens.shape[0] - 1, state_len)
        _ops.poison(out)
        status = _ARGS.call(_ENTRY, (x, cu_seqlens, out), (r.backend_id, _dispatch.stream_of(x)))
    except Exception:  # anything libcc1d cannot be given as it is (a non-tensor, a bad rank, a dtype)
        return None
    if not _dispatch.after_direct(r, _ENTRY, status, lambda: _op_call(x, cu_seqlens, state_len, out), backend):
        return None
    return out


SCHEMA = "(Tensor x, Tensor cu_seqlens, int state_len, str backend) -> Tensor"


def _fake(x, cu_seqlens, state_len, backend):
    return empty_states(x, cu_seqlens.shape[0] - 1, state_len)


varlen_states = _ops.register("varlen_states", SCHEMA, varlen_states_impl, _fake)


# ---- the public functions ------------------------------------------------------------------


def causal_conv1d_varlen_states(x: Tensor, cu_seqlens: Tensor, state_len: int, *, backend=None) -> Tensor:
    """The conv states of packed variable-length sequences (forward only, like upstream).

    x: (total_tokens, dim) fp32/fp16/bf16, any strides; cu_seqlens: (batch+1,) int32 (or int64, converted), the
    cumulative sequence lengths (non-decreasing, starting at 0); state_len: how many of each
    sequence's last tokens to keep (1..2^20). Returns states (batch, dim, state_len) in x's dtype,
    laid out like upstream's (batch, state_len, dim) transposed: sequence b's last
    min(len_b, state_len) tokens at states[b, :, -n:], zeros before them.
    backend: as for causal_conv1d_fn.
    """
    fn = "causal_conv1d_varlen_states"
    cu_seqlens = int32_lengths(x, cu_seqlens, fn)
    state_len = check_state_len(state_len, fn)
    if backend is not None:
        backend = _dispatch.check_backend_name(backend, f"{fn}: argument 'backend'")
    # Not differentiable, as upstream: the result never requires grad (the direct route's is a
    # fresh tensor written by libcc1d; the operator's runs under no_grad).
    if _dispatch.eager_ok(x, cu_seqlens, autograd=True):
        out = fast(x, cu_seqlens, state_len, backend or "")
        if out is not None:
            return out
    check_args(x, cu_seqlens, state_len, fn=fn)
    with torch.no_grad():
        return varlen_states(x, cu_seqlens, state_len, backend or "")


def causal_conv1d_varlen_states_ref(x: Tensor, cu_seqlens: Tensor, state_len: int) -> Tensor:
    """The same with torch ops (upstream's reference, without its loop over sequences). Also
    accepts float64 x; checks cu_seqlens' values on any device (a synchronisation on CUDA)."""
    fn = "causal_conv1d_varlen_states_ref"
    cu_seqlens = int32_lengths(x, cu_seqlens, fn)
    state_len = check_args(x, cu_seqlens, state_len, fn=fn, float_dtypes=FLOAT_DTYPES + (torch.float64,))
    check_cu_values(x, cu_seqlens, fn)
    with torch.no_grad():
        out = empty_states(x, cu_seqlens.shape[0] - 1, state_len)
        out.copy_(ref_varlen_states(x, cu_seqlens, state_len))
    return out
