"""Every upstream module path, imported and called the way real clients do (mamba_ssm 1.x-2.x,
Mamba-2's fused path, transformers), on every backend here, against the float64 reference of
reference.py, outputs poisoned with NaN first (conftest): causal_conv1d (and __version__),
causal_conv1d.causal_conv1d_interface, causal_conv1d.cpp_functions and the top-level module
causal_conv1d_cuda in each of its positional forms (the 1.5.1-1.6 forms with outputs passed
in, and the older ones that return them). torch.compile and CUDA graphs: test_compat_compile.py.
"""

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest
import torch

import causal_conv1d
from helpers import DEV_BACKENDS, REPO, make_bwd_case, make_states, make_x, randn, run_python, served_by
from reference import TOL, assert_grad, assert_matches, reference_final_states, reference_grads, reference_update


# ---- imports and signatures -------------------------------------------------------------------


def test_client_imports():
    """The import lines of mamba_ssm (1.x, 2.x), Mamba-2's ssd_combined, and transformers."""
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update  # noqa: F401
    from causal_conv1d.causal_conv1d_interface import (  # noqa: F401
        causal_conv1d_fn as fn2, causal_conv1d_ref, causal_conv1d_update as up2, causal_conv1d_update_ref)
    from causal_conv1d.cpp_functions import (  # noqa: F401
        causal_conv1d_bwd_function, causal_conv1d_fwd_function, causal_conv1d_update_function)
    from causal_conv1d.causal_conv1d_varlen import (  # noqa: F401
        causal_conv1d_varlen_states, causal_conv1d_varlen_states_ref)
    import causal_conv1d_cuda

    assert fn2 is causal_conv1d_fn and up2 is causal_conv1d_update
    for name in ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"):
        assert callable(getattr(causal_conv1d_cuda, name))


def test_version_is_the_upstream_api_level():
    """Clients compare causal_conv1d.__version__ with upstream releases; the package's own
    version is package_version (what CMake, pyproject and the CLI use)."""
    from causal_conv1d import _version

    assert causal_conv1d.__version__ == "1.6.1"
    assert causal_conv1d.package_version == _version.__version__
    assert tuple(int(p) for p in causal_conv1d.__version__.split(".")) >= (1, 4, 0)  # mamba_ssm's kind of check


