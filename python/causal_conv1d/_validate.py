"""Table-driven argument checks, the Python mirror of libcc1d's argument tables.

Each op describes its tensor arguments as rows (`Arg`): the size symbols of each dimension
(shared between arguments: batch, dim, width, ...), the dtype rule, whether it is optional and
whether it is written. `check()` runs the rows in order, binds each symbol the first time it
is seen, and raises a ValueError or TypeError (mirroring CC1D_ERR_INVALID_ARGUMENT and
CC1D_ERR_INVALID_TYPE) that names the function, the argument, what was expected and what came.
It looks only at metadata, never at values, so it traces under torch.compile; it runs once per
call, in the op, before any backend.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = (None, "silu", "swish")


class Arg(NamedTuple):
    name: str
    dims: tuple  # per dim: a symbol name, (symbol, offset), (symbol, offset, ">=") or None (any)
    dtype: str  # "float", "int32", or the name of an earlier argument whose dtype it must have
    optional: bool = False
    written: bool = False
    min_rank: Optional[int] = None  # ranks min_rank..len(dims) (missing trailing dims are 1)


class Table:
    """An op's argument rows (`args`, in check order) and its size limits (symbol -> (lo, hi or
    None), checked where the symbol is bound). `rows` holds the rows parsed once, for check():
    per argument (arg, rank, lowest rank, [(dim index, symbol, offset, at_least)]). A plain
    attribute, not a cache keyed by id(table): TorchDynamo before torch 2.4 cannot trace id()."""

    def __init__(self, args: tuple, limits: dict):
        self.args = args
        self.limits = limits
        self.rows = [(arg, len(arg.dims), arg.min_rank or len(arg.dims),
                      [(i,) + d for i, d in enumerate(map(_dim, arg.dims)) if d[0] is not None])
                     for arg in args]


def check_activation(activation, fn: str) -> bool:
    """Returns True for silu/swish, False for None; raises ValueError otherwise."""
    if activation is None:
        return False
    if isinstance(activation, str) and activation in ("silu", "swish"):
        return True
    raise ValueError(f"{fn}: argument 'activation' must be None, 'silu' or 'swish'; got {activation!r}")


def _shape(t) -> tuple:
    return tuple(t.shape)


def _dim(rule):
    """(symbol, offset, at_least) of a dim rule; symbol None for any size."""
    if rule is None:
        return None, 0, False
    if isinstance(rule, str):
        return rule, 0, False
    return rule[0], rule[1], len(rule) > 2


def _dim_name(rule) -> str:
    sym, off, at_least = _dim(rule)
    if sym is None:
        return "any"
    return sym + (f"{off:+d}" if off else "") + (" or more" if at_least else "")


def _names(arg: Arg) -> str:
    inner = ", ".join(_dim_name(r) for r in arg.dims)
    return f"({inner},)" if len(arg.dims) == 1 else f"({inner})"


def self_overlapping(t: torch.Tensor) -> bool:
    """Whether two indices of `t` can address one element (the rule of libcc1d's tensor.cpp)."""
    if t.is_contiguous():
        return False
    dims = sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1)
    if any(n == 0 for n in t.shape):
        return False
    extent = 1
    for stride, n in dims:
        if stride < extent:
            return True
        extent += stride * (n - 1)
    return False


