"""The compatibility names under torch.compile and CUDA graphs: opcheck of each op
(causal_conv1d::fwd, ::update, ::bwd) in the calls cpp_functions and causal_conv1d_cuda make;
a small Mamba-style block (in_proj, the conv, silu, a scan stand-in, out_proj, and an update
decode step) under torch.compile(fullgraph=True) against eager; cpp_functions and every
causal_conv1d_cuda form traced without a graph break; on a GPU, the forward and the update
captured in a CUDA graph and replayed on new inputs, also with their first use (compile and module
load) inside the capture. aot_eager keeps the fast tests free of C++
compiles; the inductor run is marked slow.
"""

import os
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import causal_conv1d
import causal_conv1d_cuda
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from causal_conv1d.cpp_functions import (causal_conv1d_bwd_function, causal_conv1d_fwd_function,
                                         causal_conv1d_update_function)
from helpers import _GPU, NEEDS_AOT_MUTATION, compile_backend, make_states, make_x, randn, run_python
from reference import assert_matches, reference_update

needs_opcheck = pytest.mark.skipif(not hasattr(torch.library, "opcheck"),
                                   reason="torch.library.opcheck needs torch >= 2.4")


# ---- opcheck: each op as the compatibility layer calls it -------------------------------------------


@needs_opcheck
@pytest.mark.parametrize("backend", ["", "aten"])
def test_opcheck_fwd_as_fwd_function_calls_it(backend, gen):
    """Channel-last x with initial states and final states (Mamba-2's chunked prefill)."""
    x = make_x(2, 16, 19, torch.float32, "cl", gen).requires_grad_()
    w = randn((16, 4), gen, torch.float32).requires_grad_()
    b = randn((16,), gen, torch.float32)
    init = make_states(2, 16, 4, torch.float32, "cl", gen).requires_grad_()
    torch.library.opcheck(torch.ops.causal_conv1d.fwd.default, (x, w, b, None, init, True, True, backend))


@needs_opcheck
@pytest.mark.parametrize("backend", ["", "aten"])
def test_opcheck_bwd_with_dx_a_chunk_view(backend, gen):
    """dx_out a chunk of a larger gradient (the mutated argument), fp32 weight gradients."""
    x = make_x(2, 8, 21, torch.bfloat16, "cf", gen)
    w = randn((8, 4), gen, torch.float32)
    b = randn((8,), gen, torch.float32)
    dout = make_x(2, 8, 21, torch.bfloat16, "cf", gen)
    dx = torch.zeros(2, 16, 21, dtype=torch.bfloat16).chunk(2, dim=1)[0]
    torch.library.opcheck(torch.ops.causal_conv1d.bwd.default,
                          (x, w, b, dout, None, None, None, dx, True, True, True, True, False, False, backend))


@needs_opcheck
@pytest.mark.parametrize("backend", ["", "aten"])
def test_opcheck_update_old_form(backend, gen):
    """x (batch, dim) and a state of exactly width steps (upstream 1.0-1.3's update)."""
    x = randn((3, 8), gen, torch.float32)
    state = randn((3, 8, 4), gen, torch.float32)
    w = randn((8, 4), gen, torch.float32)
    torch.library.opcheck(torch.ops.causal_conv1d.update.default, (x, state, w, None, None, None, True, backend))


# ---- a Mamba-style block under torch.compile(fullgraph=True) ----------------------------------------


class MambaStyleBlock(nn.Module):
    """in_proj -> causal conv (channel-last view, silu) -> a gated cumulative-sum scan stand-in
    -> out_proj; step() is the decode path through causal_conv1d_update."""

    def __init__(self, d_model=16, d_inner=32, width=4):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.in_proj = nn.Linear(d_model, 2 * d_inner)
        self.conv_weight = nn.Parameter(torch.randn(d_inner, width, generator=g) * 0.4)
        self.conv_bias = nn.Parameter(torch.randn(d_inner, generator=g) * 0.1)
        self.decay = nn.Parameter(torch.rand(d_inner, generator=g))
        self.out_proj = nn.Linear(d_inner, d_model)

    def forward(self, u):  # (batch, seqlen, d_model) -> (out, conv_state, scan_state)
        x, z = self.in_proj(u).chunk(2, dim=-1)
        x, state = causal_conv1d_fn(x.transpose(1, 2), self.conv_weight, self.conv_bias, return_final_states=True,
                                    activation="silu")
        h = torch.cumsum(x * torch.sigmoid(self.decay)[:, None], dim=-1)  # the scan's stand-in
        y = h * F.silu(z.transpose(1, 2))
        return self.out_proj(y.transpose(1, 2)), state, h[..., -1]

    def step(self, u_t, conv_state, h):  # (batch, d_model); conv_state updated in place
        x, z = self.in_proj(u_t).chunk(2, dim=-1)
        x = causal_conv1d_update(x, conv_state, self.conv_weight, self.conv_bias, activation="silu")
        h = h + x * torch.sigmoid(self.decay)
        return self.out_proj(h * F.silu(z)), h


