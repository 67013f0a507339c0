"""The functions of the top-level module `causal_conv1d_cuda` (upstream's raw extension), on
every backend, in every positional form a release of upstream's extension had, told apart by
the number of arguments (each count names one form) and checked by type:

  causal_conv1d_fwd                                                             upstream
    4  (x, weight, bias, silu_activation) -> out                                1.0
    5  (x, weight, bias, seq_idx, silu_activation) -> out                       1.1
    7  (x, weight, bias, seq_idx, initial_states, final_states_out,
        silu_activation) -> out                                                 1.2-1.5.0
    8  (x, weight, bias, seq_idx, initial_states, out, final_states_out,
        silu_activation) -> None                                                1.5.1-1.6
  causal_conv1d_bwd
    6  (x, weight, bias, dout, dx, silu_activation) -> [dx, dweight, dbias]     1.0
    7  (x, weight, bias, dout, seq_idx, dx, silu_activation)
        -> [dx, dweight, dbias]                                                 1.1
    10 (x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
        return_dinitial_states, silu_activation)
        -> [dx, dweight, dbias, dinitial_states]                                1.2-1.5.0
    12 (x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
        dweight, dbias, dinitial_states, silu_activation) -> None               1.5.1-1.6
  causal_conv1d_update
    5  (x, conv_state, weight, bias, silu_activation) -> out                    1.0-1.3
    6  (x, conv_state, weight, bias, silu_activation, cache_seqlens) -> out     1.4
    7  (x, conv_state, weight, bias, silu_activation, cache_seqlens,
        conv_state_indices) -> out                                              1.5.0
    8  (x, conv_state, weight, bias, out, silu_activation, cache_seqlens,
        conv_state_indices) -> None                                             1.5.1-1.6

As upstream's extension does, the 1.5.1-1.6 forms write into the tensors they are given: fwd into
out and final_states_out; bwd into dx and dinitial_states, and it ADDS the gradients to dweight
and dbias (upstream's kernels accumulate; callers pass zeros). The older forms allocate and
return, with dx written in place when given. In old forms dx, dbias and dinitial_states are
None where upstream returned an undefined tensor. Arguments may also be given by these names
as keywords; `backend=` (keyword only) picks a backend as for causal_conv1d_fn.

The 1.5.1-1.6 forward and update write `out` directly when a libcc1d backend serves an eager
call (as causal_conv1d_fn's fast path); otherwise, as every backward, they go through the torch
ops causal_conv1d::fwd, ::bwd, ::update and copy into the given tensors, so torch.compile and CUDA
graphs see in-place copies they understand.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from . import _op_bwd, _op_fwd, _op_update
from ._validate import FLOAT_DTYPES, Arg, Table, check
from .cpp_functions import backend_arg, flag

# The kind of each argument name: "T" a tensor, "T?" a tensor or None, "b" a bool. dx is a
# tensor in the 1.5.1-1.6 form and optional in older ones (its form overrides, below).
KINDS = {
    "x": "T", "weight": "T", "bias": "T?", "seq_idx": "T?", "initial_states": "T?", "final_states_out": "T?",
    "out": "T", "dout": "T", "dfinal_states": "T?", "dx": "T?", "dweight": "T", "dbias": "T?",
    "dinitial_states": "T?", "conv_state": "T", "cache_seqlens": "T?", "conv_state_indices": "T?",
    "silu_activation": "b", "return_dinitial_states": "b",
}


class Form(NamedTuple):
    release: str  # the upstream releases whose extension had this form
    names: tuple
    required: tuple = ()  # names that must be tensors here although optional elsewhere


def _forms(*forms: Form) -> dict:
    return {len(f.names): f for f in forms}


FWD_FORMS = _forms(
    Form("1.0", ("x", "weight", "bias", "silu_activation")),
    Form("1.1", ("x", "weight", "bias", "seq_idx", "silu_activation")),
    Form("1.2-1.5.0", ("x", "weight", "bias", "seq_idx", "initial_states", "final_states_out", "silu_activation")),
    Form("1.5.1-1.6", ("x", "weight", "bias", "seq_idx", "initial_states", "out", "final_states_out",
                       "silu_activation")),
)
BWD_FORMS = _forms(
    Form("1.0", ("x", "weight", "bias", "dout", "dx", "silu_activation")),
    Form("1.1", ("x", "weight", "bias", "dout", "seq_idx", "dx", "silu_activation")),
    Form("1.2-1.5.0", ("x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx",
                       "return_dinitial_states", "silu_activation")),
    Form("1.5.1-1.6", ("x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx", "dweight",
                 "dbias", "dinitial_states", "silu_activation"), required=("dx",)),
)
UPDATE_FORMS = _forms(
    Form("1.0-1.3", ("x", "conv_state", "weight", "bias", "silu_activation")),
    Form("1.4", ("x", "conv_state", "weight", "bias", "silu_activation", "cache_seqlens")),
    Form("1.5.0", ("x", "conv_state", "weight", "bias", "silu_activation", "cache_seqlens", "conv_state_indices")),
    Form("1.5.1-1.6", ("x", "conv_state", "weight", "bias", "out", "silu_activation", "cache_seqlens",
                 "conv_state_indices")),
)


def _describe(forms: dict) -> str:
    return "; ".join(f"{n} ({', '.join(f.names)}) [upstream {f.release}]" for n, f in sorted(forms.items()))


def bind(fn: str, forms: dict, args: tuple, kwargs: dict) -> tuple:
    """(form, {name: value}) for a call, chosen by the number of arguments and checked by type."""
    n = len(args) + len(kwargs)
    form = forms.get(n)
    if form is None:
        raise TypeError(f"{fn}: no known form matches {n} arguments; expected one of: {_describe(forms)}")
    got = dict(zip(form.names, args))
    for k, v in kwargs.items():
        if k not in form.names:
            raise TypeError(f"{fn}: unexpected keyword argument '{k}' for the {n}-argument form "
                            f"({', '.join(form.names)}) [upstream {form.release}]")
        if k in got:
            raise TypeError(f"{fn}: argument '{k}' given twice (by position and by keyword)")
        got[k] = v
    for name in form.names:
        kind = "T" if name in form.required else KINDS[name]
        v = got[name]
        if kind == "b":
            got[name] = flag(v, f"{fn} ({n}-argument form, upstream {form.release})", name)
        elif not (isinstance(v, torch.Tensor) or (v is None and kind == "T?")):
            what = "a torch.Tensor" if kind == "T" else "a torch.Tensor or None"
            raise TypeError(f"{fn}: argument '{name}' (position {form.names.index(name) + 1} of the {n}-argument "
                            f"form, upstream {form.release}) must be {what}; got {type(v).__name__}")
    # Every name, None where this form has none (dict.get of an absent key does not trace under
    # TorchDynamo in torch 2.1).
    return form, {name: got[name] if name in got else None for name in KINDS}


# The backward's written outputs in its 1.5.1-1.6 form (the forward's and the update's: their
# TABLE_OUT), checked beside the op's own arguments (shape, dtype, device, no overlap).
BWD_OUT = Table(args=_op_bwd.TABLE.args + (
    Arg("dweight", ("dim", "width"), "float", written=True),
    Arg("dbias", ("dim",), "dweight", optional=True, written=True),
    Arg("dinitial_states", ("batch", "dim", ("width", -1)), "x", optional=True, written=True),
), limits=_op_bwd.TABLE.limits)


def causal_conv1d_fwd(*args, backend: Optional[str] = None, **kwargs):
    fn = "causal_conv1d_cuda.causal_conv1d_fwd"
    form, a = bind(fn, FWD_FORMS, args, kwargs)
    x, weight, bias = a["x"], a["weight"], a["bias"]
    seq_idx, init, fs_out, out = a["seq_idx"], a["initial_states"], a["final_states_out"], a["out"]
    res, _ = _op_fwd.call(x, weight, bias, seq_idx, init, fs_out is not None, a["silu_activation"],
                          backend_arg(backend, fn), fn=fn, out=out, final_states_out=fs_out)
    return None if out is not None else res


def causal_conv1d_update(*args, backend: Optional[str] = None, **kwargs):
    fn = "causal_conv1d_cuda.causal_conv1d_update"
    form, a = bind(fn, UPDATE_FORMS, args, kwargs)
    x, state, weight, bias, out = a["x"], a["conv_state"], a["weight"], a["bias"], a["out"]
    cs, idx = a["cache_seqlens"], a["conv_state_indices"]
    res = _op_update.call(x, state, weight, bias, cs, idx, a["silu_activation"], backend_arg(backend, fn), fn=fn,
                          out=out)
    return None if out is not None else res


def causal_conv1d_bwd(*args, backend: Optional[str] = None, **kwargs):
    fn = "causal_conv1d_cuda.causal_conv1d_bwd"
    form, a = bind(fn, BWD_FORMS, args, kwargs)
    x, weight, bias, dout, dx = a["x"], a["weight"], a["bias"], a["dout"], a["dx"]
    seq_idx, init, dfinal = a["seq_idx"], a["initial_states"], a["dfinal_states"]
    silu = a["silu_activation"]
    if "dweight" not in form.names:  # the older forms: allocate and return
        ret = _op_bwd.causal_conv1d_bwd(x, weight, bias, dout, seq_idx, init, dfinal, dx,
                                        a["return_dinitial_states"] is True, silu, backend=backend, fn=fn)
        return list(ret) if "return_dinitial_states" in form.names else list(ret[:3])
    dweight, dbias, dinit = a["dweight"], a["dbias"], a["dinitial_states"]
    check(BWD_OUT, fn, dict(x=x, weight=weight, bias=bias, dout=dout, seq_idx=seq_idx, initial_states=init,
                            dfinal_states=dfinal, dx=dx, dweight=dweight, dbias=dbias, dinitial_states=dinit),
          FLOAT_DTYPES)
    # fp32 gradient buffers for a 16-bit weight (what upstream's callers pass): the op runs on
    # the weight widened to fp32 (exact; the kernels compute in fp32 anyway) so the gradient
    # keeps fp32 precision on its way into dweight and dbias.
    wide = dweight.dtype == torch.float32 and weight.dtype != torch.float32
    w = weight.float() if wide else weight
    b = bias.float() if wide and bias is not None else bias
    want_db, want_di = dbias is not None, dinit is not None
    _, gw, gb, gi = _op_bwd.call(x, w, b, dout, seq_idx, init, dfinal, dx, silu, (True, True, want_db, want_di),
                                 _op_bwd.deterministic_requested(), backend_arg(backend, fn))
    dweight.add_(gw)
    if want_db:
        dbias.add_(gb)
    if want_di:
        dinit.copy_(gi)
    return None
