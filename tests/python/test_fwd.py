"""Every backend against the float64 reference (tests/python/reference.py).

Outputs are poisoned with NaN before each run (conftest), final_states_out buffers are filled
with NaN, and every test asserts that the backend it asked for is the one that served.
"""

import pytest
import torch

import causal_conv1d
from causal_conv1d import causal_conv1d_fn
from helpers import (DEV_BACKENDS, DTYPE_PAIRS, LAYOUTS, PAIR_IDS, make_seq_idx, make_states, make_x,
                     nan_like_states, randn, served_by)
from reference import assert_matches, reference_final_states

SEQLENS = [1, 2, 3, 5, 17, 64, 127, 256, 1001, 2049]
DIMS = [1, 3, 24, 64]


def _final_layout_ok(x, fs):
    # channel-last x -> channel-last final states, else contiguous
    if x.stride(1) == 1 and x.stride(2) != 1:
        return fs.transpose(1, 2).is_contiguous()
    return fs.is_contiguous()


@pytest.mark.parametrize("width", range(1, 9))
@pytest.mark.parametrize("pair", DTYPE_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_grid(device, backend, layout, pair, width, gen):
    """Layouts x dtype pairs x widths; seqlen, dim, bias, silu and final states vary with the case."""
    xd, wd = pair
    i = width + 3 * DTYPE_PAIRS.index(pair) + 7 * LAYOUTS.index(layout)
    L = SEQLENS[i % len(SEQLENS)]
    D = DIMS[(i // 3) % len(DIMS)]
    B = 2
    use_bias, silu, want_final = i % 2 == 0, (i // 2) % 2 == 0, i % 3 == 0
    x = make_x(B, D, L, xd, layout, gen, device)
    weight = randn((D, width), gen, wd, device)
    bias = randn((D,), gen, wd, device) if use_bias else None
    x_before = x.clone()
    res = causal_conv1d_fn(x, weight, bias, activation="silu" if silu else None,
                           return_final_states=want_final, backend=backend)
    served_by(backend)
    out, fs = res if want_final else (res, None)
    assert out.device == x.device
    assert_matches(out, x, weight, bias, silu=silu)
    assert torch.equal(x, x_before), "x was modified"
    if layout in ("cl", "cl_dim_slice") and D > 1:
        assert out.stride(1) == 1, f"channel-last x should give channel-last out; strides {out.stride()}"
    if layout == "cf":
        assert out.is_contiguous()
    if want_final:
        assert fs.shape == (B, D, width - 1) and fs.dtype == xd
        assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), width)), "final states differ"
        assert _final_layout_ok(x, fs)


STATE_FEATURES = ["init", "init+final_out", "seq", "seq+init+final", "seq+final_out"]


@pytest.mark.parametrize("features", STATE_FEATURES)
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("state_layout", ["cf", "cl"])
@pytest.mark.parametrize("layout", ["cf", "cl", "cl_dim_slice"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_states_and_seq_idx(device, backend, layout, state_layout, width, features, gen):
    """initial_states, final states (returned and final_states_out) and seq_idx, combined, in
    both layouts of x and of the states."""
    i = width + 5 * STATE_FEATURES.index(features) + 11 * ["cf", "cl", "cl_dim_slice"].index(layout)
    xd, wd = DTYPE_PAIRS[i % len(DTYPE_PAIRS)]
    L = [1, 2, 6, 33, 300, 1000][i % 6]
    B, D = 3, [8, 40][i % 2]
    silu, use_bias = i % 2 == 1, i % 3 != 0
    x = make_x(B, D, L, xd, layout, gen, device)
    weight = randn((D, width), gen, wd, device)
    bias = randn((D,), gen, wd, device) if use_bias else None
    init = make_states(B, D, width, xd, state_layout, gen, device) if "init" in features else None
    seq_idx = make_seq_idx(B, L, gen, device) if "seq" in features else None
    want_final = "final" in features
    fso = nan_like_states(B, D, width, xd, state_layout, device) if "final_out" in features else None
    res = causal_conv1d_fn(x, weight, bias, seq_idx=seq_idx, initial_states=init, return_final_states=want_final,
                           final_states_out=fso, activation="silu" if silu else None, backend=backend)
    served_by(backend)
    out, fs = res if want_final else (res, None)
    assert_matches(out, x, weight, bias, seq_idx=seq_idx, initial_states=init, silu=silu)
    if want_final:
        expected = reference_final_states(x.cpu(), width, None if init is None else init.cpu())
        assert torch.equal(fs.cpu(), expected), "final states differ from the last W-1 of concat(init, x)"
        if fso is not None:
            assert fs is fso, "final_states_out must be returned"
            assert not torch.isnan(fso).any()


@pytest.mark.parametrize("width", [2, 4, 7])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_seq_idx_boundaries_exact(device, backend, width, gen):
    """Hand-made segments: each token only sees taps of its own segment (checked against the
    reference and, for one token per segment start, by hand); padding tokens give exactly 0."""
    B, D, L = 1, 4, 12
    x = randn((B, D, L), gen, torch.float32, device)
    weight = randn((D, width), gen, torch.float32, device)
    bias = randn((D,), gen, torch.float32, device)
    seq = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2, 2, -1, 3, -1]], dtype=torch.int32, device=device)
    init = randn((B, D, width - 1), gen, torch.float32, device)
    out = causal_conv1d_fn(x, weight, bias, seq_idx=seq, initial_states=init, backend=backend)
    served_by(backend)
    assert_matches(out, x, weight, bias, seq_idx=seq, initial_states=init)
    o = out.cpu().double()
    xc, wc, bc = x.cpu().double(), weight.cpu().double(), bias.cpu().double()
    # token 3 starts segment 1: only its own tap (k = W-1) counts
    torch.testing.assert_close(o[0, :, 3], bc + wc[:, -1] * xc[0, :, 3], rtol=1e-5, atol=1e-6)
    # token 0 (segment 0) sees initial states: they belong to token 0's segment
    ic = init.cpu().double()
    exp0 = bc + wc[:, -1] * xc[0, :, 0] + (wc[:, :-1] * ic[0]).sum(-1)
    torch.testing.assert_close(o[0, :, 0], exp0, rtol=1e-5, atol=1e-6)
    assert torch.all(o[0, :, 9] == 0) and torch.all(o[0, :, 11] == 0), "padding tokens must output exactly 0"


