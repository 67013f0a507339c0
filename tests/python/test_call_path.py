"""The eager fast path: a plain eager call runs the op's implementation directly, anything torch
must see (autograd, a dispatch or function mode, a tensor subclass, functorch, tracing) goes
through the torch operator, and both give the same result."""

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from causal_conv1d import _dispatch, _ops, causal_conv1d_fn, causal_conv1d_update

pytestmark = pytest.mark.skipif(not _ops.USE_CUSTOM_OP, reason="needs torch.library.custom_op (torch >= 2.4)")


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class Subclass(torch.Tensor):
    pass


def _inputs(gen, requires_grad=False):
    x = torch.randn(2, 16, 40, generator=gen)
    w = torch.randn(16, 4, generator=gen).requires_grad_(requires_grad)
    b = torch.randn(16, generator=gen)
    return x, w, b


def test_eager_ok_only_for_plain_eager_calls(gen):
    x, w, b = _inputs(gen)
    assert _dispatch.eager_ok(x, w, b, None)
    with torch.no_grad():
        assert _dispatch.eager_ok(x, torch.nn.Parameter(w), b)  # a module's weight, in inference
    assert not _dispatch.eager_ok(x, w.clone().requires_grad_(True), b)
    with torch.no_grad():
        assert _dispatch.eager_ok(x, w.clone().requires_grad_(True), b)
    assert not _dispatch.eager_ok(x.as_subclass(Subclass), w, b)
    with OpLog():
        assert not _dispatch.eager_ok(x, w, b)
    with TorchFunctionMode():
        assert not _dispatch.eager_ok(x, w, b)
    assert not torch.func.vmap(lambda t: torch.tensor(_dispatch.eager_ok(t)))(x).any()


def test_a_dispatch_mode_sees_the_torch_operator(gen):
    x, w, b = _inputs(gen)
    want = causal_conv1d_fn(x, w, b, activation="silu", backend="cpu")
    with OpLog() as log:
        got = causal_conv1d_fn(x, w, b, activation="silu", backend="cpu")
        state = torch.randn(2, 16, 4, generator=gen)
        causal_conv1d_update(x[..., -1], state, w, b, activation="silu", backend="cpu")
    assert "causal_conv1d.fwd.default" in log.ops
    assert "causal_conv1d.update.default" in log.ops
    assert torch.equal(got, want)


def test_autograd_goes_through_the_operator_and_matches(gen):
    x, w, b = _inputs(gen, requires_grad=True)
    out = causal_conv1d_fn(x, w, b, activation="silu", backend="cpu")
    assert out.grad_fn is not None
    out.sum().backward()
    assert w.grad is not None and torch.isfinite(w.grad).all()
    with torch.no_grad():
        fast = causal_conv1d_fn(x, w, b, activation="silu", backend="cpu")
    assert fast.grad_fn is None
    assert torch.equal(fast, out.detach())
