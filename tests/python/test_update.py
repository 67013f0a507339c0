"""causal_conv1d_update on every backend against the float64 reference (tests/python/reference.py):
shift and circular modes, pool gather with padding slots, seqlen 1 and beyond the state length,
state_len > width-1, both conv_state layouts, every dtype pair and width; token-by-token decoding
equals one forward; bad input raises naming the argument and leaves the state untouched."""

import re

import pytest
import torch

import causal_conv1d
from causal_conv1d import _lib, _pack, causal_conv1d_fn, causal_conv1d_update, causal_conv1d_update_ref

from helpers import (DEV_BACKENDS, DTYPE_PAIRS, PAIR_IDS, check_update, compile_backend, make_update_case,
                     randn, served_by)


def _served_by(backend, op="update"):
    served_by(backend, op)


@pytest.mark.parametrize("width", range(1, 9))
@pytest.mark.parametrize("pair", DTYPE_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_grid(device, backend, pair, width, gen):
    xd, wd = pair
    i = width + 3 * DTYPE_PAIRS.index(pair)
    L = [1, 1, 2, 3, 5, 9][i % 6]
    S = max(1, width - 1 + (0 if i % 3 == 0 else i % 4 + 1))
    D = [1, 5, 33, 130][(i // 2) % 4]
    circular, gather, state_cl = (i // 3) % 2 == 1, (i // 5) % 2 == 0, i % 2 == 1
    x_2d, silu, use_bias = L == 1 and i % 4 < 2, (i // 7) % 2 == 0, i % 3 != 1
    x, state, weight, bias, cache, indices = make_update_case(
        4, D, L, width, S, xd, wd, circular=circular, gather=gather, state_cl=state_cl, x_2d=x_2d, gen=gen,
        device=device)
    bias = bias if use_bias else None
    before = state.clone()
    out = causal_conv1d_update(x, state, weight, bias, "silu" if silu else None, cache, indices, backend=backend)
    _served_by(backend)
    check_update(out, state, x, before, weight, bias, silu, cache, indices)


MODES = [(c, g, s) for c in (False, True) for g in (False, True) for s in (False, True)]


@pytest.mark.parametrize("L", [1, 4, 11])
@pytest.mark.parametrize("mode", MODES, ids=[f"{'circ' if c else 'shift'}-{'gather' if g else 'rows'}-"
                                             f"{'statecl' if s else 'statecf'}" for c, g, s in MODES])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_modes_and_lengths(device, backend, mode, L, gen):
    """Every mode and layout, with seqlen beyond the state's length (11 > 5)."""
    circular, gather, state_cl = mode
    x, state, weight, bias, cache, indices = make_update_case(
        3, 7, L, 4, 5, torch.float32, torch.float32, circular=circular, gather=gather, state_cl=state_cl,
        x_2d=False, gen=gen, device=device)
    before = state.clone()
    out = causal_conv1d_update(x, state, weight, bias, "silu", cache, indices, backend=backend)
    _served_by(backend)
    check_update(out, state, x, before, weight, bias, True, cache, indices)


@pytest.mark.parametrize("L", [2, 5, 8, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("circular", [False, True], ids=["shift", "ring"])
def test_a_few_tokens_of_many_channels(circular, dtype, L, gen):
    """Speculative decoding's drafts on the cpu backend: x of (batch, 600, L) as callers pass it, each
    channel's tokens back to back (split into rows of channels for the SIMD decode step: whole
    blocks of channels and a partial one), against the reference."""
    x, state, weight, bias, cache, indices = make_update_case(
        4, 600, L, 4, 16 if circular else 3, dtype, dtype, circular=circular, gather=True, state_cl=False,
        x_2d=False, gen=gen)
    before = state.clone()
    out = causal_conv1d_update(x, state, weight, bias, "silu", cache, indices, backend="cpu")
    check_update(out, state, x, before, weight, bias, True, cache, indices)


@pytest.mark.parametrize("L", [1, 2, 6, 16, 20, 37])
@pytest.mark.parametrize("S", ["short", "width", "16", "21"])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("pair", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float32)],
                         ids=["bf16", "fp16-fp32"])
@pytest.mark.parametrize("circular", [False, True], ids=["shift", "ring"])
@pytest.mark.parametrize("layout", ["rows", "x_cl", "x_slice", "state_cl"])
def test_a_few_tokens_as_rows_of_channels(layout, circular, pair, width, S, L, gen):
    """The cpu backend's other route for several tokens: the state's rows and x's tokens as rows of
    channels through the forward's channel-last kernel (6 tokens or more, or any number where no
    decode step serves the width, dtype pair or state layout; beyond 16, in blocks of 16, the
    last overlapping), for states of width-1, width, 16 and 21 steps (a ring's rows of 21 take the
    general taps), their rows back to back or their steps' channels contiguous, 600 channels (a
    run of 512 and a partial one), x with its tokens or its channels contiguous or a slice of
    longer rows, against the reference."""
    xd, wd = pair
    S = {"short": max(width - 1, 1), "width": width, "16": 16, "21": 21}[S]
    x, state, weight, bias, cache, indices = make_update_case(
        4, 600, L, width, S, xd, wd, circular=circular, gather=True, state_cl=layout == "state_cl", x_2d=False,
        gen=gen)
    if layout == "x_cl":
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    elif layout == "x_slice":  # channels L + 5 elements apart
        x = torch.cat([x, randn((*x.shape[:2], 5), gen, xd)], dim=2)[:, :, :L]
    before = state.clone()
    out = causal_conv1d_update(x, state, weight, bias, "silu", cache, indices, backend="cpu")
    check_update(out, state, x, before, weight, bias, True, cache, indices)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
@pytest.mark.parametrize("width", [1, 2, 4, 7])
def test_decode_equals_forward(device, backend, width, gen):
    """Decoding a sequence token by token gives the outputs and final state of one forward."""
    B, D, L = 2, 16, 21
    x = randn((B, D, L), gen, torch.float32, device)
    weight = randn((D, width), gen, torch.float32, device)
    bias = randn((D,), gen, torch.float32, device)
    out, final = causal_conv1d_fn(x, weight, bias, activation="silu", return_final_states=True, backend=backend)
    state = torch.zeros(B, D, max(width - 1, 1), device=device)
    steps = [causal_conv1d_update(x[:, :, t], state, weight, bias, "silu", backend=backend) for t in range(L)]
    torch.testing.assert_close(torch.stack(steps, dim=-1), out, rtol=1e-5, atol=1e-5)
    if width > 1:
        assert torch.equal(state, final)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_circular_decode_equals_forward(device, backend, gen):
    """The same with a circular state far longer than the window, written in chunks."""
    B, D, W, S = 2, 8, 4, 16
    x = randn((B, D, 40), gen, torch.float32, device)
    weight = randn((D, W), gen, torch.float32, device)
    out = causal_conv1d_fn(x, weight, backend=backend)
    state = torch.zeros(B, D, S, device=device)
    cache = torch.zeros(B, dtype=torch.int32, device=device)
    got = []
    for t0, n in ((0, 1), (1, 3), (4, 13), (17, 23)):
        got.append(causal_conv1d_update(x[:, :, t0:t0 + n], state, weight, cache_seqlens=cache, backend=backend))
        cache += n
    torch.testing.assert_close(torch.cat(got, dim=-1), out, rtol=1e-5, atol=1e-5)


def test_update_ref_matches_reference(gen):
    x, state, weight, bias, cache, indices = make_update_case(
        5, 12, 3, 4, 6, torch.float64, torch.float64, circular=True, gather=True, state_cl=True, x_2d=False,
        gen=gen)
    before = state.clone()
    out = causal_conv1d_update_ref(x, state, weight, bias, "silu", cache, indices)
    check_update(out, state, x, before, weight, bias, True, cache, indices)


# ---- errors: named, and nothing written --------------------------------------------------


def _valid(gen):
    x, state, weight, bias, cache, indices = make_update_case(
        3, 8, 2, 4, 5, torch.float32, torch.float32, circular=True, gather=True, state_cl=False, x_2d=False,
        gen=gen)
    return dict(x=x, conv_state=state, weight=weight, bias=bias, cache_seqlens=cache, conv_state_indices=indices)


def _bad_index(a):
    a["conv_state_indices"] = a["conv_state_indices"].clone()
    a["conv_state_indices"][0] = a["conv_state"].shape[0]


def _dup_index(a):
    a["conv_state_indices"] = torch.tensor([4, -1, 4], dtype=torch.int32)


def _neg_cache(a):
    a["cache_seqlens"] = torch.tensor([0, 1, -3], dtype=torch.int32)


ERRORS = {
    "x_rank_1": (lambda a: a.update(x=a["x"][0, :, 0]), ValueError, ["'x'", "2 or 3 dims"]),
    "x_dim": (lambda a: a.update(x=torch.randn(3, 9, 2)), ValueError, ["'weight'", "dim = 9"]),
    "state_short": (lambda a: a.update(conv_state=torch.randn(6, 8, 2)), ValueError,
                    ["'conv_state'", "width-1 or more", "(6, 8, 2)"]),
    "state_dtype": (lambda a: a.update(conv_state=a["conv_state"].half()), TypeError, ["'conv_state'", "torch.float16"]),
    "state_rows": (lambda a: a.update(conv_state_indices=None), ValueError, ["'conv_state'", "6 rows", "batch 3"]),
    "state_expanded": (lambda a: a.update(conv_state=torch.randn(1, 8, 5).expand(6, 8, 5)), ValueError,
                       ["'conv_state'", "share memory"]),
    "state_aliases_x": (lambda a: a.update(x=a["conv_state"][:3, :, :2]), ValueError, ["'conv_state'", "'x'"]),
    "cache_dtype": (lambda a: a.update(cache_seqlens=a["cache_seqlens"].long()), TypeError,
                    ["'cache_seqlens'", "torch.int32", "torch.int64"]),
    "cache_shape": (lambda a: a.update(cache_seqlens=a["cache_seqlens"][:2]), ValueError, ["'cache_seqlens'", "(3,)"]),
    "indices_device": (lambda a: a.update(conv_state_indices=a["conv_state_indices"].to("meta")), ValueError,
                       ["'conv_state_indices'", "meta"]),
    "weight_width_9": (lambda a: a.update(weight=torch.randn(8, 9), bias=None), ValueError, ["between 1 and 8"]),
    "bias_dtype": (lambda a: a.update(bias=a["bias"].bfloat16()), TypeError, ["'bias'", "weight's dtype"]),
    "index_out_of_range": (_bad_index, ValueError, ["conv_state_indices[0]", "pool"]),
    "index_twice": (_dup_index, ValueError, ["conv_state_indices", "twice"]),
    "negative_cache": (_neg_cache, ValueError, ["cache_seqlens[2]", ">= 0"]),
    "activation": (lambda a: a.update(activation="gelu"), ValueError, ["'activation'", "'gelu'"]),
}


@pytest.mark.parametrize("backend", ["cpu", "aten", "emulate"])
@pytest.mark.parametrize("case", list(ERRORS))
def test_invalid_argument(case, backend, gen):
    if backend == "emulate" and not _lib.library().backend_available(_lib.BACKEND_IDS["emulate"], 0, 0)[0]:
        pytest.skip("this libcc1d has no emulate backend")
    a = _valid(gen)
    a.setdefault("activation", "silu")
    change, exc, needles = ERRORS[case]
    change(a)
    state = a["conv_state"]
    before = state.clone()
    with pytest.raises(exc) as info:
        causal_conv1d_update(backend=backend, **a)
    for n in needles:
        assert n in str(info.value), f"{str(info.value)!r} lacks {n!r}"
    assert torch.equal(state, before), "a failing call changed conv_state"


def test_library_rejects_bad_indices_before_writing(lib, gen):
    """The C ABI alone (Python's checks bypassed) refuses them too, before writing anything."""
    from causal_conv1d._op_update import CUpdateArgs

    a = _valid(gen)
    _bad_index(a)
    out = torch.full_like(a["x"], float("nan"))
    before = a["conv_state"].clone()
    args = _pack.fill_args(CUpdateArgs, dict(x=a["x"], conv_state=a["conv_state"], weight=a["weight"],
                                            bias=a["bias"], cache_seqlens=a["cache_seqlens"],
                                            conv_state_indices=a["conv_state_indices"], out=out),
                          activation=_lib.ACT_SILU, backend=_lib.BACKEND_IDS["cpu"], stream=None)
    assert lib.call_status("cc1d_causal_conv1d_update", args) == _lib.ERR_INVALID_ARGUMENT
    assert "conv_state_indices[0]" in lib.last_error()
    assert torch.isnan(out).all() and torch.equal(a["conv_state"], before)


# ---- the torch operator -------------------------------------------------------------------

needs_opcheck = pytest.mark.skipif(not hasattr(torch.library, "opcheck"),
                                   reason="torch.library.opcheck needs torch >= 2.4")


@needs_opcheck
@pytest.mark.parametrize("backend", ["cpu", "aten"])
def test_opcheck(backend, gen):
    x, state, weight, bias, cache, indices = make_update_case(
        3, 8, 2, 4, 6, torch.float32, torch.float32, circular=True, gather=True, state_cl=True, x_2d=False, gen=gen)
    torch.library.opcheck(torch.ops.causal_conv1d.update.default,
                          (x, state, weight, bias, cache, indices, True, backend))


def test_schema_declares_the_state_mutation():
    schema = str(torch.ops.causal_conv1d.update.default._schema)
    assert re.search(r"Tensor\(a\d*!\) conv_state", schema) and schema.endswith("-> Tensor")
    assert schema.count("!") == 1, "only conv_state is mutated"


def test_compile_fullgraph_decode_step(gen):
    x, state, weight, bias, _, _ = make_update_case(
        2, 8, 1, 4, 3, torch.float32, torch.float32, circular=False, gather=False, state_cl=False, x_2d=True,
        gen=gen)
    state_eager = state.clone()
    want = causal_conv1d_update(x, state_eager, weight, bias, "silu")

    @torch.compile(fullgraph=True, backend=compile_backend("aot_eager"))
    def step(x, state):
        return causal_conv1d_update(x, state, weight, bias, "silu") * 2

    got = step(x, state)
    torch.testing.assert_close(got, want * 2)
    assert torch.equal(state, state_eager)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_cuda_graph_capture_and_replay(gen):
    """The nvrtc update allocates nothing beyond its output: it captures into a CUDA graph, and
    each replay advances the state like an eager call."""
    x, state, weight, bias, cache, indices = make_update_case(
        4, 64, 1, 4, 8, torch.bfloat16, torch.float32, circular=True, gather=True, state_cl=False, x_2d=True,
        gen=gen, device="cuda")
    causal_conv1d_update(x, state.clone(), weight, bias, "silu", cache, indices, backend="nvrtc")  # compile first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = causal_conv1d_update(x, state, weight, bias, "silu", cache, indices, backend="nvrtc")
    for step in range(3):
        x.copy_(randn(x.shape, gen, x.dtype, "cuda"))
        before = state.clone()
        graph.replay()
        torch.cuda.synchronize()
        check_update(out, state, x, before, weight, bias, True, cache, indices)
        cache += 1


def test_index_check_is_skipped_with_a_warning_inside_capture(monkeypatch):
    """CAUSAL_CONV1D_CHECK_INDICES asks for a host check of CUDA index tensors; inside CUDA-graph
    capture it would invalidate the capture, so it is skipped there, said once per op."""
    from types import SimpleNamespace

    from causal_conv1d import _diag

    cuda_x, cpu_x = SimpleNamespace(is_cuda=True), torch.zeros(1)
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.delenv("CAUSAL_CONV1D_CHECK_INDICES", raising=False)
    assert not _diag.index_check_wanted(cuda_x, "fn")
    for off in ("", "0", " 0 "):
        monkeypatch.setenv("CAUSAL_CONV1D_CHECK_INDICES", off)
        assert not _diag.index_check_wanted(cuda_x, "fn")
    monkeypatch.setenv("CAUSAL_CONV1D_CHECK_INDICES", "1")
    assert not _diag.index_check_wanted(cpu_x, "fn")  # host tensors: libcc1d always checks them
    assert _diag.index_check_wanted(cuda_x, "fn")
    capturing[0] = True
    key = ("check-indices-in-capture", "causal_conv1d_update")
    monkeypatch.setattr(_diag, "_warned", set())
    with pytest.warns(causal_conv1d.CausalConv1dWarning, match=r"causal_conv1d_update: CAUSAL_CONV1D_CHECK_INDICES "
                                                               r"is skipped inside CUDA-graph capture"):
        assert not _diag.index_check_wanted(cuda_x, "causal_conv1d_update")
    assert _diag.already_warned(key)
    assert not _diag.index_check_wanted(cuda_x, "causal_conv1d_update")  # once only


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_cuda_graph_capture_with_index_check_on(monkeypatch, gen):
    """With CAUSAL_CONV1D_CHECK_INDICES=1 an eager call still checks, and a captured call runs
    unchecked (with a warning) instead of breaking the capture with its device-to-host copy."""
    from causal_conv1d import _diag

    monkeypatch.setattr(_diag, "_warned", set())  # the warning is once per process
    monkeypatch.setenv("CAUSAL_CONV1D_CHECK_INDICES", "1")
    x, state, weight, bias, cache, indices = make_update_case(
        4, 64, 1, 4, 8, torch.bfloat16, torch.float32, circular=True, gather=True, state_cl=False, x_2d=True,
        gen=gen, device="cuda")
    bad = indices.clone()
    bad[0] = state.shape[0]
    with pytest.raises(ValueError, match="conv_state_indices"):
        causal_conv1d_update(x, state.clone(), weight, bias, "silu", cache, bad, backend="nvrtc")
    causal_conv1d_update(x, state.clone(), weight, bias, "silu", cache, indices, backend="nvrtc")  # compile first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.warns(causal_conv1d.CausalConv1dWarning, match="skipped inside CUDA-graph capture"):
        with torch.cuda.graph(graph):
            out = causal_conv1d_update(x, state, weight, bias, "silu", cache, indices, backend="nvrtc")
    before = state.clone()
    graph.replay()
    torch.cuda.synchronize()
    check_update(out, state, x, before, weight, bias, True, cache, indices)