@pytest.mark.long
@pytest.mark.parametrize("case", ["cf-fp32", "cl-bf16-seq", "cf-fp16-init-final", "cl-fp32-w8"])
@pytest.mark.parametrize("L", [4097, 8200, 20001])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_long(device, backend, L, case, gen):
    layout = case.split("-")[0]
    xd = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[case.split("-")[1]]
    width = 8 if "w8" in case else 4
    B, D = 2, 16
    x = make_x(B, D, L, xd, layout, gen, device)
    weight = randn((D, width), gen, torch.float32, device)
    bias = randn((D,), gen, torch.float32, device)
    seq = make_seq_idx(B, L, gen, device) if "seq" in case else None
    init = make_states(B, D, width, xd, "cl", gen, device) if "init" in case else None
    want_final = "final" in case
    res = causal_conv1d_fn(x, weight, bias, seq_idx=seq, initial_states=init, return_final_states=want_final,
                           activation="silu", backend=backend)
    served_by(backend)
    out = res[0] if want_final else res
    assert_matches(out, x, weight, bias, seq_idx=seq, initial_states=init, silu=True)
    if want_final:
        assert torch.equal(res[1].cpu(), reference_final_states(x.cpu(), width, init.cpu()))


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_swish_is_silu(device, backend, gen):
    x = randn((2, 8, 50), gen, torch.float32, device)
    w = randn((8, 4), gen, torch.float32, device)
    a = causal_conv1d_fn(x, w, activation="silu", backend=backend)
    b = causal_conv1d_fn(x, w, activation="swish", backend=backend)
    assert torch.equal(a, b)
    assert_matches(b, x, w, silu=True)


@pytest.mark.parametrize("shape", [(0, 4, 10), (2, 0, 10)], ids=["batch0", "dim0"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_empty_batch_or_dim(device, backend, shape, gen):
    B, D, L = shape
    x = randn(shape, gen, torch.float16, device)
    w = randn((D, 3), gen, torch.float32, device)
    out, fs = causal_conv1d_fn(x, w, return_final_states=True, backend=backend)
    assert out.shape == shape and fs.shape == (B, D, 2)


def test_backends_agree_bitwise_on_final_states(gen):
    """cpu and aten copy the same inputs into the final states: identical bits."""
    x = make_x(2, 16, 3, torch.bfloat16, "cl", gen)
    w = randn((16, 6), gen, torch.bfloat16)
    init = make_states(2, 16, 6, torch.bfloat16, "cf", gen)
    _, a = causal_conv1d_fn(x, w, initial_states=init, return_final_states=True, backend="cpu")
    _, b = causal_conv1d_fn(x, w, initial_states=init, return_final_states=True, backend="aten")
    assert torch.equal(a, b)


def test_ref_matches_reference_float64(gen):
    """The package's causal_conv1d_ref in float64, with seq_idx and initial states."""
    B, D, L, W = 2, 8, 40, 5
    x = randn((B, D, L), gen, torch.float64)
    w = randn((D, W), gen, torch.float64)
    b = randn((D,), gen, torch.float64)
    init = randn((B, D, W - 1), gen, torch.float64)
    seq = make_seq_idx(B, L, gen)
    out, fs = causal_conv1d.causal_conv1d_ref(x, w, b, init, True, None, "silu", seq_idx=seq)
    from reference import reference

    torch.testing.assert_close(out, reference(x, w, b, seq, init, silu=True), rtol=1e-12, atol=1e-12)
    assert torch.equal(fs, reference_final_states(x, W, init))


def test_ref_upstream_semantics_without_seq_idx(gen):
    """causal_conv1d_ref equals upstream's formulation: F.conv1d with padding W-1, cut to L."""
    import torch.nn.functional as F

    B, D, L, W = 2, 6, 30, 4
    x = randn((B, D, L), gen, torch.float64)
    w = randn((D, W), gen, torch.float64)
    b = randn((D,), gen, torch.float64)
    out = causal_conv1d.causal_conv1d_ref(x, w, b, activation="silu")
    up = F.silu(F.conv1d(x, w.unsqueeze(1), b, padding=W - 1, groups=D)[..., :L])
    torch.testing.assert_close(out, up, rtol=1e-12, atol=1e-12)
    init = randn((B, D, W - 1), gen, torch.float64)
    out2, fs = causal_conv1d.causal_conv1d_ref(x, w, b, init, return_final_states=True)
    xc = torch.cat([init, x], -1)
    up2 = F.conv1d(xc, w.unsqueeze(1), b, padding=0, groups=D)[..., :L]
    torch.testing.assert_close(out2, up2, rtol=1e-12, atol=1e-12)
    assert torch.equal(fs, F.pad(xc, (W - 1 - xc.shape[-1], 0)))
    # short sequence without initial states: zero-padded on the left
    _, fs3 = causal_conv1d.causal_conv1d_ref(x[..., :2], w, return_final_states=True)
    assert torch.equal(fs3, F.pad(x[..., :2], (W - 1 - 2, 0)))