def _prefill_and_decode(block, u, u_next):
    y, state, h = block(u)
    state = state.contiguous()
    outs = []
    for t in range(u_next.shape[1]):
        o, h = block.step(u_next[:, t], state, h)
        outs.append(o)
    return y, torch.stack(outs, dim=1), state


def _check_block(backend, gen):
    block = MambaStyleBlock()
    u = randn((2, 24, 16), gen, torch.float32)
    u_next = randn((2, 3, 16), gen, torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(_prefill_and_decode, fullgraph=True, backend=compile_backend(backend))
    with torch.no_grad():
        got = compiled(block, u, u_next)
        want = _prefill_and_decode(block, u, u_next)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # decode after prefill equals a prefill over the longer sequence
    with torch.no_grad():
        full = block(torch.cat([u, u_next], dim=1))[0]
    torch.testing.assert_close(got[1], full[:, 24:], rtol=1e-4, atol=1e-5)


def test_mamba_block_fullgraph_aot_eager(gen):
    _check_block("aot_eager", gen)


@pytest.mark.slow
@NEEDS_AOT_MUTATION
def test_mamba_block_fullgraph_inductor(gen):
    _check_block("inductor", gen)


def test_mamba_block_training_step_fullgraph(gen):
    """Forward and backward of the block traced by AOTAutograd, gradients as eager's."""
    block = MambaStyleBlock()
    u = randn((2, 20, 16), gen, torch.float32)

    def loss(u):
        return block(u)[0].square().mean()

    torch._dynamo.reset()
    compiled = torch.compile(loss, fullgraph=True, backend=compile_backend("aot_eager"))
    got = torch.autograd.grad(compiled(u), list(block.parameters()))
    want = torch.autograd.grad(loss(u), list(block.parameters()))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_compat_names_trace_without_graph_break(gen):
    """cpp_functions and every causal_conv1d_cuda form inside one fullgraph region; in-place
    outputs written as in eager."""
    B, D, L, W = 2, 8, 14, 4
    x = make_x(B, D, L, torch.float32, "cl", gen)
    w = randn((D, W), gen, torch.float32)
    b = randn((D,), gen, torch.float32)

    def f(x, w, b, out, dx, dw, state, state2, out_t):
        y = causal_conv1d_fwd_function(x, w, b, None, None, None, True)
        causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True)
        old = causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, True) + causal_conv1d_cuda.causal_conv1d_fwd(
            x, w, b, None, None, None, True)
        gx, gw, gb, _ = causal_conv1d_bwd_function(x, w, b, y, None, None, None, dx, False, True)
        causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, y, None, None, None, dx, dw, None, None, True)
        old_g = causal_conv1d_cuda.causal_conv1d_bwd(x, w, b, y, None, True)[1]
        yt = causal_conv1d_update_function(x[..., -1:], state, w, b, True, None, None)
        causal_conv1d_cuda.causal_conv1d_update(x[..., -1:], state2, w, b, out_t, True, None, None)
        return y, old, gw, old_g, yt

    def buffers():
        return (torch.zeros(B, D, L), torch.zeros(B, D, L), torch.zeros(D, W), torch.ones(B, D, 3),
                torch.ones(B, D, 3), torch.zeros(B, D, 1))

    torch._dynamo.reset()
    eb, cb = buffers(), buffers()
    want = f(x, w, b, *eb)
    got = torch.compile(f, fullgraph=True, backend=compile_backend("aot_eager"))(x, w, b, *cb)
    for g, e in zip(got + cb, want + eb):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)
    assert_matches(cb[0], x, w, b, silu=True)
    torch.testing.assert_close(cb[0] * 2, got[1])
    torch.testing.assert_close(cb[2], got[2])  # dweight accumulated into zeros


