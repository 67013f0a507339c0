"""Upstream's `causal_conv1d.cpp_functions` (causal-conv1d 1.6.1): the functions mamba_ssm's
mamba_inner_fn and Mamba-2's fused path import, with upstream's argument order and semantics,
served by this package's torch ops (causal_conv1d::fwd, ::bwd, ::update: custom ops with
fake and autograd implementations, so torch.compile(fullgraph=True) traces them); plain eager
calls go straight to libcc1d, as causal_conv1d_fn's do (_op_fwd.call, _op_bwd.call,
_op_update.call).

    causal_conv1d_fwd_function(x, weight, bias, seq_idx, initial_states, final_states_out,
                               silu_activation) -> out
    causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                               return_dinitial_states, silu_activation)
        -> (dx, dweight, dbias, dinitial_states)
    causal_conv1d_update_function(x, conv_state, weight, bias, silu_activation, cache_seqlens,
                                  conv_state_indices) -> out

final_states_out, dx and conv_state, when given, are written in place (dx may be any strided
view, e.g. a chunk of a larger gradient). dbias is None without bias, dinitial_states None
unless return_dinitial_states. Every function also takes the keyword-only `backend=` of
causal_conv1d_fn, and follows use_backend(), CAUSAL_CONV1D_BACKEND, the fallbacks and strict
mode like it. Unlike upstream, seq_idx, initial_states and final states work in both layouts
and together, widths 1..8, any dim.
"""

from __future__ import annotations

from typing import Optional

from . import _dispatch, _op_bwd, _op_fwd, _op_update

__all__ = ["causal_conv1d_fwd_function", "causal_conv1d_bwd_function", "causal_conv1d_update_function"]


def flag(value, fn: str, name: str) -> bool:
    """A bool argument (upstream's extension accepts only bools): True/False, a numpy bool, or
    the ints 0 and 1."""
    if isinstance(value, bool) or type(value).__name__ == "bool_" or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{fn}: argument '{name}' must be a bool; got {type(value).__name__} {value!r}")


def backend_arg(backend, fn: str) -> str:
    return "" if backend is None else _dispatch.check_backend_name(backend, f"{fn}: argument 'backend'")


def causal_conv1d_fwd_function(x, weight, bias, seq_idx, initial_states, final_states_out, silu_activation, *,
                               backend: Optional[str] = None):
    """out = causal_conv1d(x, weight, bias) (silu when silu_activation), x's dtype and layout;
    final_states_out (batch, dim, width-1), when given, receives the last width-1 inputs."""
    fn = "causal_conv1d_fwd_function"
    silu = flag(silu_activation, fn, "silu_activation")
    want_fs = final_states_out is not None
    return _op_fwd.call(x, weight, bias, seq_idx, initial_states, want_fs, silu, backend_arg(backend, fn), fn=fn,
                        final_states_out=final_states_out)[0]


def causal_conv1d_bwd_function(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                               return_dinitial_states, silu_activation, *, backend: Optional[str] = None):
    """(dx, dweight, dbias, dinitial_states) of causal_conv1d at (x, weight, bias, seq_idx,
    initial_states) for the output gradient dout (and dfinal_states, the final states' gradient).
    dx: None, or a (batch, dim, seqlen) tensor of x's dtype, any strides, written and returned.
    dweight and dbias have weight's dtype (accumulated in fp32)."""
    fn = "causal_conv1d_bwd_function"
    silu = flag(silu_activation, fn, "silu_activation")
    return _op_bwd.causal_conv1d_bwd(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx,
                                     bool(return_dinitial_states), silu, backend=backend, fn=fn)


def causal_conv1d_update_function(x, conv_state, weight, bias, silu_activation, cache_seqlens, conv_state_indices,
                                  *, backend: Optional[str] = None):
    """One decode step (causal_conv1d_update with a bool activation): out has x's shape
    ((batch, dim, seqlen), or (batch, dim)); conv_state is updated in place."""
    fn = "causal_conv1d_update_function"
    silu = flag(silu_activation, fn, "silu_activation")
    return _op_update.call(x, conv_state, weight, bias, cache_seqlens, conv_state_indices, silu,
                           backend_arg(backend, fn), fn=fn)