def check(table: Table, fn: str, tensors: dict, float_dtypes: Sequence = FLOAT_DTYPES) -> dict:
    """Validates `tensors` (name -> tensor or None) against `table`; returns the symbol values."""
    sym: dict = {}
    first = None
    for arg, rank, lo_rank, dims in table.rows:
        t = tensors.get(arg.name)
        if t is None and arg.optional:
            continue
        if not isinstance(t, torch.Tensor):
            what = "a torch.Tensor or None" if arg.optional else "a torch.Tensor"
            raise TypeError(f"{fn}: argument '{arg.name}' must be {what}; got {type(t).__name__}")
        if t.layout != torch.strided:
            raise TypeError(f"{fn}: argument '{arg.name}' must be a dense (strided) tensor; got layout {t.layout}. "
                            f"Call .to_dense() first")
        shape = t.shape
        ndim = len(shape)
        if not lo_rank <= ndim <= rank:
            dims_text = f"{lo_rank} or {rank} dims" if lo_rank != rank else "1 dim" if rank == 1 else f"{rank} dims"
            raise ValueError(f"{fn}: argument '{arg.name}' must have {dims_text} {_names(arg)}{_expected(arg, sym)}; "
                             f"got shape {_shape(t)}")
        if arg.dtype == "float":
            if t.dtype not in float_dtypes:
                names = ", ".join(str(d).replace("torch.", "") for d in float_dtypes)
                raise TypeError(f"{fn}: argument '{arg.name}' must have dtype {names}; got {t.dtype}")
        elif arg.dtype == "int32":
            if t.dtype != torch.int32:
                raise TypeError(f"{fn}: argument '{arg.name}' must have dtype torch.int32; got {t.dtype}")
        else:
            ref = tensors[arg.dtype]
            if t.dtype != ref.dtype:
                raise TypeError(f"{fn}: argument '{arg.name}' must have {arg.dtype}'s dtype {ref.dtype}; "
                                f"got {t.dtype}")
        device = t.device
        if first is None:
            first = arg.name, device
        elif device != first[1]:
            raise ValueError(f"{fn}: argument '{arg.name}' must be on {first[0]}'s device ({first[1]}); "
                             f"got a tensor on {device}")
        for i, name, off, at_least in dims:
            size = shape[i] if i < ndim else 1  # missing trailing dims are 1
            if name not in sym:
                sym[name] = v = size - off
                lo, hi = table.limits.get(name, (0, None))
                if hi is None and v < lo:
                    raise ValueError(f"{fn}: argument '{arg.name}' must have {name} ({arg.name}.shape[{i}]) >= {lo}; "
                                     f"got shape {_shape(t)}")
                if hi is not None and not lo <= v <= hi:
                    raise ValueError(f"{fn}: argument '{arg.name}' must have a {name} ({arg.name}.shape[{i}]) "
                                     f"between {lo} and {hi}; got {v} (shape {_shape(t)})")
                continue
            want = sym[name] + off
            if (size < want) if at_least else (size != want):
                raise ValueError(f"{fn}: argument '{arg.name}' must have shape {_names(arg)}"
                                 f"{_expected(arg, sym)}; got shape {_shape(t)}")
        if arg.written:
            _check_no_overlap(arg, t, table, tensors, fn)
            if self_overlapping(t):
                raise ValueError(f"{fn}: argument '{arg.name}' is written, but its strides {tuple(t.stride())} make "
                                 f"elements share memory (an expanded or overlapping view); pass a tensor with "
                                 f"distinct elements, e.g. .contiguous() or torch.empty(...)")
    return sym


def _span(t: torch.Tensor) -> tuple:
    """[lo, hi) bytes of t's elements, or None when it has none."""
    n = t.numel()
    if n == 0:
        return None
    lo = t.data_ptr()
    if t.is_contiguous():
        return lo, lo + n * t.element_size()
    last = sum((n - 1) * st for n, st in zip(t.shape, t.stride()))
    return lo, lo + (last + 1) * t.element_size()


def _find_is_compiling():
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if f is None:  # torch 2.1, 2.2
        from torch import _dynamo

        f = _dynamo.is_compiling
    return f


_is_compiling = _find_is_compiling()


def _compiling() -> bool:
    """Whether torch.compile is tracing (torch.compiler.is_compiling, or torch._dynamo's on 2.1/2.2)."""
    return bool(_is_compiling())


def _check_no_overlap(arg: Arg, t: torch.Tensor, table: Table, tensors: dict, fn: str) -> None:
    """Raises when written argument `t` shares memory with another argument (as libcc1d does);
    skipped while torch.compile traces (fake tensors have no memory; libcc1d checks at run time)."""
    device = t.device
    if device.type not in ("cpu", "cuda") or _compiling():
        return
    mine = _span(t)
    for other in table.args:
        u = tensors.get(other.name)
        if other.name == arg.name or not isinstance(u, torch.Tensor) or u.device != device:
            continue
        theirs = _span(u)
        if mine and theirs and mine[0] < theirs[1] and theirs[0] < mine[1]:
            raise ValueError(f"{fn}: argument '{arg.name}' is written but shares memory with '{other.name}'; "
                             f"pass separate tensors")


def _expected(arg: Arg, sym: dict) -> str:
    """' = (2, 8, 3)' when every size is known, else ' with dim = 8, ...'."""
    parts = []
    for rule in arg.dims:
        name, off, at_least = _dim(rule)
        parts.append(None if name is None or name not in sym or at_least else sym[name] + off)
    if all(p is not None for p in parts):
        return " = " + (f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(map(str, parts)) + ")")
    known = [f"{_dim_name(r)} = {sym[_dim(r)[0]] + _dim(r)[1]}" for r in arg.dims
             if _dim(r)[0] in sym]
    return " with " + ", ".join(known) if known else ""
