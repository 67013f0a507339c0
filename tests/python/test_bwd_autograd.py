"""causal_conv1d_fn's autograd: its backward is the native op causal_conv1d::bwd, dispatched like
the forward call, on every backend against float64 autograd of the independent reference
(tests/python/reference.py) over layouts, dtype pairs, widths 1..8, seq_idx with padding, states,
with and without dfinal_states, lengths up to above 4096 (beyond the default run: marker slow).
The graph saves only the inputs; fallbacks warn and strict mode refuses them; a tiny
Mamba-style model trains alike on cpu and aten; gradcheck in float64 through aten.
"""

import pytest
import torch

import causal_conv1d
from causal_conv1d import _ops, causal_conv1d_fn
from helpers import DEV_BACKENDS, DTYPE_PAIRS, PAIR_IDS, make_bwd_case, randn, served_by
from reference import assert_grad, reference_grads

needs_custom_op = pytest.mark.skipif(not _ops.USE_CUSTOM_OP, reason="torch.library.custom_op needs torch >= 2.4")


def _served_by(backend, op="bwd"):
    served_by(backend, op)


def _grads_via_autograd(x, w, b, s, i, dout, df, silu, backend):
    leaves = [None if t is None else t.detach().clone().requires_grad_() for t in (x, w, b, i)]
    res = causal_conv1d_fn(leaves[0], leaves[1], leaves[2], seq_idx=s, initial_states=leaves[3],
                           return_final_states=df is not None, activation="silu" if silu else None, backend=backend)
    outs, grads = ([res[0], res[1]], [dout, df]) if df is not None else ([res], [dout])
    asked = [t for t in leaves if t is not None]
    got = iter(torch.autograd.grad(outs, asked, grads))
    return [next(got) if t is not None else None for t in leaves]


GRID_LAYOUTS = ["cf", "cl"]