def test_causal_conv1d_cuda_imports_first_in_a_fresh_process():
    """`import causal_conv1d_cuda` alone (before causal_conv1d), in mamba_ssm's try block."""
    r = run_python("try:\n    import causal_conv1d_cuda\nexcept ImportError:\n    causal_conv1d_cuda = None\n"
                   "import torch\nassert causal_conv1d_cuda is not None\n"
                   "x = torch.randn(1, 4, 6); w = torch.randn(4, 3)\n"
                   "print(causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, True).shape)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "torch.Size([1, 4, 6])"


UPSTREAM_SIGNATURES = {
    "causal_conv1d.causal_conv1d_varlen.causal_conv1d_varlen_states": ["x", "cu_seqlens", "state_len"],
    "causal_conv1d.causal_conv1d_varlen.causal_conv1d_varlen_states_ref": ["x", "cu_seqlens", "state_len"],
    "causal_conv1d.causal_conv1d_interface.causal_conv1d_fn": [
        "x", "weight", "bias", "seq_idx", "initial_states", "return_final_states", "final_states_out", "activation"],
    "causal_conv1d.causal_conv1d_interface.causal_conv1d_update": [
        "x", "conv_state", "weight", "bias", "activation", "cache_seqlens", "conv_state_indices"],
    "causal_conv1d.causal_conv1d_interface.causal_conv1d_ref": [
        "x", "weight", "bias", "initial_states", "return_final_states", "final_states_out", "activation"],
    "causal_conv1d.causal_conv1d_interface.causal_conv1d_update_ref": [
        "x", "conv_state", "weight", "bias", "activation", "cache_seqlens"],
    "causal_conv1d.cpp_functions.causal_conv1d_fwd_function": [
        "x", "weight", "bias", "seq_idx", "initial_states", "final_states_out", "silu_activation"],
    "causal_conv1d.cpp_functions.causal_conv1d_bwd_function": [
        "x", "weight", "bias", "dout", "seq_idx", "initial_states", "dfinal_states", "dx", "return_dinitial_states",
        "silu_activation"],
    "causal_conv1d.cpp_functions.causal_conv1d_update_function": [
        "x", "conv_state", "weight", "bias", "silu_activation", "cache_seqlens", "conv_state_indices"],
}


@pytest.mark.parametrize("path", sorted(UPSTREAM_SIGNATURES))
def test_signatures_start_with_upstreams(path):
    """Upstream's parameters, in upstream's order, first (extras after them, keyword-friendly)."""
    mod, name = path.rsplit(".", 1)
    params = list(inspect.signature(getattr(importlib.import_module(mod), name)).parameters)
    want = UPSTREAM_SIGNATURES[path]
    assert params[:len(want)] == want, params


def test_wheel_ships_causal_conv1d_cuda():
    """The install rule: pyproject's wheel.packages lists every top-level package of python/."""
    tomllib = pytest.importorskip("tomllib")
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    shipped = set(cfg["tool"]["scikit-build"]["wheel"]["packages"])
    packages = {f"python/{p.name}" for p in (REPO / "python").iterdir() if (p / "__init__.py").exists()}
    assert "python/causal_conv1d_cuda" in packages
    assert packages <= shipped, f"not shipped in the wheel: {sorted(packages - shipped)}"


# ---- cpp_functions -----------------------------------------------------------------------------


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_fwd_function_as_mamba_inner_fn_calls_it(device, backend, gen):
    from causal_conv1d.cpp_functions import causal_conv1d_fwd_function

    x = make_x(2, 24, 37, torch.bfloat16, "cf", gen, device)
    w = randn((24, 4), gen, torch.bfloat16, device)
    b = randn((24,), gen, torch.bfloat16, device)
    out = causal_conv1d_fwd_function(x, w, b, None, None, None, True, backend=backend)
    served_by(backend, "fwd")
    assert_matches(out, x, w, b, silu=True)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_fwd_function_keywords_states_and_seq_idx(device, backend, gen):
    """Keyword call (as Mamba-2's ssd_combined after ensure_stride: channel-last x), with
    initial_states and final_states_out written in place."""
    from causal_conv1d.cpp_functions import causal_conv1d_fwd_function

    B, D, L, W = 2, 16, 29, 4
    x = make_x(B, D, L, torch.float32, "cl", gen, device)
    w = randn((D, W), gen, torch.float32, device)
    init = make_states(B, D, W, torch.float32, "cl", gen, device)
    fs = torch.full((B, W - 1, D), float("nan"), device=device).transpose(1, 2)
    out = causal_conv1d_fwd_function(x=x, weight=w, bias=None, seq_idx=None, initial_states=init,
                                     final_states_out=fs, silu_activation=False, backend=backend)
    assert_matches(out, x, w, initial_states=init)
    assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), W, init.cpu()))


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_bwd_function_writes_a_chunk_of_a_larger_gradient(device, backend, layout, gen):
    """mamba_inner_fn: dx = dxz.chunk(2, dim=1)[0] (channel-first); Mamba-2: a column block of a
    (B, L, d_total) gradient, transposed (channel-last). The chunk is written (it starts NaN);
    the rest of the larger tensor keeps its values."""
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function

    B, D, L, W = 2, 16, 45, 4
    x, w, b, _, _, dout, _ = make_bwd_case(gen, device, layout, torch.bfloat16, torch.bfloat16, W, L, D, bias=True,
                                           seq=False, init=False, dfinal=False)
    if layout == "cf":
        big = randn((B, 2 * D, L), gen, torch.bfloat16, device)
        dx = big.chunk(2, dim=1)[0]
    else:
        big = randn((B, L, 3 * D), gen, torch.bfloat16, device)
        dx = big[:, :, D:2 * D].transpose(1, 2)
    dx.fill_(float("nan"))
    before = big.clone()
    gx, gw, gb, gi = causal_conv1d_bwd_function(x, w, b, dout, None, None, None, dx, False, True, backend=backend)
    served_by(backend, "bwd")
    assert gx is dx and gi is None
    want = reference_grads(x, w, b, None, None, True, dout, None)
    for name, g, e, dt in zip(("x", "weight", "bias"), (gx, gw, gb), want, (x.dtype, w.dtype, w.dtype)):
        assert_grad(name, g, e, dt)
    mask = torch.isnan(before)
    assert torch.equal(big[~mask], before[~mask]), "elements outside the dx chunk changed"


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_update_function(device, backend, gen):
    from causal_conv1d.cpp_functions import causal_conv1d_update_function

    B, D, W, S = 3, 16, 4, 5
    x = randn((B, D, 2), gen, torch.float32, device)
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    state = randn((B, D, S), gen, torch.float32, device)
    want_out, want_state = reference_update(x, state, w, b, True)
    out = causal_conv1d_update_function(x, state, w, b, True, None, None, backend=backend)
    served_by(backend, "update")
    torch.testing.assert_close(out.double().cpu(), want_out, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state.double().cpu(), want_state, rtol=0, atol=0)


