"""Upstream's module causal_conv1d.causal_conv1d_varlen: the conv states of packed
variable-length sequences, names and signatures as upstream causal-conv1d 1.6 (plus a
keyword-only `backend` on causal_conv1d_varlen_states).

    causal_conv1d_varlen_states(x, cu_seqlens, state_len, *, backend=None)
    causal_conv1d_varlen_states_ref(x, cu_seqlens, state_len)

Upstream's version is a Triton kernel; here it is the native op causal_conv1d::varlen_states on
every backend (cpu, emulate, nvrtc, aten). See _op_varlen.py for the semantics.
"""

from __future__ import annotations

from ._op_varlen import causal_conv1d_varlen_states, causal_conv1d_varlen_states_ref

__all__ = ["causal_conv1d_varlen_states", "causal_conv1d_varlen_states_ref"]
