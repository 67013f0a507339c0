"""torch integration: the causal_conv1d::fwd custom op (opcheck), torch.compile(fullgraph=True),
autograd against the float64 reference's gradients, and the torch.library.Library path of torch < 2.4."""

import json
import os
import subprocess
import sys

import pytest
import torch

import causal_conv1d
from causal_conv1d import causal_conv1d_fn
from helpers import compile_backend, make_seq_idx, make_states, make_x, randn
from reference import reference

needs_opcheck = pytest.mark.skipif(not hasattr(torch.library, "opcheck"),
                                   reason="torch.library.opcheck needs torch >= 2.4")


def _opcheck_args(gen, layout, with_optional, requires_grad, width=4):
    B, D, L = 2, 6, 9
    x = make_x(B, D, L, torch.float32, layout, gen).requires_grad_(requires_grad)
    w = randn((D, width), gen, torch.float32).requires_grad_(requires_grad)
    if not with_optional:
        return (x, w, None, None, None, False, False, "")
    b = randn((D,), gen, torch.float32).requires_grad_(requires_grad)
    seq = make_seq_idx(B, L, gen)
    init = make_states(B, D, width, torch.float32, "cl", gen).requires_grad_(requires_grad)
    return (x, w, b, seq, init, True, True, "")


@needs_opcheck
@pytest.mark.parametrize("backend", ["", "aten"])
@pytest.mark.parametrize("case", ["plain-cf", "plain-cl-grad", "all-cf-grad", "all-cl", "all-cl-grad-w1"])
def test_opcheck(case, backend, gen):
    layout = "cl" if "-cl" in case else "cf"
    args = list(_opcheck_args(gen, layout, case.startswith("all"), "grad" in case, width=1 if "w1" in case else 4))
    args[-1] = backend
    torch.library.opcheck(torch.ops.causal_conv1d.fwd.default, tuple(args))


def test_op_schema_is_functional():
    schema = torch.ops.causal_conv1d.fwd.default._schema
    assert not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    assert [a.name for a in schema.arguments] == ["x", "weight", "bias", "seq_idx", "initial_states",
                                                 "return_final_states", "silu", "backend"]
    assert len(schema.returns) == 2