# ---- causal_conv1d_cuda: the 1.5.1-1.6 forms, outputs passed in ------------------------------------


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_fwd_8_args_writes_out(device, backend, gen):
    import causal_conv1d_cuda

    B, D, L, W = 2, 16, 33, 3
    x = make_x(B, D, L, torch.float16, "cl", gen, device)
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    init = make_states(B, D, W, torch.float16, "cl", gen, device)
    out = torch.full_like(x, float("nan"))
    fs = torch.full((B, W - 1, D), float("nan"), dtype=torch.float16, device=device).transpose(1, 2)
    assert causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, init, out, fs, True, backend=backend) is None
    served_by(backend, "fwd")
    assert_matches(out, x, w, b, initial_states=init, silu=True)
    assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), W, init.cpu()))


@pytest.mark.parametrize("wd", [torch.float32, torch.bfloat16], ids=["wfp32", "wbf16"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_bwd_12_args_writes_and_accumulates(device, backend, wd, gen):
    """dx and dinitial_states written; dweight and dbias (fp32, as upstream's callers allocate
    them) receive the gradient added to what they held."""
    import causal_conv1d_cuda

    B, D, L, W = 2, 16, 41, 4
    x, w, b, s, init, dout, df = make_bwd_case(gen, device, "cl", torch.bfloat16, wd, W, L, D, bias=True, seq=True,
                                               init=True, dfinal=True)
    dx = torch.full_like(x, float("nan"))
    dw0 = randn((D, W), gen, torch.float32, device)
    db0 = randn((D,), gen, torch.float32, device)
    dw, db = dw0.clone(), db0.clone()
    di = torch.full((B, W - 1, D), float("nan"), dtype=x.dtype, device=device).transpose(1, 2)
    r = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, s, init, df, dx, dw, db, di, True, backend=backend)
    assert r is None
    served_by(backend, "bwd")
    want = reference_grads(x, w, b, s, init, True, dout, df)
    assert_grad("x", dx, want[0], x.dtype)
    assert_grad("weight", dw - dw0, want[1], torch.float32)
    assert_grad("bias", db - db0, want[2], torch.float32)
    assert_grad("initial_states", di, want[3], x.dtype)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_update_8_args_writes_out(device, backend, gen):
    import causal_conv1d_cuda

    B, D, W, S, P = 3, 16, 4, 6, 5
    x = randn((B, D, 1), gen, torch.bfloat16, device)
    w = randn((D, W), gen, torch.bfloat16, device)
    pool = randn((P, D, S), gen, torch.bfloat16, device)
    idx = torch.tensor([4, -1, 1], dtype=torch.int32, device=device)
    cs = torch.tensor([2, 0, 7], dtype=torch.int32, device=device)
    want_out, want_pool = reference_update(x, pool, w, None, False, cs, idx)
    out = torch.full_like(x, float("nan"))
    assert causal_conv1d_cuda.causal_conv1d_update(x, pool, w, None, out, False, cs, idx, backend=backend) is None
    served_by(backend, "update")
    torch.testing.assert_close(out.double().cpu(), want_out, rtol=TOL[torch.bfloat16], atol=TOL[torch.bfloat16])
    assert torch.equal(pool.double().cpu(), want_pool)


# ---- causal_conv1d_cuda: the older forms, which return their outputs -----------------------------


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_fwd_old_forms(device, backend, gen):
    """mamba_ssm 1.0 (4 args), 1.1 (5), 1.2-2.2 (7; Mamba-2 passes seq_idx channel-last)."""
    import causal_conv1d_cuda

    B, D, L, W = 2, 16, 30, 4
    x = make_x(B, D, L, torch.float32, "cl", gen, device)
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    seq = torch.tensor([[0] * 10 + [1] * 20, [0] * 25 + [-1] * 5], dtype=torch.int32, device=device)
    assert_matches(causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, True, backend=backend), x, w, b, silu=True)
    assert_matches(causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, seq, False, backend=backend), x, w, seq_idx=seq)
    assert_matches(causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, seq, None, None, True, backend=backend), x, w, b,
                   seq_idx=seq, silu=True)
    init = make_states(B, D, W, torch.float32, "cl", gen, device)
    fs = torch.full((B, W - 1, D), float("nan"), device=device).transpose(1, 2)
    out = causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, init, fs, False, backend=backend)
    served_by(backend, "fwd")
    assert_matches(out, x, w, b, initial_states=init)
    assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), W, init.cpu()))


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_bwd_old_forms(device, backend, gen):
    """mamba_ssm 1.0: (x, w, b, dout, dx, silu) -> [dx, dw, db]; 1.1: + seq_idx; 1.2-2.2: 10
    arguments -> [dx, dw, db, dinitial_states]. Gradients in the weight's dtype; None for an
    absent bias or unasked dinitial_states."""
    import causal_conv1d_cuda

    B, D, L, W = 2, 8, 26, 4
    x, w, b, s, init, dout, df = make_bwd_case(gen, device, "cf", torch.float32, torch.float32, W, L, D, bias=True,
                                               seq=False, init=True, dfinal=True)
    want = reference_grads(x, w, b, None, None, True, dout, None)
    r = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, True, backend=backend)
    assert isinstance(r, list) and len(r) == 3
    for name, g, e in zip(("x", "weight", "bias"), r, want):
        assert_grad(name, g, e, torch.float32)
    dx = torch.full_like(x, float("nan"))
    r = causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, dout, None, dx, False, backend=backend)
    assert len(r) == 3 and r[0] is dx and r[2] is None
    want_nosilu = reference_grads(x, w, None, None, None, False, dout, None)
    assert_grad("x", dx, want_nosilu[0], torch.float32)
    assert_grad("weight", r[1], want_nosilu[1], torch.float32)
    r = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, init, df, None, True, True, backend=backend)
    served_by(backend, "bwd")
    assert len(r) == 4
    for name, g, e in zip(("x", "weight", "bias", "initial_states"), r, reference_grads(x, w, b, None, init, True,
                                                                                         dout, df)):
        assert_grad(name, g, e, torch.float32)
    r = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, dout, None, None, None, None, False, True, backend=backend)
    assert len(r) == 4 and r[3] is None


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_raw_update_old_forms(device, backend, gen):
    """1.0-1.3: x (batch, dim) and a state of exactly width steps; 1.4: + cache_seqlens; 1.5.0:
    + conv_state_indices. Each returns out."""
    import causal_conv1d_cuda

    B, D, W = 2, 16, 4
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    x = randn((B, D), gen, torch.float32, device)
    state = randn((B, D, W), gen, torch.float32, device)
    want_out, want_state = reference_update(x, state, w, b, True)
    out = causal_conv1d_cuda.causal_conv1d_update(x, state, w, b, True, backend=backend)
    assert out.shape == (B, D)
    torch.testing.assert_close(out.double().cpu(), want_out, rtol=1e-5, atol=1e-5)
    assert torch.equal(state.double().cpu(), want_state)

    x3 = randn((B, D, 2), gen, torch.float32, device)
    cs = torch.tensor([3, 9], dtype=torch.int32, device=device)
    want_out, want_state = reference_update(x3, state, w, b, False, cs)
    out = causal_conv1d_cuda.causal_conv1d_update(x3, state, w, b, False, cs, backend=backend)
    torch.testing.assert_close(out.double().cpu(), want_out, rtol=1e-5, atol=1e-5)
    assert torch.equal(state.double().cpu(), want_state)

    pool = randn((4, D, W), gen, torch.float32, device)
    idx = torch.tensor([3, 0], dtype=torch.int32, device=device)
    want_out, want_pool = reference_update(x3, pool, w, None, True, None, idx)
    out = causal_conv1d_cuda.causal_conv1d_update(x3, pool, w, None, True, None, idx, backend=backend)
    served_by(backend, "update")
    torch.testing.assert_close(out.double().cpu(), want_out, rtol=1e-5, atol=1e-5)
    assert torch.equal(pool.double().cpu(), want_pool)