# ---- CUDA graphs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dev", [pytest.param("cuda", marks=_GPU)])
def test_cuda_graph_capture_and_replay(dev, gen):
    """causal_conv1d_fn, causal_conv1d_update and the causal_conv1d_cuda 1.6 forward captured once
    (after a warm-up that compiles the kernels), replayed on new inputs copied into the static
    buffers; each replay matches the reference."""
    B, D, L, W, S = 2, 64, 48, 4, 3
    sx = torch.zeros(B, D, L, device=dev, dtype=torch.bfloat16)
    sxt = torch.zeros(B, D, device=dev, dtype=torch.bfloat16)
    w = randn((D, W), gen, torch.bfloat16, dev)
    b = randn((D,), gen, torch.bfloat16, dev)
    state = torch.zeros(B, D, S, device=dev, dtype=torch.bfloat16)
    out_raw = torch.zeros_like(sx)

    def body():
        y = causal_conv1d_fn(sx, w, b, activation="silu")
        yt = causal_conv1d_update(sxt, state, w, b, activation="silu")
        causal_conv1d_cuda.causal_conv1d_fwd(sx, w, b, None, None, out_raw, None, False)
        return y, yt

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, yt = body()
    for _ in range(3):
        x = randn((B, D, L), gen, torch.bfloat16, dev)
        xt = randn((B, D), gen, torch.bfloat16, dev)
        s0 = randn((B, D, S), gen, torch.bfloat16, dev)
        sx.copy_(x)
        sxt.copy_(xt)
        state.copy_(s0)
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(y, x, w, b, silu=True)
        assert_matches(out_raw, x, w, b)
        want_t, want_state = reference_update(xt, s0, w, b, True)
        torch.testing.assert_close(yt.double().cpu(), want_t, rtol=2e-2, atol=2e-2)
        assert torch.equal(state.double().cpu(), want_state)
    assert causal_conv1d.last_backend() is not None


_FIRST_USE_IN_CAPTURE = """
import torch, causal_conv1d
from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from reference import assert_matches, reference_update
g = torch.Generator().manual_seed(7)
B, D, L, W, S = 2, 64, 48, 4, 3
sx = torch.zeros(B, D, L, device="cuda", dtype=torch.bfloat16)
sxt = torch.zeros(B, D, device="cuda", dtype=torch.bfloat16)
w = (torch.randn(D, W, generator=g) * 0.5).to("cuda", torch.bfloat16)
state = torch.zeros(B, D, S, device="cuda", dtype=torch.bfloat16)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):  # torch's default capture mode (global); nothing compiled or loaded yet
    y = causal_conv1d_fn(sx, w, activation="silu")
    yt = causal_conv1d_update(sxt, state, w, None, activation="silu")
for _ in range(2):
    x = torch.randn(B, D, L, generator=g).to("cuda", torch.bfloat16)
    xt = torch.randn(B, D, generator=g).to("cuda", torch.bfloat16)
    s0 = torch.randn(B, D, S, generator=g).to("cuda", torch.bfloat16)
    sx.copy_(x); sxt.copy_(xt); state.copy_(s0)
    graph.replay()
    torch.cuda.synchronize()
    assert_matches(y, x, w, silu=True)
    want_t, want_state = reference_update(xt, s0, w, None, True)
    torch.testing.assert_close(yt.double().cpu(), want_t, rtol=2e-2, atol=2e-2)
    assert torch.equal(state.double().cpu(), want_state)
print("OK", causal_conv1d.last_backend().backend)
"""


@pytest.mark.parametrize("dev", [pytest.param("cuda", marks=_GPU)])
def test_cuda_graph_first_use_inside_the_capture(dev, tmp_path):
    """No warm-up: a fresh process (empty kernel cache, strict mode, so no fallback) compiles and
    loads the kernels inside torch.cuda.graph; the capture stays valid and its replays match the
    reference (libcc1d loads modules in relaxed capture mode)."""
    here = str(Path(__file__).parent)
    r = run_python(_FIRST_USE_IN_CAPTURE, env={"CAUSAL_CONV1D_CACHE_DIR": tmp_path, "CAUSAL_CONV1D_STRICT": "1",
                                               "PYTHONPATH": here + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert r.returncode == 0 and r.stdout.strip() == "OK nvrtc", r.stdout + r.stderr
