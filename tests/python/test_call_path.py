"""The eager fast path: a plain eager call runs the op's implementation directly, anything torch
must see (autograd, a dispatch or function mode, a tensor subclass, functorch, tracing) goes
through the torch operator, and both give the same result. The public functions' direct route
to libcc1d (_dispatch.route): what takes it, what does not, and how its errors read."""

import warnings

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from causal_conv1d import (_dispatch, _op_bwd, _op_fwd, _op_update, _op_varlen, _ops, causal_conv1d_fn,
                           causal_conv1d_update, last_backend)
from causal_conv1d.causal_conv1d_varlen import causal_conv1d_varlen_states
from helpers import make_seq_idx, make_states, make_x, randn
from reference import (TOL, assert_grad, assert_matches, reference_final_states, reference_grads, reference_update,
                       reference_varlen_states)

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
    seen = []
    with warnings.catch_warnings():  # torch.jit.trace is deprecated, and still used
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.trace(lambda t: seen.append(_dispatch.eager_ok(t)) or t * 2, (x,), check_trace=False)
    assert seen == [False]


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


def test_eager_autograd_and_the_operators_autograd_agree_bit_for_bit(gen):
    """A plain eager call that needs gradients records _EagerAutograd (the direct route both
    ways); the operator's registered autograd (what torch.compile and modes see) gives the same
    bits, outputs, final states and gradients alike."""
    x, w, b = _inputs(gen)
    init, dout, dfinal = torch.randn(2, 16, 3, generator=gen), torch.randn(2, 16, 40, generator=gen), \
        torch.randn(2, 16, 3, generator=gen)
    results = []
    for via in ("eager", "operator"):
        leaves = [t.clone().requires_grad_(True) for t in (x, w, b, init)]
        if via == "eager":
            out, fs = causal_conv1d_fn(*leaves[:3], initial_states=leaves[3], return_final_states=True,
                                       activation="silu", backend="cpu")
            assert type(out.grad_fn).__name__ == "_EagerAutogradBackward"
        else:
            out, fs = torch.ops.causal_conv1d.fwd(*leaves[:3], None, leaves[3], True, True, "cpu")
            assert type(out.grad_fn).__name__ != "_EagerAutogradBackward"
        torch.autograd.backward((out, fs), (dout, dfinal))
        results.append([out.detach(), fs.detach()] + [t.grad for t in leaves])
    for a, b_ in zip(*results):
        assert torch.equal(a, b_)
    with torch.no_grad():
        plain = causal_conv1d_fn(x, w, b, initial_states=init, activation="silu", backend="cpu")
    assert plain.grad_fn is None and torch.equal(plain, results[0][0])


def test_eager_autograd_goes_straight_to_libcc1d_both_ways(gen, monkeypatch, no_full_path):
    monkeypatch.setattr(_op_bwd, "check", lambda *a, **k: pytest.fail("the backward took the full path"))
    dtype = torch.bfloat16
    x = make_x(2, 24, 37, dtype, "cl", gen)
    w, b = randn((24, 4), gen, torch.float32), randn((24,), gen, torch.float32)
    init = make_states(2, 24, 4, dtype, "cf", gen)
    dout, dfinal = randn((2, 24, 37), gen, dtype), randn((2, 24, 3), gen, dtype)
    leaves = [t.clone().requires_grad_(True) for t in (x, w, b, init)]
    out, fs = causal_conv1d_fn(*leaves[:3], initial_states=leaves[3], return_final_states=True, activation="silu")
    assert_matches(out, x, w, b, None, init, silu=True)
    assert last_backend().backend == "cpu" and last_backend().op == "fwd"
    torch.autograd.backward((out, fs), (dout, dfinal))
    assert last_backend().backend == "cpu" and last_backend().op == "bwd"
    want = reference_grads(x, w, b, None, init, True, dout, dfinal)
    for name, leaf, g in zip(("x", "weight", "bias", "initial_states"), leaves, want):
        assert_grad(name, leaf.grad, g, leaf.dtype)


# ---- the direct route: libcc1d's validation only, no OpCall, no torch operator ----------------