def test_raw_keywords_by_upstream_names(gen):
    import causal_conv1d_cuda

    x = make_x(2, 8, 12, torch.float32, "cf", gen)
    w = randn((8, 3), gen, torch.float32)
    out = torch.full_like(x, float("nan"))
    causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, None, None, out=out, final_states_out=None, silu_activation=True)
    assert_matches(out, x, w, silu=True)


# ---- dispatch: backend=, use_backend(), strict mode -----------------------------------------------


def test_every_name_follows_use_backend_and_the_environment(gen, monkeypatch):
    import causal_conv1d_cuda
    from causal_conv1d.cpp_functions import causal_conv1d_fwd_function, causal_conv1d_update_function

    x = make_x(1, 8, 10, torch.float32, "cf", gen)
    w = randn((8, 4), gen, torch.float32)
    with causal_conv1d.use_backend("aten"):
        causal_conv1d_fwd_function(x, w, None, None, None, None, False)
        served_by("aten", "fwd")
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, False)
        served_by("aten", "fwd")
        causal_conv1d_update_function(x[..., 0], torch.zeros(1, 8, 3), w, None, False, None, None)
        served_by("aten", "update")
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "cpu")
    causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, x.clone(), None, True)
    served_by("cpu", "bwd")
    with pytest.raises(ValueError, match=r"causal_conv1d_cuda.causal_conv1d_fwd: argument 'backend' must be one of"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, False, backend="tpu")