@pytest.mark.parametrize("width", range(1, 9))
@pytest.mark.parametrize("pair", DTYPE_PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("layout", GRID_LAYOUTS)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_grid_autograd(device, backend, layout, pair, width, gen):
    """causal_conv1d_fn's gradients: the options vary with the case."""
    xd, wd = pair
    i = width + 3 * DTYPE_PAIRS.index(pair) + 7 * GRID_LAYOUTS.index(layout)
    L = [1, 2, 5, 17, 64, 127, 256, 1001, 2048][i % 9]
    D = [1, 3, 24, 64][(i // 3) % 4]
    opts = dict(bias=i % 2 == 0, seq=(i // 2) % 3 == 0, init=(i // 3) % 2 == 0, dfinal=(i // 5) % 2 == 0)
    silu = (i // 7) % 2 == 0
    x, w, b, s, init, dout, df = make_bwd_case(gen, device, layout, xd, wd, width, L, D, **opts)
    got = _grads_via_autograd(x, w, b, s, init, dout, df, silu, backend)
    _served_by(backend)
    want = reference_grads(x, w, b, s, init, silu, dout, df)
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (xd, wd, wd, xd)):
        if e is not None:
            assert_grad(name, g, e, dt)


LAYOUTS_MORE = ["cf_dim_slice", "cl_dim_slice", "time_step", "expand_batch"]


@pytest.mark.parametrize("width", [1, 3, 4, 8])
@pytest.mark.parametrize("layout", LAYOUTS_MORE)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_views_and_states(device, backend, layout, width, gen):
    """Strided views of x (and of dout, which follows x's layout), both layouts of the states, seq_idx."""
    for k, state_layout in enumerate(("cf", "cl")):
        xd, wd = DTYPE_PAIRS[(width + k + LAYOUTS_MORE.index(layout)) % len(DTYPE_PAIRS)]
        x, w, b, s, init, dout, df = make_bwd_case(gen, device, layout, xd, wd, width, [37, 300][k], [5, 16][k], bias=True,
                                           seq=k == 1, init=True, dfinal=True, state_layout=state_layout)
        got = _grads_via_autograd(x, w, b, s, init, dout, df, True, backend)
        _served_by(backend)
        want = reference_grads(x, w, b, s, init, True, dout, df)
        for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (xd, wd, wd, xd)):
            assert_grad(name, g, e, dt)


@pytest.mark.parametrize("width", [2, 4, 8])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_rows_off_16_bytes_and_final_states_across_warp_steps(device, backend, width, gen):
    """Contiguous channel-first rows of odd length, so that most rows start off 16 bytes (the GPU's
    vector walk starts each row at its first aligned step and recomputes the steps before it),
    and lengths whose last W-1 steps begin in the 256-step warp step before the last (the walk
    left dfinal_states out of those before 2026-12-05), with and without initial states."""
    cases = [(torch.bfloat16, 2047), (torch.float16, 257), (torch.float32, 258), (torch.bfloat16, 45)]
    for k, (xd, L) in enumerate(cases):
        x, w, b, s, init, dout, df = make_bwd_case(gen, device, "cf", xd, torch.float32, width, L, 9, bias=True,
                                                   seq=False, init=k % 2 == 0, dfinal=True, state_layout="cf")
        got = _grads_via_autograd(x, w, b, s, init, dout, df, k != 3, backend)
        _served_by(backend)
        want = reference_grads(x, w, b, s, init, k != 3, dout, df)
        dtypes = (xd, torch.float32, torch.float32, xd)
        for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, dtypes):
            if e is not None:
                assert_grad(name, g, e, dt)


def _long_case(device, backend, L, case, gen):
    layout = case.split("-")[0]
    xd = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[case.split("-")[1]]
    width = 8 if "w8" in case else 4
    x, w, b, s, init, dout, df = make_bwd_case(gen, device, layout, xd, torch.float32, width, L, 6, bias=True,
                                       seq="seq" in case, init="init" in case, dfinal="init" in case)
    got = _grads_via_autograd(x, w, b, s, init, dout, df, True, backend)
    _served_by(backend)
    want = reference_grads(x, w, b, s, init, True, dout, df)
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (xd,) + (torch.float32,) * 2 + (xd,)):
        if e is not None:
            assert_grad(name, g, e, dt)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_long_representative(device, backend, gen):
    """One length above 4096 (several time segments per row) in the default run."""
    _long_case(device, backend, 4099, "cl-bf16-seq", gen)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("case", ["cf-fp32", "cl-bf16-seq", "cf-fp16-init", "cl-fp32-w8", "cf-bf16-w8"])
@pytest.mark.parametrize("L", [4097, 8200, 20001])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_long(device, backend, L, case, gen):
    _long_case(device, backend, L, case, gen)


# ---- dispatch ---------------------------------------------------------------------------------


def test_backward_follows_the_forward_backend_and_reports_it(gen, fresh_dispatch):
    x = randn((2, 8, 30), gen, torch.float32).requires_grad_()
    w = randn((8, 4), gen, torch.float32).requires_grad_()
    for backend in ("cpu", "aten"):
        out = causal_conv1d_fn(x, w, activation="silu", backend=backend)
        assert causal_conv1d.last_backend().op == "fwd"
        out.sum().backward()
        _served_by(backend)
        assert causal_conv1d.last_backend().requested == backend
    with causal_conv1d.use_backend("aten"):
        out = causal_conv1d_fn(x, w)
    out.sum().backward()  # outside the block: the backward follows the environment (cpu by default)
    _served_by("cpu")


def test_backward_on_another_thread_reports_to_the_forward_and_follows_its_block(gen, fresh_dispatch):
    """torch runs the backward of CUDA tensors on a device thread of its own: a backward run off
    the forward's thread (here: backward() called from a second thread, as the engine does on
    CUDA) records into the forward's thread's last_backend() and follows the forward's
    use_backend() block, which is the only one it can know."""
    import threading

    x = randn((2, 8, 30), gen, torch.float32).requires_grad_()
    w = randn((8, 4), gen, torch.float32).requires_grad_()
    with causal_conv1d.use_backend("aten"):
        out = causal_conv1d_fn(x, w, activation="silu")
    _served_by("aten", op="fwd")
    seen = {}

    def other():
        out.sum().backward()
        seen["there"] = causal_conv1d.last_backend()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    _served_by("aten")  # the forward's thread sees its backward, run under the forward's block
    assert causal_conv1d.last_backend().source == "use_backend()"
    assert seen["there"].op == "bwd" and seen["there"].backend == "aten"
    want = reference_grads(x.detach(), w.detach(), None, None, None, True, torch.ones_like(out), None)
    assert_grad("x", x.grad, want[0], torch.float32)
    assert_grad("weight", w.grad, want[1], torch.float32)


def test_backward_fallback_warns_and_strict_refuses(lib, gen, fresh_dispatch, monkeypatch, python_dispatch):
    """The backward's plan says the cpu backend cannot serve op 'bwd': the forward runs on cpu,
    the backward falls back to aten with a warning, and strict mode makes that an error."""
    real = lib.plan

    def fake(op, backend, device_type, device_index):
        p = real(op, backend, device_type, device_index)
        if op != "bwd":
            return p
        return p._replace(candidates=tuple(c._replace(available=False, reason="simulated: no cpu backward")
                                           if c.backend == "cpu" else c for c in p.candidates))

    monkeypatch.setattr(lib, "plan", fake)
    x = randn((1, 4, 10), gen, torch.float32).requires_grad_()
    w = randn((4, 2), gen, torch.float32)
    out = causal_conv1d_fn(x, w, activation="silu")
    _served_by("cpu", op="fwd")
    with pytest.warns(causal_conv1d.CausalConv1dWarning, match="simulated: no cpu backward.*Falling back to 'aten'"):
        (gx,) = torch.autograd.grad(out.sum(), x)
    c = causal_conv1d.last_backend()
    assert c.op == "bwd" and c.backend == "aten" and c.fallback_from[0][0] == "cpu"
    assert_grad("x", gx, reference_grads(x, w, None, None, None, True, torch.ones(1, 4, 10), None)[0], torch.float32)
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "1")
    out = causal_conv1d_fn(x, w, activation="silu")
    with pytest.raises(causal_conv1d.StrictModeError, match="simulated: no cpu backward"):
        torch.autograd.grad(out.sum(), x)


def test_backward_saves_only_the_inputs(gen):
    """The autograd graph holds x, weight, bias, seq_idx, initial_states and nothing else."""
    x = randn((2, 8, 64), gen, torch.bfloat16).requires_grad_()
    w = randn((8, 4), gen, torch.float32).requires_grad_()
    b = randn((8,), gen, torch.float32).requires_grad_()
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        out = causal_conv1d_fn(x, w, b, activation="silu")
    assert len(packed) == 3 and all(any(p is t for t in (x, w, b)) for p in packed), \
        [(tuple(p.shape), p.dtype) for p in packed]
    out.float().sum().backward()
    assert x.grad is not None and w.grad is not None and b.grad is not None


# ---- training --------------------------------------------------------------------------------


class TinyMamba(torch.nn.Module):
    """in_proj -> causal conv (silu) on the x half -> gate by silu(z) -> out_proj, residual."""

    def __init__(self, d_model, d_inner, width, gen):
        super().__init__()
        self.in_proj = torch.nn.Linear(d_model, 2 * d_inner)
        self.conv_w = torch.nn.Parameter(torch.randn(d_inner, width, generator=gen) * 0.3)
        self.conv_b = torch.nn.Parameter(torch.randn(d_inner, generator=gen) * 0.1)
        self.out_proj = torch.nn.Linear(d_inner, d_model)
        with torch.no_grad():
            for p in (*self.in_proj.parameters(), *self.out_proj.parameters()):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)

    def forward(self, u, backend):
        xz = self.in_proj(u)  # (B, L, 2E)
        x, z = xz.chunk(2, dim=-1)
        x = causal_conv1d_fn(x.transpose(1, 2), self.conv_w, self.conv_b, activation="silu", backend=backend)
        return u + self.out_proj(x.transpose(1, 2) * torch.nn.functional.silu(z))


