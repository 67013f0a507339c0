"""The backward op on every backend against float64 autograd of the independent reference
(tests/python/reference.py), through causal_conv1d_bwd (upstream's cpp_functions
causal_conv1d_bwd_function) and the custom op causal_conv1d::bwd, gradient buffers poisoned
with NaN first (conftest): the options, dx written in place into a view, errors naming their
argument, bitwise-identical deterministic gradients across thread counts and shuffled emulated
launches, CAUSAL_CONV1D_DETERMINISTIC, opcheck, the sums past a term 2^24 times the others.
causal_conv1d_fn's autograd over the whole grid: test_bwd_autograd.py.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from causal_conv1d import _lib, _ops, _pack
from causal_conv1d._op_bwd import causal_conv1d_bwd
from helpers import DEV_BACKENDS, make_bwd_case, make_seq_idx, make_states, make_x, randn, served_by
from reference import assert_grad, reference_grads

needs_custom_op = pytest.mark.skipif(not _ops.USE_CUSTOM_OP, reason="torch.library.custom_op needs torch >= 2.4")


def _served_by(backend, op="bwd"):
    served_by(backend, op)


@pytest.mark.parametrize("xd", [torch.float32, torch.float16, torch.bfloat16], ids=["xfp32", "xfp16", "xbf16"])
@pytest.mark.parametrize("width", [1, 2, 4, 7])
@pytest.mark.parametrize("layout", ["cf", "cl", "time_step"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_op_with_every_option(device, backend, layout, width, xd, gen):
    """All inputs and all four gradients, silu, seq_idx with padding, dfinal_states."""
    x, w, b, s, init, dout, df = make_bwd_case(gen, device, layout, xd, torch.bfloat16, width, 77, 12, bias=True,
                                               seq=True, init=True, dfinal=True)
    got = causal_conv1d_bwd(x, w, b, dout, s, init, df, None, True, True, backend=backend)
    _served_by(backend)
    want = reference_grads(x, w, b, s, init, True, dout, df)
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (xd, w.dtype, w.dtype, xd)):
        assert_grad(name, g, e, dt)


# ---- the op function (upstream's causal_conv1d_bwd_function) ---------------------------------


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_bwd_function_writes_dx_in_place(device, backend, gen):
    """dx a chunk view of a larger gradient (as mamba_ssm passes it), channel-last; the rest of
    the larger tensor untouched; dbias None without bias; dinitial_states only when asked."""
    B, D, L, W = 2, 16, 50, 4
    x = make_x(B, D, L, torch.bfloat16, "cl", gen, device)
    w = randn((D, W), gen, torch.float32, device)
    dout = make_x(B, D, L, torch.bfloat16, "cl", gen, device)
    big = torch.full((B, L, 3 * D), 7.0, dtype=torch.bfloat16, device=device)
    dx = big[:, :, D:2 * D].transpose(1, 2)
    gx, gw, gb, gi = causal_conv1d_bwd(x, w, None, dout, None, None, None, dx, False, True, backend=backend)
    _served_by(backend)
    assert gx is dx and gb is None and gi is None
    assert torch.all(big[:, :, :D] == 7) and torch.all(big[:, :, 2 * D:] == 7)
    want = reference_grads(x, w, None, None, None, True, dout, None)
    assert_grad("x", gx, want[0], torch.bfloat16)
    assert_grad("weight", gw, want[1], torch.float32)
    b = randn((D,), gen, torch.float32, device)
    init = make_states(B, D, W, torch.bfloat16, "cl", gen, device)
    df = make_states(B, D, W, torch.bfloat16, "cl", gen, device)
    seq = make_seq_idx(B, L, gen, device)
    gx, gw, gb, gi = causal_conv1d_bwd(x, w, b, dout, seq, init, df, None, True, False, backend=backend)
    want = reference_grads(x, w, b, seq, init, False, dout, df)
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), (gx, gw, gb, gi), want,
                              (torch.bfloat16, torch.float32, torch.float32, torch.bfloat16)):
        assert_grad(name, g, e, dt)
    assert gi.stride(1) == 1, "dinitial_states is channel-last when x is (as upstream's)"


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_gradient_of_absent_states_and_bias(device, backend, gen):
    """dinitial_states without initial_states: the gradient at zero states (upstream returns it)."""
    B, D, L, W = 2, 8, 5, 4
    x = make_x(B, D, L, torch.float32, "cf", gen, device)
    w = randn((D, W), gen, torch.float32, device)
    dout = make_x(B, D, L, torch.float32, "cf", gen, device)
    _, _, _, gi = causal_conv1d_bwd(x, w, None, dout, None, None, None, None, True, True, backend=backend)
    zeros = torch.zeros(B, D, W - 1, device=device)
    want = reference_grads(x, w, None, None, zeros, True, dout, None)
    assert_grad("initial_states", gi, want[3], torch.float32)


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_sums_survive_an_outlier(device, backend, layout, gen):
    """dweight and dbias when one term is 2^24 times the others: a running fp32 sum of the row
    stops growing after it (each later term of about 1 rounds to 0 or 2). The cpu backend's sums
    ran so over whole rows, which 10^8 steps of like terms also break (dbias came out 21% off on
    a row of 7e8 steps); its tiles' sums now join in double. The outlier is the row's last step,
    the first one the backward walks."""
    B, D, L, W = 1, 32, 5000 if backend == "emulate" else 1 << 17, 4  # D >= 16: both CPU tilings

    def biased(shape):  # 1 + noise: every term of the sums has the same sign
        return (1 + 0.1 * torch.randn(*shape, generator=gen)).to(torch.bfloat16)

    x, dout = biased((B, L, D)), biased((B, L, D))
    dout[:, -1, :] = 2.0 ** 24
    if layout == "cf":
        x, dout = x.transpose(1, 2).contiguous(), dout.transpose(1, 2).contiguous()
    else:
        x, dout = x.transpose(1, 2), dout.transpose(1, 2)
    x, dout = x.to(device), dout.to(device)
    w = (0.25 + 0.05 * torch.randn(D, W, generator=gen)).to(device)
    b = (0.1 * torch.randn(D, generator=gen)).to(device)
    got = causal_conv1d_bwd(x, w, b, dout, None, None, None, None, False, True, backend=backend)
    _served_by(backend)
    want = reference_grads(x, w, b, None, None, True, dout, None)
    assert_grad("weight", got[1], want[1], torch.float32)
    assert_grad("bias", got[2], want[2], torch.float32)


def test_errors_name_the_argument(gen):
    x = randn((2, 4, 9), gen, torch.float32)
    w = randn((4, 3), gen, torch.float32)
    with pytest.raises(ValueError, match="causal_conv1d_bwd: argument 'dout'.*\\(2, 4, 9\\)"):
        causal_conv1d_bwd(x, w, None, randn((2, 4, 8), gen, torch.float32), None, None, None, None, False, False)
    with pytest.raises(TypeError, match="argument 'dout' must have x's dtype"):
        causal_conv1d_bwd(x, w, None, x.half(), None, None, None, None, False, False)
    dx = torch.full((2, 4, 9), float("nan"))
    with pytest.raises(ValueError, match="argument 'dx' is written but shares memory with 'dout'"):
        causal_conv1d_bwd(x, w, None, dx, None, None, None, dx, False, False)
    with pytest.raises(ValueError, match="argument 'dfinal_states' must have shape"):
        causal_conv1d_bwd(x, w, None, x, None, None, randn((2, 4, 3), gen, torch.float32), None, False, False)


# ---- determinism ----------------------------------------------------------------------------

_DETERMINISM_CHILD = r"""
import hashlib, json, torch, causal_conv1d
from causal_conv1d._op_bwd import causal_conv1d_bwd
torch.use_deterministic_algorithms(True)
out = {}
for backend in ("cpu", "emulate"):
    for layout in ("cf", "cl"):
        g = torch.Generator().manual_seed(5)
        B, D, L, W = 3, 96, 3000, 4
        def t(*s):
            v = torch.randn(*s, generator=g).to(torch.bfloat16)
            return v if layout == "cf" else v.transpose(1, 2)
        x, dout = t(B, D, L) if layout == "cf" else t(B, L, D), t(B, D, L) if layout == "cf" else t(B, L, D)
        w, b = torch.randn(D, W, generator=g), torch.randn(D, generator=g)
        grads = causal_conv1d_bwd(x, w, b, dout, None, None, None, None, False, True, backend=backend)
        assert causal_conv1d.last_backend().backend == backend
        out[f"{backend}-{layout}"] = [hashlib.sha256(v.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()
                                      for v in grads[:3]]
print(json.dumps(out))
"""


def test_bitwise_identical_across_thread_counts_and_shuffled_launches():
    """Deterministic mode (torch.use_deterministic_algorithms in the child) on cpu and emulate,
    both layouts, in processes with 1, 2 and 3 threads; the emulator in checking mode (each
    launch run in natural order, then with threads, blocks and atomics shuffled) with another
    seed each time: dx, dweight and dbias have the same bits every time."""
    children = []
    for n in ("1", "2", "3"):  # side by side: each is mostly the emulator in one process
        env = dict(os.environ, CAUSAL_CONV1D_NUM_THREADS=n, CAUSAL_CONV1D_EMULATE_CHECK="1",
                   CAUSAL_CONV1D_EMULATE_SEED=str(40 + int(n)))
        env.pop("CAUSAL_CONV1D_BACKEND", None)
        children.append(subprocess.Popen([sys.executable, "-c", _DETERMINISM_CHILD], env=env, text=True,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    runs = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        runs.append(json.loads(out.strip().splitlines()[-1]))
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) == 4


def test_deterministic_env_var_is_read_by_libcc1d(gen, monkeypatch):
    """CAUSAL_CONV1D_DETERMINISTIC=1 asks libcc1d for the deterministic plan: the workspace it
    needs grows from one row of sums to one per (batch, segment)."""
    from causal_conv1d._op_bwd import CBwdArgs

    x = randn((3, 5, 5000), gen, torch.float16)
    w = randn((5, 4), gen, torch.float32)
    dw = torch.empty_like(w)
    args = _pack.fill_args(CBwdArgs, dict(x=x, weight=w, dout=x, dweight=dw), backend=_lib.BACKEND_IDS["emulate"])
    lib = _lib.library()
    monkeypatch.delenv("CAUSAL_CONV1D_DETERMINISTIC", raising=False)
    assert lib.query("cc1d_causal_conv1d_bwd_workspace", args) == 5 * 5
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "1")
    assert lib.query("cc1d_causal_conv1d_bwd_workspace", args) == 3 * 5 * 5 * 5


def test_deterministic_env_var_zero_overrides_torch(monkeypatch):
    """As upstream: CAUSAL_CONV1D_DETERMINISTIC=0 keeps the atomics under
    torch.use_deterministic_algorithms(True); unset or 1, torch's switch decides."""
    from causal_conv1d._op_bwd import deterministic_requested

    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        monkeypatch.delenv("CAUSAL_CONV1D_DETERMINISTIC", raising=False)
        assert deterministic_requested()
        for off in ("0", "false", " OFF ", "no"):
            monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", off)
            assert not deterministic_requested(), off
        monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "1")
        assert deterministic_requested()
        torch.use_deterministic_algorithms(False)
        monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", "0")
        assert not deterministic_requested()
        monkeypatch.delenv("CAUSAL_CONV1D_DETERMINISTIC")
        assert not deterministic_requested()
    finally:
        torch.use_deterministic_algorithms(before)


# ---- torch integration -------------------------------------------------------------------------


@needs_custom_op
@pytest.mark.parametrize("backend", ["", "aten"])
@pytest.mark.parametrize("case", ["plain", "all", "dx-out", "some"])
def test_opcheck_bwd(case, backend, gen):
    B, D, L, W = 2, 6, 9, 4
    x = make_x(B, D, L, torch.float32, "cl", gen)
    w = randn((D, W), gen, torch.float32)
    dout = make_x(B, D, L, torch.float32, "cl", gen)
    opt = case in ("all", "dx-out")
    b = randn((D,), gen, torch.float32) if opt else None
    seq = make_seq_idx(B, L, gen) if opt else None
    init = make_states(B, D, W, torch.float32, "cl", gen) if opt else None
    df = make_states(B, D, W, torch.float32, "cl", gen) if opt else None
    dx_out = torch.empty(B, D, L) if case == "dx-out" else None
    wants = (True, case != "some", opt, case != "plain")
    torch.library.opcheck(torch.ops.causal_conv1d.bwd.default,
                          (x, w, b, dout, seq, init, df, dx_out, True, *wants, False, backend))
