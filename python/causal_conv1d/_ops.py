"""What every op module (_op_fwd.py, _op_update.py, ...) shares: how an op becomes the torch
operator causal_conv1d::<name>, and the testing hook that poisons outputs.

register() defines each op from its schema, its implementation, its fake (meta) implementation
and, when differentiable, its autograd formula, in one of three ways (MODE):
  "custom_op"   torch >= 2.4: torch.library.custom_op with the schema, register_fake,
                register_autograd;
  "library"     torch < 2.4 (or CAUSAL_CONV1D_NO_CUSTOM_OP=1, a testing aid): the older
                torch.library API, Library.define + impl for CPU and CUDA, an abstract impl
                (impl_abstract, or a Meta kernel on torch 2.1) and an Autograd kernel, so
                torch.compile traces the op instead of breaking the graph;
  "cc1d_torch"  the libtorch op library passed its handshake (_torch_lib.py) and defines the op
                in C++: Python adds only the fake and the autograd formula.
Every op's last argument is `str backend` ("" for no per-call choice).
"""

from __future__ import annotations

import os

import torch

from ._diag import logger

# Testing hook: when True, outputs are filled with NaN before a backend writes them, so an
# element a backend forgets to write shows up as NaN.
poison_outputs = False

NAMESPACE = "causal_conv1d"
_HAS_CUSTOM_OP = all(hasattr(torch.library, n) for n in ("custom_op", "register_fake", "register_autograd"))
_FORCE_LIBRARY = os.environ.get("CAUSAL_CONV1D_NO_CUSTOM_OP", "").strip() not in ("", "0")
USE_CUSTOM_OP = _HAS_CUSTOM_OP and not _FORCE_LIBRARY
if not USE_CUSTOM_OP:
    logger.debug("causal_conv1d: %s; ops are defined with torch.library.Library",
                 "CAUSAL_CONV1D_NO_CUSTOM_OP is set" if _FORCE_LIBRARY else
                 f"torch {torch.__version__} has no torch.library.custom_op (needs >= 2.4)")

_libraries: dict = {}  # torch.library.Library by kind: registrations live as long as these do
MODES: dict = {}  # op name -> how register() defined it (mode())


def _lib(kind: str):
    if kind not in _libraries:
        _libraries[kind] = torch.library.Library(NAMESPACE, kind)
    return _libraries[kind]


def _register_fake(qualname: str, fake, lib) -> None:
    if _HAS_CUSTOM_OP:
        torch.library.register_fake(qualname, fake, lib=lib)
    elif hasattr(torch.library, "impl_abstract"):  # torch 2.2, 2.3
        torch.library.impl_abstract(qualname, fake, lib=lib)
    else:  # torch 2.1: a Meta kernel serves fake tensors
        lib.impl(qualname.split("::")[1], fake, "Meta")


def _register_autograd(name: str, op, backward, setup_context, lib) -> None:
    if _HAS_CUSTOM_OP:
        torch.library.register_autograd(f"{NAMESPACE}::{name}", backward, setup_context=setup_context, lib=lib)
        return

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.set_materialize_grads(False)
            with torch._C._AutoDispatchBelowAutograd():
                out = op(*args)
            setup_context(ctx, args, out)
            return out

        @staticmethod
        def backward(ctx, *grads):
            return backward(ctx, *grads)

    lib.impl(name, lambda *args: Function.apply(*args), "Autograd")


def mode(name: str) -> str:
    from . import _torch_lib

    return "cc1d_torch" if _torch_lib.serves(name) else "custom_op" if USE_CUSTOM_OP else "library"


def register(name: str, schema: str, impl, fake, *, mutates=(), backward=None, setup_context=None):
    """Makes causal_conv1d::<name> with `schema` ("(Tensor x, ...) -> Tensor"); returns the
    function that calls it."""
    qualname = f"{NAMESPACE}::{name}"
    how = MODES[name] = mode(name)
    if how == "custom_op":
        op = torch.library.custom_op(qualname, impl, mutates_args=mutates, schema=schema)
        op.register_fake(fake)
        if backward is not None:
            op.register_autograd(backward, setup_context=setup_context)
    else:
        lib = _lib("DEF" if how == "library" else "IMPL")
        if how == "library":
            lib.define(name + schema)
            for key in ("CPU", "CUDA"):
                lib.impl(name, impl, key)
        _register_fake(qualname, fake, lib)
        if backward is not None:
            _register_autograd(name, getattr(torch.ops.causal_conv1d, name), backward, setup_context, lib)
    op = getattr(torch.ops.causal_conv1d, name)
    logger.debug("causal_conv1d: %s defined (%s)", qualname, how)
    from . import _dispatch, _torch_lib

    if how != "cc1d_torch":
        def eager_or_op(*args):
            # Plain eager calls with nothing for autograd, tracing or modes to see run the
            # implementation directly: what torch.ops would run, some tens of microseconds sooner.
            if _dispatch.eager_ok(*(a for a in args if isinstance(a, torch.Tensor))):
                return impl(*args)
            return op(*args)

        return eager_or_op

    def call(*args):  # use_backend() lives in Python: pass it down as the per-call choice
        try:
            return op(*args[:-1], args[-1] or _dispatch.context_choice())
        except RuntimeError as e:
            raise _torch_lib.translate(e) from None

    return call


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