def test_fake_outputs_match_real_layouts(gen):
    """The fake implementation allocates exactly what the real one returns (shapes and strides)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    for layout in ("cf", "cl", "cf_dim_slice", "expand_batch"):
        x = make_x(2, 6, 9, torch.bfloat16, layout, gen)
        w = randn((6, 3), gen, torch.float32)
        real = torch.ops.causal_conv1d.fwd(x, w, None, None, None, True, False, "")
        with FakeTensorMode() as mode:
            fx, fw = mode.from_tensor(x), mode.from_tensor(w)
            fake = torch.ops.causal_conv1d.fwd(fx, fw, None, None, None, True, False, "")
        for r, f in zip(real, fake):
            assert (tuple(r.shape), r.stride(), r.dtype) == (tuple(f.shape), f.stride(), f.dtype), layout


@pytest.mark.slow
def test_compile_fullgraph_cpu(gen):
    """One case through inductor: the op is traced opaquely, no graph break."""
    B, D, L, W = 2, 16, 40, 4
    x = make_x(B, D, L, torch.float32, "cl", gen)
    w = randn((D, W), gen, torch.float32)
    b = randn((D,), gen, torch.float32)
    init = make_states(B, D, W, torch.float32, "cf", gen)

    def f(x, w, b, init):
        y, fs = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=True, activation="silu")
        return y * 2 + 1, fs

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    y, fs = compiled(x, w, b, init)
    ey, efs = f(x, w, b, init)
    torch.testing.assert_close(y, ey, rtol=1e-6, atol=1e-6)
    assert torch.equal(fs, efs)
    assert causal_conv1d.last_backend().backend == "cpu"


def test_compile_fullgraph_backward_aot_eager(gen):
    """Forward and backward traced by AOTAutograd (aot_eager: no C++ compile), fullgraph."""
    B, D, L, W = 2, 8, 20, 3
    x = make_x(B, D, L, torch.float32, "cf", gen).requires_grad_()
    w = randn((D, W), gen, torch.float32).requires_grad_()

    def f(x, w):
        return causal_conv1d_fn(x, w, activation="silu").square().sum()

    torch._dynamo.reset()
    loss = torch.compile(f, fullgraph=True, backend=compile_backend("aot_eager"))(x, w)
    gx, gw = torch.autograd.grad(loss, (x, w))
    ex, ew = torch.autograd.grad(f(x, w), (x, w))
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gw, ew)


# ---- autograd ------------------------------------------------------------------------------


def _grad_case(gen, xd, wd, layout, seq, backend):
    B, D, L, W = 2, 8, 37, 4
    x = make_x(B, D, L, xd, layout, gen).detach().requires_grad_()
    w = randn((D, W), gen, wd).requires_grad_()
    b = randn((D,), gen, wd).requires_grad_()
    init = make_states(B, D, W, xd, "cl", gen).requires_grad_()
    seq_idx = make_seq_idx(B, L, gen) if seq else None
    out, fs = causal_conv1d_fn(x, w, b, seq_idx=seq_idx, initial_states=init, return_final_states=True,
                               activation="silu", backend=backend)
    gout = randn(out.shape, gen, torch.float32)
    gfs = randn(fs.shape, gen, torch.float32)
    got = torch.autograd.grad((out, fs), (x, w, b, init), (gout.to(out.dtype), gfs.to(fs.dtype)))

    leaves = [t.detach().double().requires_grad_() for t in (x, w, b, init)]
    r = reference(leaves[0], leaves[1], leaves[2], seq_idx, leaves[3], silu=True)
    rfs = torch.cat([leaves[3], leaves[0]], -1)[..., L:]
    want = torch.autograd.grad((r, rfs), leaves, (gout.double(), gfs.double()))
    return got, want


@pytest.mark.parametrize("backend", ["cpu", "aten"])
@pytest.mark.parametrize("seq", [False, True], ids=["noseq", "seq"])
@pytest.mark.parametrize("layout", ["cf", "cl"])
def test_gradients_fp32(backend, layout, seq, gen):
    got, want = _grad_case(gen, torch.float32, torch.float32, layout, seq, backend)
    for name, g, e in zip(("x", "weight", "bias", "initial_states"), got, want):
        assert g.dtype == torch.float32
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-4, msg=lambda m: f"d{name}: {m}")


@pytest.mark.parametrize("pair", [(torch.bfloat16, torch.float32), (torch.float16, torch.bfloat16)],
                         ids=["xbf16-wfp32", "xfp16-wbf16"])
def test_gradients_half(pair, gen):
    xd, wd = pair
    got, want = _grad_case(gen, xd, wd, "cl", True, "cpu")
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (xd, wd, wd, xd)):
        assert g.dtype == dt, f"d{name} has dtype {g.dtype}, expected its input's {dt}"
        scale = e.abs().max().item() + 1e-3
        torch.testing.assert_close(g.double(), e, rtol=3e-2, atol=3e-2 * scale, msg=lambda m: f"d{name}: {m}")


def test_gradient_without_final_states_and_partial_requires_grad(gen):
    B, D, L, W = 1, 4, 10, 3
    x = randn((B, D, L), gen, torch.float32)
    w = randn((D, W), gen, torch.float32).requires_grad_()
    out = causal_conv1d_fn(x, w)
    (gw,) = torch.autograd.grad(out.sum(), (w,))
    wl = w.detach().double().requires_grad_()
    (ew,) = torch.autograd.grad(reference(x, wl).sum(), (wl,))
    torch.testing.assert_close(gw.double(), ew, rtol=1e-5, atol=1e-5)


def test_no_custom_op_path_subprocess(gen):
    """CAUSAL_CONV1D_NO_CUSTOM_OP=1 exercises the torch < 2.4 path (torch.library.Library define,
    impl, fake and Autograd kernel), called through the operator (a plain causal_conv1d_fn call
    would record _EagerAutograd in either mode): forward and gradients agree with this process's
    causal_conv1d_fn."""
    code = r"""
import json, torch, causal_conv1d
from causal_conv1d import _ops
g = torch.Generator().manual_seed(7)
x = torch.randn(2, 8, 25, generator=g).requires_grad_()
w = torch.randn(8, 4, generator=g).requires_grad_()
out, fs = torch.ops.causal_conv1d.fwd(x, w, None, None, None, True, True, "")
assert type(out.grad_fn).__name__ != "_EagerAutogradBackward", type(out.grad_fn).__name__
gx, gw = torch.autograd.grad(out.square().sum() + fs.sum(), (x, w))
print(json.dumps({"custom_op": _ops.USE_CUSTOM_OP, "backend": causal_conv1d.last_backend().backend,
                  "out": out.detach().tolist(), "gx": gx.tolist(), "gw": gw.tolist()}))
"""
    env = dict(os.environ, CAUSAL_CONV1D_NO_CUSTOM_OP="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["custom_op"] is False
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 8, 25, generator=g).requires_grad_()
    w = torch.randn(8, 4, generator=g).requires_grad_()
    out, fs = causal_conv1d_fn(x, w, activation="silu", return_final_states=True)
    gx, gw = torch.autograd.grad(out.square().sum() + fs.sum(), (x, w))
    torch.testing.assert_close(torch.tensor(res["out"]), out.detach())
    torch.testing.assert_close(torch.tensor(res["gx"]), gx)
    torch.testing.assert_close(torch.tensor(res["gw"]), gw)