@pytest.fixture
def no_full_path(monkeypatch, lib, fresh_dispatch, python_dispatch):
    """The full path (Python validation, _dispatch.run) fails the test if a call takes it."""
    def fail(*a, **k):
        raise AssertionError("the call took the full path")

    monkeypatch.setattr(_dispatch, "run", fail)
    monkeypatch.setattr(_op_fwd, "check_args", fail)
    monkeypatch.setattr(_op_update, "check_args", fail)
    monkeypatch.setattr(_op_varlen, "check_args", fail)


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

    packed = randn((37, 24), gen, dtype).t().contiguous().t()  # (total_tokens, dim), dim unit stride
    cu = torch.tensor([0, 5, 5, 37])
    states = causal_conv1d_varlen_states(packed, cu, 4)
    assert torch.equal(states, reference_varlen_states(packed, cu.to(torch.int32), 4))
    assert last_backend().backend == "cpu" and last_backend().op == "varlen_states"

    state = randn((3, 24, 5), gen, dtype)
    idx = torch.tensor([2, -1], dtype=torch.int32)
    want_out, want_state = reference_update(x[..., 0], state, w, b, True, None, idx)
    got = causal_conv1d_update(x[..., 0], state, w, b, "silu", conv_state_indices=idx)
    assert torch.allclose(got.double(), want_out, rtol=TOL[dtype], atol=TOL[dtype])
    assert torch.equal(state.double(), want_state)
    assert last_backend().backend == "cpu" and last_backend().op == "update"


def test_the_full_path_serves_what_the_route_cannot(gen, monkeypatch, lib, fresh_dispatch, python_dispatch):
    """Another backend (with autograd too), or a final_states_out to copy into under autograd:
    each through _dispatch.run, as before."""
    runs = []
    real = _dispatch.run
    monkeypatch.setattr(_dispatch, "run", lambda call, *a, **k: runs.append(call.op) or real(call, *a, **k))
    x, w, b = _inputs(gen)
    causal_conv1d_fn(x, w, b)
    causal_conv1d_fn(x, w.clone().requires_grad_(True), b).sum().backward()
    assert runs == []
    causal_conv1d_fn(x, w, b, backend="aten")
    assert runs == ["fwd"] and last_backend().backend == "aten"
    causal_conv1d_fn(x, w.clone().requires_grad_(True), b, backend="aten").sum().backward()
    assert runs == ["fwd", "fwd", "bwd"]
    fs = torch.empty(2, 16, 3)
    out, _ = causal_conv1d_fn(x, w.clone().requires_grad_(True), b, return_final_states=True, final_states_out=fs)
    assert runs == ["fwd", "fwd", "bwd", "fwd"] and type(out.grad_fn).__name__ != "_EagerAutogradBackward"


def _nan(shape, dtype, layout="cf"):
    """A poisoned output buffer, channel-last (a transposed view) when asked."""
    if layout == "cl":
        return torch.full((shape[0], shape[2], shape[1]), float("nan"), dtype=dtype).transpose(1, 2)
    return torch.full(shape, float("nan"), dtype=dtype)