def _every_compat_call(gen):
    import causal_conv1d_cuda
    from causal_conv1d import cpp_functions as cf

    x = make_x(1, 8, 10, torch.float32, "cf", gen)
    w = randn((8, 4), gen, torch.float32)
    s = randn((1, 8, 3), gen, torch.float32)
    return {
        "fwd_function": lambda: cf.causal_conv1d_fwd_function(x, w, None, None, None, None, True),
        "bwd_function": lambda: cf.causal_conv1d_bwd_function(x, w, None, x, None, None, None, None, False, True),
        "update_function": lambda: cf.causal_conv1d_update_function(x[..., :1], s, w, None, True, None, None),
        "raw fwd 4": lambda: causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, True),
        "raw fwd 8": lambda: causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, None, None, torch.empty_like(x), None,
                                                                  True),
        "raw bwd 6": lambda: causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, x, None, True),
        "raw bwd 12": lambda: causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, x, None, None, None, torch.empty_like(x),
                                                                   torch.zeros(8, 4), None, None, True),
        "raw update 5": lambda: causal_conv1d_cuda.causal_conv1d_update(x[..., 0], s, w, None, True),
        "raw update 8": lambda: causal_conv1d_cuda.causal_conv1d_update(x[..., :1], s, w, None,
                                                                        torch.empty_like(x[..., :1]), True, None, None),
    }


