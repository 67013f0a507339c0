"""Argument checks shared by every backend, so each one fails the same way.

Every message names the argument, what was expected and what came. Shapes and dtypes raise
ValueError and TypeError respectively (mirroring libcc1d's CC1D_ERR_INVALID_ARGUMENT and
CC1D_ERR_INVALID_TYPE). The checks only look at metadata (never at values), so they trace
under torch.compile.
"""

from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_WIDTH = 8
ACTIVATIONS = (None, "silu", "swish")


def _shape(t) -> tuple:
    return tuple(t.shape)


def check_activation(activation, fn: str) -> bool:
    """Returns True for silu/swish, False for None; raises ValueError otherwise."""
    if activation is None:
        return False
    if isinstance(activation, str) and activation in ("silu", "swish"):
        return True
    raise ValueError(f"{fn}: argument 'activation' must be None, 'silu' or 'swish'; got {activation!r}")


def _tensor(t, name: str, fn: str, optional: bool) -> None:
    if t is None and optional:
        return
    if not isinstance(t, torch.Tensor):
        what = "a torch.Tensor or None" if optional else "a torch.Tensor"
        raise TypeError(f"{fn}: argument '{name}' must be {what}; got {type(t).__name__}")


def _same_device(t, name: str, x, fn: str) -> None:
    if t.device != x.device:
        raise ValueError(f"{fn}: argument '{name}' must be on x's device ({x.device}); "
                         f"got a tensor on {t.device}")


def check_fwd(x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
              final_states_out=None, activation=None, *, fn: str = "causal_conv1d_fn",
              x_dtypes=FLOAT_DTYPES, w_dtypes=FLOAT_DTYPES) -> bool:
    """Validates the arguments of the forward; returns whether silu is applied."""
    silu = check_activation(activation, fn)
    _tensor(x, "x", fn, False)
    _tensor(weight, "weight", fn, False)
    for t, name in ((bias, "bias"), (seq_idx, "seq_idx"), (initial_states, "initial_states")):
        _tensor(t, name, fn, True)
    if return_final_states:
        _tensor(final_states_out, "final_states_out", fn, True)

    names = ", ".join(str(d).replace("torch.", "") for d in x_dtypes)
    if x.dim() != 3:
        raise ValueError(f"{fn}: argument 'x' must have 3 dims (batch, dim, seqlen); got shape {_shape(x)}")
    if x.dtype not in x_dtypes:
        raise TypeError(f"{fn}: argument 'x' must have dtype {names}; got {x.dtype}")
    batch, dim, seqlen = x.shape
    if seqlen < 1:
        raise ValueError(f"{fn}: argument 'x' must have seqlen (x.shape[2]) >= 1; got shape {_shape(x)}")

    if weight.dim() != 2:
        raise ValueError(f"{fn}: argument 'weight' must have 2 dims (dim, width); got shape {_shape(weight)}")
    if weight.dtype not in w_dtypes:
        wnames = ", ".join(str(d).replace("torch.", "") for d in w_dtypes)
        raise TypeError(f"{fn}: argument 'weight' must have dtype {wnames}; got {weight.dtype}")
    _same_device(weight, "weight", x, fn)
    if weight.shape[0] != dim:
        raise ValueError(f"{fn}: argument 'weight' must have shape (dim, width) with dim = x.shape[1] "
                         f"= {dim}; got shape {_shape(weight)}")
    width = weight.shape[1]
    if width < 1 or width > MAX_WIDTH:
        raise ValueError(f"{fn}: argument 'weight' must have a width (weight.shape[1]) between 1 and "
                         f"{MAX_WIDTH}; got {width} (shape {_shape(weight)})")

    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != dim:
            raise ValueError(f"{fn}: argument 'bias' must have shape (dim,) = ({dim},); got shape {_shape(bias)}")
        if bias.dtype != weight.dtype:
            raise TypeError(f"{fn}: argument 'bias' must have weight's dtype {weight.dtype}; got {bias.dtype}")
        _same_device(bias, "bias", x, fn)

    if seq_idx is not None:
        if seq_idx.dtype != torch.int32:
            raise TypeError(f"{fn}: argument 'seq_idx' must have dtype torch.int32; got {seq_idx.dtype}")
        if seq_idx.dim() != 2 or seq_idx.shape[0] != batch or seq_idx.shape[1] != seqlen:
            raise ValueError(f"{fn}: argument 'seq_idx' must have shape (batch, seqlen) = ({batch}, {seqlen}); "
                             f"got shape {_shape(seq_idx)}")
        _same_device(seq_idx, "seq_idx", x, fn)

    expected_states = (batch, dim, width - 1)
    if initial_states is not None:
        if (initial_states.dim() != 3 or initial_states.shape[0] != batch or initial_states.shape[1] != dim
                or initial_states.shape[2] != width - 1):
            raise ValueError(f"{fn}: argument 'initial_states' must have shape (batch, dim, width-1) = "
                             f"{expected_states}; got shape {_shape(initial_states)}")
        if initial_states.dtype != x.dtype:
            raise TypeError(f"{fn}: argument 'initial_states' must have x's dtype {x.dtype}; "
                            f"got {initial_states.dtype}")
        _same_device(initial_states, "initial_states", x, fn)

    if return_final_states and final_states_out is not None:
        f = final_states_out
        if f.dim() != 3 or f.shape[0] != batch or f.shape[1] != dim or f.shape[2] != width - 1:
            raise ValueError(f"{fn}: argument 'final_states_out' must have shape (batch, dim, width-1) = "
                             f"{expected_states}; got shape {_shape(f)}")
        if f.dtype != x.dtype:
            raise TypeError(f"{fn}: argument 'final_states_out' must have x's dtype {x.dtype}; got {f.dtype}")
        _same_device(f, "final_states_out", x, fn)
    return silu