def test_tiny_mamba_trains_alike_on_cpu_and_aten():
    losses = {}
    for backend in ("cpu", "aten"):
        gen = torch.Generator().manual_seed(3)
        model = TinyMamba(16, 32, 4, gen)
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        data = torch.randn(4, 40, 16, generator=gen)
        target = torch.nn.functional.pad(data[:, :-2], (0, 0, 2, 0)) * 0.5  # the token two steps back
        losses[backend] = []
        for _ in range(20):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(data, backend), target)
            loss.backward()
            _served_by(backend)
            opt.step()
            losses[backend].append(loss.item())
    torch.testing.assert_close(torch.tensor(losses["cpu"]), torch.tensor(losses["aten"]), rtol=1e-4, atol=1e-6)
    assert losses["cpu"][-1] < losses["cpu"][0] * 0.9, "the model did not learn"


@needs_custom_op
def test_gradcheck_float64_through_aten(gen):
    """The forward op with the aten backend in float64: its registered backward (the bwd op on
    aten) against numerical derivatives, with seq_idx, states and final states."""
    B, D, L, W = 2, 3, 7, 3
    x = randn((B, D, L), gen, torch.float64).requires_grad_()
    w = randn((D, W), gen, torch.float64).requires_grad_()
    b = randn((D,), gen, torch.float64).requires_grad_()
    init = randn((B, D, W - 1), gen, torch.float64).requires_grad_()
    seq = torch.tensor([[0, 0, 1, 1, 1, -1, 2], [0, 0, 0, 0, 0, 0, 0]], dtype=torch.int32)

    def f(x, w, b, init):
        return torch.ops.causal_conv1d.fwd(x, w, b, seq, init, True, True, "aten")

    assert torch.autograd.gradcheck(f, (x, w, b, init))
    assert torch.autograd.gradcheck(lambda x, w: torch.ops.causal_conv1d.fwd(x, w, None, None, None, False, False,
                                                                              "aten")[0], (x, w))