def test_every_name_falls_back_and_strict_mode_refuses(cpu_unavailable, gen, monkeypatch):
    """cpu unavailable: each name falls back to aten with the warning; under
    CAUSAL_CONV1D_STRICT=1 the same call raises StrictModeError instead."""
    calls = _every_compat_call(gen)
    with pytest.warns(causal_conv1d.CausalConv1dWarning, match=r"Falling back to 'aten'"):
        for name, call in calls.items():
            call()
            choice = causal_conv1d.last_backend()
            assert choice.backend == "aten" and [b for b, _ in choice.fallback_from] == ["cpu"], (name, choice)
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "1")
    for name, call in calls.items():
        with pytest.raises(causal_conv1d.StrictModeError, match=r"Falling back to 'aten'"):
            call()


# ---- errors: the argument, what was expected, what came -----------------------------------------


def test_raw_errors_name_the_argument(gen):
    import causal_conv1d_cuda
    from causal_conv1d.cpp_functions import causal_conv1d_bwd_function, causal_conv1d_fwd_function

    x = make_x(2, 8, 12, torch.float32, "cf", gen)
    w = randn((8, 3), gen, torch.float32)
    with pytest.raises(TypeError, match=r"causal_conv1d_fwd: no known form matches 3 arguments; expected one of: "
                                        r"4 \(x, weight, bias, silu_activation\)"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None)
    with pytest.raises(TypeError, match=r"no known form matches 9 arguments"):
        causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, x, None, None, None, None, True)
    with pytest.raises(TypeError, match=r"no known form matches 4 arguments"):
        causal_conv1d_cuda.causal_conv1d_update(x, x, w, None)
    with pytest.raises(TypeError, match=r"argument 'silu_activation' must be a bool; got str 'silu'"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, "silu")
    with pytest.raises(TypeError, match=r"argument 'seq_idx' \(position 4 of the 5-argument form, upstream 1.1\) "
                                        r"must be a torch.Tensor or None; got int"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, 3, True)
    with pytest.raises(TypeError, match=r"argument 'out' \(position 6 .*\) must be a torch.Tensor; got NoneType"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, None, None, None, None, True)
    with pytest.raises(ValueError, match=r"argument 'out' must have shape \(batch, dim, seqlen\) = \(2, 8, 12\); "
                                         r"got shape \(2, 8, 11\)"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, None, None, x.new_empty(2, 8, 11), None, True)
    with pytest.raises(ValueError, match=r"argument 'out' is written but shares memory with 'x'"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, None, None, x, None, True)
    with pytest.raises(TypeError, match=r"argument 'dweight' must have dtype float32, float16, bfloat16; got "
                                        r"torch.int32"):
        causal_conv1d_cuda.causal_conv1d_bwd(x, w, None, x.clone(), None, None, None, torch.empty_like(x),
                                             torch.zeros(8, 3, dtype=torch.int32), None, None, True)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'silu' for the 4-argument form"):
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, None, silu=True)
    with pytest.raises(TypeError, match=r"causal_conv1d_fwd_function: argument 'silu_activation' must be a bool"):
        causal_conv1d_fwd_function(x, w, None, None, None, None, "silu")
    with pytest.raises(ValueError, match=r"causal_conv1d_bwd_function: argument 'dx' must have shape"):
        causal_conv1d_bwd_function(x, w, None, x.clone(), None, None, None, x.new_empty(2, 8, 3), False, True)


# ---- transformers -----------------------------------------------------------------------------------


def _transformers_modules_using_us():
    """transformers' modeling modules that take causal_conv1d functions from this package."""
    root = Path(importlib.util.find_spec("transformers").origin).parent / "models"
    for f in sorted(root.glob("*/modeling_*.py")):
        text = f.read_text(errors="replace")
        if '"causal_conv1d"' in text or "from causal_conv1d import" in text:
            yield f"transformers.models.{f.parent.name}.{f.stem}"


