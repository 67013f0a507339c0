"""What every op module (_op_fwd.py, _op_update.py, ...) shares: whether ops register as
torch.library custom ops, and the testing hook that poisons outputs.

On torch < 2.4 (no torch.library.custom_op) each op is a plain Python function, with a
torch.autograd.Function where it is differentiable; torch.compile then graph-breaks at it.
CAUSAL_CONV1D_NO_CUSTOM_OP=1 forces that path (a testing aid).
"""

from __future__ import annotations

import os

import torch

from ._diag import logger

# Testing hook: when True, outputs are filled with NaN before a backend writes them, so an
# element a backend forgets to write shows up as NaN.
poison_outputs = False

_HAS_CUSTOM_OP = all(hasattr(torch.library, n) for n in ("custom_op", "register_fake", "register_autograd"))
_FORCE_PLAIN = os.environ.get("CAUSAL_CONV1D_NO_CUSTOM_OP", "").strip() not in ("", "0")
USE_CUSTOM_OP = _HAS_CUSTOM_OP and not _FORCE_PLAIN
if not USE_CUSTOM_OP:
    logger.debug("causal_conv1d: %s; using plain Python functions with torch.autograd.Function "
                 "(torch.compile will graph-break at our ops)",
                 "CAUSAL_CONV1D_NO_CUSTOM_OP is set" if _FORCE_PLAIN else
                 f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)")


def poison(*tensors) -> None:
    """Fills freshly allocated outputs with NaN when the testing hook is on."""
    if poison_outputs:
        for t in tensors:
            if t is not None:
                t.fill_(float("nan"))


def channel_last(x: torch.Tensor) -> bool:
    """Whether x (batch, dim, seqlen) is laid out channel-last (a (batch, seqlen, dim) tensor
    transposed): outputs and states allocated for it follow the same layout."""
    return x.dim() == 3 and x.stride(1) == 1 and x.stride(2) != 1
