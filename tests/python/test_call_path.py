"""The eager fast path: a plain eager call runs the op's implementation directly, anything torch
must see (autograd, a dispatch or function mode, a tensor subclass, functorch, tracing) goes
through the torch operator, and both give the same result. The public functions' direct route
to libcc1d (_dispatch.route): what takes it, what does not, and how its errors read."""

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from causal_conv1d import _dispatch, _op_fwd, _op_update, _ops, causal_conv1d_fn, causal_conv1d_update, last_backend
from helpers import make_seq_idx, make_states, make_x, randn
from reference import TOL, assert_matches, reference_final_states, reference_update

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


# ---- the direct route: libcc1d's validation only, no OpCall, no torch operator ----------------


@pytest.fixture
def no_full_path(monkeypatch, lib, fresh_dispatch, python_dispatch):
    """The full path (Python validation, _dispatch.run) fails the test if a call takes it."""
    def fail(*a, **k):
        raise AssertionError("the call took the full path")

    monkeypatch.setattr(_dispatch, "run", fail)
    monkeypatch.setattr(_op_fwd, "check_args", fail)
    monkeypatch.setattr(_op_update, "check_args", fail)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_plain_eager_calls_go_straight_to_libcc1d(gen, dtype, no_full_path):
    x = make_x(2, 24, 37, dtype, "cl", gen)
    w = randn((24, 4), gen, dtype)
    b = randn((24,), gen, dtype)
    init = make_states(2, 24, 4, dtype, "cf", gen)
    seq = make_seq_idx(2, 37, gen)
    out, fs = causal_conv1d_fn(x, w, b, seq, init, True, None, "silu")
    assert_matches(out, x, w, b, seq, init, silu=True)
    assert torch.equal(fs, reference_final_states(x, 4, init))
    assert last_backend().backend == "cpu" and last_backend().op == "fwd"

    state = randn((3, 24, 5), gen, dtype)
    idx = torch.tensor([2, -1], dtype=torch.int32)
    want_out, want_state = reference_update(x[..., 0], state, w, b, True, None, idx)
    got = causal_conv1d_update(x[..., 0], state, w, b, "silu", conv_state_indices=idx)
    assert torch.allclose(got.double(), want_out, rtol=TOL[dtype], atol=TOL[dtype])
    assert torch.equal(state.double(), want_state)
    assert last_backend().backend == "cpu" and last_backend().op == "update"


def test_the_full_path_serves_what_the_route_cannot(gen, monkeypatch, lib, fresh_dispatch, python_dispatch):
    """Another backend, an output argument, autograd: each through _dispatch.run, as before."""
    runs = []
    real = _dispatch.run
    monkeypatch.setattr(_dispatch, "run", lambda call, *a, **k: runs.append(call.op) or real(call, *a, **k))
    x, w, b = _inputs(gen)
    causal_conv1d_fn(x, w, b)
    assert runs == []
    causal_conv1d_fn(x, w, b, backend="aten")
    assert runs == ["fwd"] and last_backend().backend == "aten"
    fs = torch.empty(2, 16, 3)
    causal_conv1d_fn(x, w, b, return_final_states=True, final_states_out=fs)
    causal_conv1d_fn(x, w.clone().requires_grad_(True), b)
    assert runs == ["fwd"] * 3


def test_arguments_libcc1d_refuses_get_the_python_wording(gen, lib, fresh_dispatch):
    """The route leaves validation to libcc1d; a refused call is validated again in Python, so
    the error is the same as on every other backend."""
    x, w, b = _inputs(gen)
    bad = [dict(weight=w[:, None]), dict(weight=w[:8]), dict(bias=b.double()), dict(x=x.to(torch.int32)),
           dict(seq_idx=torch.zeros(2, 40, dtype=torch.int64)), dict(initial_states=torch.randn(2, 16, 2))]
    for change in bad:
        args = dict(x=x, weight=w, bias=b, seq_idx=None, initial_states=None)
        args.update(change)
        with pytest.raises((ValueError, TypeError)) as via_route:
            causal_conv1d_fn(**args)
        with pytest.raises(type(via_route.value)) as python:
            _op_fwd.check_args(**args)
        assert str(via_route.value) == str(python.value)
    state = torch.randn(3, 16, 4)
    with pytest.raises(ValueError, match="conv_state' has 3 rows but x has batch 2"):
        causal_conv1d_update(x[..., 0], state, w, b)