@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_upstreams_entry_points_write_the_callers_buffers_directly(gen, layout, monkeypatch, no_full_path):
    """cpp_functions (mamba_ssm's path, backward included) and causal_conv1d_cuda's forms take the
    direct route too; the forms with out / final_states_out write those tensors, whatever their
    strides, with no copy of a result allocated elsewhere."""
    import causal_conv1d_cuda
    from causal_conv1d.cpp_functions import (causal_conv1d_bwd_function, causal_conv1d_fwd_function,
                                             causal_conv1d_update_function)

    dtype = torch.bfloat16
    x = make_x(2, 24, 37, dtype, layout, gen)
    w = randn((24, 4), gen, dtype)
    b = randn((24,), gen, dtype)
    init = make_states(2, 24, 4, dtype, layout, gen)
    want_fs = reference_final_states(x, 4, init)

    fs = _nan((2, 24, 3), dtype, "cl" if layout == "cf" else "cf")  # the other layout than x's
    out = causal_conv1d_fwd_function(x, w, b, None, init, fs, True)
    assert_matches(out, x, w, b, None, init, silu=True)
    assert torch.equal(fs, want_fs)

    out, fs = _nan(x.shape, dtype, layout), _nan((2, 24, 3), dtype)
    ptr = out.data_ptr()
    assert causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, init, out, fs, True) is None
    assert out.data_ptr() == ptr
    assert_matches(out, x, w, b, None, init, silu=True)
    assert torch.equal(fs, want_fs)
    assert last_backend().backend == "cpu" and last_backend().op == "fwd"

    # mamba_inner_fn's backward: dx a chunk of a larger gradient, written in place
    monkeypatch.setattr(_op_bwd, "check", lambda *a, **k: pytest.fail("the backward took the full path"))
    dout = randn(tuple(x.shape), gen, dtype)
    big = torch.full((2, 48, 37), float("nan"), dtype=dtype)
    dx, dw, db, di = causal_conv1d_bwd_function(x, w, b, dout, None, init, None, big[:, 24:], True, True)
    assert dx.data_ptr() == big[:, 24:].data_ptr() and torch.isnan(big[:, :24]).all()
    want = reference_grads(x, w, b, None, init, True, dout, None)
    for name, got, g, dt in zip(("x", "weight", "bias", "initial_states"), (dx, dw, db, di), want,
                                (dtype, dtype, dtype, dtype)):
        assert_grad(name, got, g, dt)
    assert last_backend().backend == "cpu" and last_backend().op == "bwd"

    for with_out in (False, True):
        state = randn((2, 24, 4), gen, dtype)
        xu = x[..., 5]
        want_out, want_state = reference_update(xu, state, w, b, True, None, None)
        if with_out:
            got = _nan((2, 24), dtype)
            assert causal_conv1d_cuda.causal_conv1d_update(xu, state, w, b, got, True, None, None) is None
        else:
            got = causal_conv1d_update_function(xu, state, w, b, True, None, None)
        assert torch.allclose(got.double(), want_out, rtol=TOL[dtype], atol=TOL[dtype])
        assert torch.equal(state.double(), want_state)
        assert last_backend().backend == "cpu" and last_backend().op == "update"


def test_a_bad_out_reads_the_same_on_both_paths(gen, lib, fresh_dispatch):
    """An out the direct route is given and libcc1d refuses (or Python refuses first) raises the
    error of the full path (backend="aten" never takes the route), names the argument, and
    leaves the buffers as they were."""
    import causal_conv1d_cuda

    def error(call, backend):
        with pytest.raises((ValueError, TypeError)) as e:
            call(backend)
        return str(e.value)

    x, w, b = _inputs(gen)
    for out in (torch.randn(2, 16, 39), torch.randn(2, 16, 40, dtype=torch.float64), x):
        before = out.clone()
        errors = {error(lambda be: causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True,
                                                                        backend=be), be) for be in ("cpu", "aten")}
        assert len(errors) == 1 and "argument 'out'" in errors.pop()
        assert torch.equal(out, before)
    state = torch.randn(2, 16, 4, generator=gen)
    kept = state.clone()
    for out in (torch.randn(2, 16, 1), torch.randn(2, 16, dtype=torch.float64)):
        errors = {error(lambda be: causal_conv1d_cuda.causal_conv1d_update(x[..., 0], state, w, b, out, True, None,
                                                                           None, backend=be), be)
                  for be in ("cpu", "aten")}
        assert len(errors) == 1 and "argument 'out'" in errors.pop()
    assert torch.equal(state, kept)