def _transformers_binding(obj):
    """(the function transformers calls, the device types it calls it for) for a module-level
    name. transformers >= 5.25 binds a kernel function through hub_kernels'
    use_kernel_func_from_hub_with_fallback: a wrapper that resolves the package's function once
    and calls it only for inputs on the devices its _PACKAGE_SUPPORTED_DEVICES lists ("cuda" for
    causal_conv1d), its own torch path for the others; with the `kernels` package installed, that
    wrapper sits inside a kernels Func module. (obj, None) for a plain import, or for a wrapping
    this does not recognise (the caller's identity check then fails, naming it)."""
    for _ in range(4):
        code, closure = getattr(obj, "__code__", None), getattr(obj, "__closure__", None)
        if code is not None and closure and "implementation" in code.co_freevars:
            cells = dict(zip(code.co_freevars, closure))
            devices = cells["supported_devices"].cell_contents if "supported_devices" in cells else None
            return cells["implementation"].cell_contents, devices
        forward = getattr(type(obj), "forward", None)  # kernels' Func module: forward calls `func`
        fcode, fclosure = getattr(forward, "__code__", None), getattr(forward, "__closure__", None)
        if fcode is None or not fclosure or "func" not in fcode.co_freevars:
            break
        obj = dict(zip(fcode.co_freevars, fclosure))["func"].cell_contents
    return obj, None


def test_transformers_detects_the_package_and_its_models_use_it(gen):
    """transformers' package check finds causal_conv1d (its is_causal_conv1d_available also needs
    CUDA), and every modeling module that uses causal_conv1d_fn / causal_conv1d_update binds
    this package's: the name is ours, or transformers' wrapper bound to ours. Calling it matches
    the reference, and runs our op (last_backend() records it) unless the wrapper keeps host
    tensors on its own torch path."""
    try:
        from transformers.utils import import_utils
    except ImportError as e:
        pytest.skip(f"transformers is not installed ({e}); pip install transformers to run this check")
    found, version = import_utils._is_package_available("causal_conv1d", return_version=True)
    assert found and version in (causal_conv1d.__version__, causal_conv1d.package_version), version
    if torch.cuda.is_available():
        assert import_utils.is_causal_conv1d_available()
    x = make_x(2, 8, 10, torch.float32, "cf", gen)
    w = randn((8, 4), gen, torch.float32)
    checked = []
    def bound(mod_name, fn, ours):
        """Whether a call on x's device must reach our op; fails if fn is bound to another function."""
        impl, devices = _transformers_binding(fn)
        assert impl is ours, f"{mod_name} is bound to {impl!r}, not this package's {ours!r}"
        causal_conv1d._dispatch._tls.last = None
        return devices is None or x.device.type in devices

    for name in _transformers_modules_using_us():
        mod = importlib.import_module(name)
        fn, up = getattr(mod, "causal_conv1d_fn", None), getattr(mod, "causal_conv1d_update", None)
        if fn is not None:
            reaches_us = bound(f"{name}.causal_conv1d_fn", fn, causal_conv1d.causal_conv1d_fn)
            assert_matches(fn(x, w, None, activation="silu"), x, w, silu=True, what=f"{name}.causal_conv1d_fn")
            if reaches_us:
                assert causal_conv1d.last_backend() is not None, f"{name}.causal_conv1d_fn did not run our op"
        if up is not None:
            reaches_us = bound(f"{name}.causal_conv1d_update", up, causal_conv1d.causal_conv1d_update)
            state = randn((2, 8, 3), gen, torch.float32)
            want, _ = reference_update(x[..., :1], state, w, None, True)
            got = up(x[..., :1], state, w, None, "silu")
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
            if reaches_us:
                assert causal_conv1d.last_backend() is not None, f"{name}.causal_conv1d_update did not run our op"
        checked.append(name)
    assert checked, "no transformers model uses causal_conv1d"