def test_arguments_libcc1d_refuses_get_the_python_wording(gen, lib, fresh_dispatch):
    """The route leaves validation to libcc1d; a refused call is validated again in Python, so
    the error is the same as on every other backend: without gradients, with them (the eager
    autograd's forward), and for the backward (cpp_functions.causal_conv1d_bwd_function)."""
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

    x, w, b = _inputs(gen)
    bad = [dict(weight=w[:, None]), dict(weight=w[:8]), dict(bias=b.double()), dict(x=x.to(torch.int32)),
           dict(seq_idx=torch.zeros(2, 40, dtype=torch.int64)), dict(initial_states=torch.randn(2, 16, 2))]
    for change in bad:
        args = dict(x=x, weight=w, bias=b, seq_idx=None, initial_states=None)
        args.update(change)
        with pytest.raises(Exception) as python:
            _op_fwd.check_args(**args)
        for grad in (False, True):
            call_args = dict(args, weight=args["weight"].clone().requires_grad_(grad))
            with pytest.raises(type(python.value)) as via_route:
                causal_conv1d_fn(**call_args)
            assert str(via_route.value) == str(python.value)
    dout = torch.randn(2, 16, 40, generator=gen)
    bad = [dict(dout=dout[..., :39]), dict(dout=dout.double()), dict(weight=w[:8]), dict(dx=torch.empty(2, 16, 41)),
           dict(dfinal_states=torch.randn(2, 16, 2)), dict(dx=x)]
    for change in bad:
        args = dict(x=x, weight=w, bias=b, dout=dout, seq_idx=None, initial_states=None, dfinal_states=None, dx=None)
        args.update(change)
        errors = set()
        for backend in ("cpu", "aten"):
            with pytest.raises((ValueError, TypeError)) as e:
                causal_conv1d_bwd_function(**args, return_dinitial_states=False, silu_activation=True,
                                           backend=backend)
            errors.add(str(e.value))
        assert len(errors) == 1, (change.keys(), errors)
    state = torch.randn(3, 16, 4)
    with pytest.raises(ValueError, match="conv_state' has 3 rows but x has batch 2"):
        causal_conv1d_update(x[..., 0], state, w, b)
    packed, cu = torch.randn(40, 16, generator=gen), torch.tensor([0, 7, 40], dtype=torch.int32)
    for bad in [dict(x=packed[None]), dict(x=packed.to(torch.int32)), dict(cu_seqlens=cu[None]),
                dict(cu_seqlens=cu.to(torch.int16)), dict(x=packed, state_len=0), dict(state_len=2.0)]:
        args = dict(dict(x=packed, cu_seqlens=cu, state_len=4), **bad)
        errors = set()
        for backend in ("cpu", "aten"):
            with pytest.raises((ValueError, TypeError)) as e:
                causal_conv1d_varlen_states(**args, backend=backend)
            errors.add(str(e.value))
        assert len(errors) == 1, (bad.keys(), errors)


def test_a_leaf_that_requires_grad_is_not_written_behind_autograds_back(gen, lib):
    """An out or final_states_out that requires grad takes the operator and its in-place copy,
    which torch refuses for a leaf as for any in-place op; the direct route never writes it."""
    import causal_conv1d_cuda

    x, w, b = _inputs(gen)
    out = torch.full((2, 16, 40), float("nan")).requires_grad_(True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True)
    fs = torch.full((2, 16, 3), float("nan")).requires_grad_(True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        causal_conv1d_fn(x, w, b, return_final_states=True, final_states_out=fs)
    assert torch.isnan(out).all() and torch.isnan(fs).all()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradient_checkpointing_recomputes_the_same_bits(gen, use_reentrant):
    """torch.utils.checkpoint (transformers' gradient checkpointing) reruns the forward during the
    backward, inside autograd's own machinery: the gradients equal a plain run's, bit for bit,
    and match the float64 reference."""
    from torch.utils.checkpoint import checkpoint

    x, w, b = _inputs(gen)
    dout = torch.randn(2, 16, 40, generator=gen)

    def loss(*leaves):
        return (causal_conv1d_fn(*leaves, activation="silu", backend="cpu") * dout).sum()

    grads = []
    for ckpt in (False, True):
        leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]
        (checkpoint(loss, *leaves, use_reentrant=use_reentrant) if ckpt else loss(*leaves)).backward()
        grads.append([t.grad for t in leaves])
    assert all(torch.equal(a, c) for a, c in zip(*grads))
    want = reference_grads(x, w, b, None, None, True, dout, None)
    for name, got, g in zip(("x", "weight", "bias"), grads[1], want):
        assert_grad(name, got, g, torch.float32)
