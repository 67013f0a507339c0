"""Shapes past 32-bit and grid limits, every op on every backend against the float64 reference.

Far elements: 2^31 and 2^32 elements from their tensor's start, with each of batch, channel and
time as the far dimension, inputs read there and outputs written there. An index or offset held
in 32 bits anywhere, signed or not (a C ABI check, a CPU loop, a kernel's address), reads or
writes the wrong element.

The tensors are views of an arena of 2^32 + 2^20 elements: each view's rows at index 0 of its far
dimension lie in the arena's first 2^20 elements, one after another, and its far rows the same
distance F = 2^32 + 64 further on (F/2 for time, whose rows are 2^31 + 32 apart), so views never
overlap. Their spans do, and a written argument may not share a span with another (the ops refuse
it), so each written one has an arena of its own. On the CPU an arena is a private anonymous mapping: only the pages the views touch get
memory. On a GPU it is a real allocation (8 GiB bf16, 16 GiB fp32).

Batch past the grid: more batch rows than a CUDA grid's y dimension holds (65535), so the GPU
kernels (and the emulator, which enforces the same limits) loop over batch rows.
"""

import mmap
import os

import pytest
import torch

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from causal_conv1d._op_bwd import causal_conv1d_bwd
from causal_conv1d._op_varlen import causal_conv1d_varlen_states
from helpers import DEV_BACKENDS, check_update, randn, served_by
from reference import assert_grad, assert_matches, reference_final_states, reference_grads, reference_varlen_states

F = (1 << 32) + 64  # the far rows' distance in elements; F and F/2 multiples of 32 keep rows 16-byte aligned
NEAR = 1 << 20  # the arena's first part, where the views' near rows go


class Arena:
    def __init__(self, dtype, device):
        n = F + NEAR
        if device == "cpu":
            nbytes = n * torch.empty((), dtype=dtype).element_size()
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0x4000)
            try:
                self._map = mmap.mmap(-1, nbytes, flags=flags)
            except OSError as e:  # e.g. vm.overcommit_memory=2 with less memory than this
                pytest.skip(f"cannot map {nbytes} bytes of address space for the arena: {e}")
            self.flat = torch.frombuffer(self._map, dtype=dtype)
        else:
            self.flat = torch.empty(n, dtype=dtype, device=device)
        self.next = 0

    def view(self, shape, stride, gen=None, fill=None):
        """A (shape, stride) view whose strides are small or a multiple of F/2 (the far ones),
        filled with fresh normal values (or `fill`)."""
        near = 1 + sum((s - 1) * st for s, st in zip(shape, stride) if st < F // 2)
        assert self.next + near <= NEAR, "the test's views outgrow the arena's near part"
        v = self.flat.as_strided(shape, stride, self.next)
        assert max(sum((s - 1) * st for s, st in zip(shape, stride)), 0) >= F, "no element is far"
        self.next += (near + 63) // 64 * 64
        if fill is None:
            v.copy_(randn(shape, gen, v.dtype, v.device))
        else:
            v.fill_(fill)
        return v


# Forward layouts: (shape, strides) of x with one far dimension. cf: channel-first, cl:
# channel-last (channels contiguous); time far takes L = 3 steps F/2 apart.
FWD_LAYOUTS = {
    "cf_batch_far": ((2, 3, 300), (F, 300, 1)),
    "cf_channel_far": ((1, 2, 300), (2 * F, F, 1)),
    "cl_batch_far": ((2, 64, 40), (F, 1, 64)),
    "cl_time_far": ((1, 64, 3), (F + F // 2, 1, F // 2)),
}


def _far_states(B, D):
    """Strides of channel-last (B, D, W-1) states with W = 4: batch far, or time where B = 1."""
    return (F, 1, D) if B > 1 else (F + F // 2, 1, F // 2)


DTYPES = [pytest.param(torch.bfloat16, id="bf16"), pytest.param(torch.float32, id="fp32")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", FWD_LAYOUTS)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_fwd(device, backend, layout, dtype, gen):
    """x far; on the channel-last layouts (as upstream allows them) initial_states read and
    final_states_out written far too (batch far, or time where batch is 1)."""
    shape, stride = FWD_LAYOUTS[layout]
    arena = Arena(dtype, device)
    x = arena.view(shape, stride, gen)
    B, D, L = shape
    W = 4
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    init = fs = None
    if layout.startswith("cl"):
        init = arena.view((B, D, W - 1), _far_states(B, D), gen)
        fs = Arena(dtype, device).view((B, D, W - 1), _far_states(B, D), fill=float("nan"))
    x_before = x.clone()
    out = causal_conv1d_fn(x, w, b, initial_states=init, return_final_states=fs is not None,
                           final_states_out=fs, activation="silu", backend=backend)
    served_by(backend, "fwd")
    if fs is not None:
        out, got_fs = out
        assert got_fs is fs
        assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), W, init.cpu())), "final_states_out differs"
    assert_matches(out, x, w, b, initial_states=init, silu=True)
    assert torch.equal(x, x_before), "x was modified"


BWD_LAYOUTS = {"cf_batch_far": FWD_LAYOUTS["cf_batch_far"], "cl_time_far": FWD_LAYOUTS["cl_time_far"]}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", BWD_LAYOUTS)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_bwd(device, backend, layout, dtype, gen):
    """x and dout read far, dx written far into the caller's view, initial_states and
    dfinal_states read far; every gradient against float64 autograd."""
    shape, stride = BWD_LAYOUTS[layout]
    arena = Arena(dtype, device)
    B, D, L = shape
    W = 4
    x, dout = arena.view(shape, stride, gen), arena.view(shape, stride, gen)
    dx = Arena(dtype, device).view(shape, stride, fill=float("nan"))
    init, df = (arena.view((B, D, W - 1), _far_states(B, D), gen) for _ in range(2))
    w = randn((D, W), gen, torch.float32, device) * 0.5
    b = randn((D,), gen, torch.float32, device)
    got = causal_conv1d_bwd(x, w, b, dout, None, init, df, dx, True, True, backend=backend)
    served_by(backend, "bwd")
    assert got[0] is dx
    want = reference_grads(x, w, b, None, init, True, dout, df)
    for name, g, e, dt in zip(("x", "weight", "bias", "initial_states"), got, want, (dtype, w.dtype, w.dtype, dtype)):
        assert_grad(name, g, e, dt)


@pytest.mark.parametrize("tokens", [1, 2])
@pytest.mark.parametrize("mode", ["shift", "ring"])
@pytest.mark.parametrize("state_layout", ["cf", "cl"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_update(device, backend, dtype, state_layout, mode, tokens, gen):
    """conv_state's two pool rows F apart, swapped by conv_state_indices, shifted (state_len =
    width, Mamba's) or used as a ring (cache_seqlens); x's two batch rows F apart, one token (x
    2-D) or two. The CPU backend takes a different loop for each layout, mode and token count."""
    B, D, W = 2, 64, 4
    S = W if mode == "shift" else 6
    x_shape, x_stride = ((B, D), (F, 1)) if tokens == 1 else ((B, D, tokens), (F, tokens, 1))
    x = Arena(dtype, device).view(x_shape, x_stride, gen)
    state = Arena(dtype, device).view((2, D, S), (F, S, 1) if state_layout == "cf" else (F, 1, D), gen)
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    indices = torch.tensor([1, 0], dtype=torch.int32, device=device)
    cache = torch.tensor([5, 2], dtype=torch.int32, device=device) if mode == "ring" else None
    before = state.clone()
    out = causal_conv1d_update(x, state, w, b, "silu", cache, indices, backend=backend)
    served_by(backend, "update")
    check_update(out, state, x, before, w, b, True, cache, indices)


@pytest.mark.parametrize("far", ["tokens", "channels"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_varlen_states(device, backend, far, gen):
    """x's tokens (or channels) F apart: three sequences, one shorter than state_len."""
    arena = Arena(torch.bfloat16, device)
    x = arena.view((2, 64), (F, 1), gen) if far == "tokens" else arena.view((5, 2), (2, F), gen)
    cu = torch.tensor([0, 1, 1, x.shape[0]], dtype=torch.int32, device=device)
    got = causal_conv1d_varlen_states(x, cu, 3, backend=backend)
    served_by(backend, "varlen_states")
    assert torch.equal(got.cpu().double(), reference_varlen_states(x, cu, 3))


# ---- batch past the grid ----------------------------------------------------------------------

BIG_BATCH = 65535 + 5


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_batch_past_the_grid(device, backend, gen):
    """The forward, the update and varlen states with 65540 batch rows (sequences)."""
    B, D, W = BIG_BATCH, 2, 4
    x = randn((B, D, 8), gen, torch.bfloat16, device)
    w = randn((D, W), gen, torch.float32, device)
    b = randn((D,), gen, torch.float32, device)
    out = causal_conv1d_fn(x, w, b, activation="silu", backend=backend)
    served_by(backend, "fwd")
    assert_matches(out, x, w, b, silu=True)
    state = randn((B, D, W), gen, torch.bfloat16, device)
    xu = randn((B, D), gen, torch.bfloat16, device)
    before = state.clone()
    out = causal_conv1d_update(xu, state, w, b, "silu", backend=backend)
    served_by(backend, "update")
    # The step is the forward of one token after the state's last W-1 (reference_update's row loop
    # takes seconds here); the state shifted by one, x at its end, exact.
    assert_matches(out[..., None], xu[..., None], w, b, initial_states=before[..., 1:], silu=True)
    assert torch.equal(state, torch.cat([before[..., 1:], xu[..., None]], dim=2)), "conv_state differs"
    xv = randn((2 * B, D), gen, torch.bfloat16, device)
    cu = torch.arange(0, 2 * B + 1, 2, dtype=torch.int32, device=device)
    got = causal_conv1d_varlen_states(xv, cu, 3, backend=backend)
    served_by(backend, "varlen_states")
    assert torch.equal(got.cpu().double(), reference_varlen_states(xv, cu, 3))


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_bwd_batch_past_the_grid(device, backend, gen):
    """The backward with 65540 batch rows: dweight and dbias summed over all of them."""
    if backend == "emulate" and os.environ.get("CC1D_TEST_SLOW") != "1":
        pytest.skip("the emulated backward of 65540 rows takes about a minute: runs with CC1D_TEST_SLOW=1 (CI)")
    B, D, W = BIG_BATCH, 2, 4
    x, dout = randn((B, D, 8), gen, torch.bfloat16, device), randn((B, D, 8), gen, torch.bfloat16, device)
    w = randn((D, W), gen, torch.float32, device) * 0.5
    b = randn((D,), gen, torch.float32, device)
    got = causal_conv1d_bwd(x, w, b, dout, None, None, None, None, False, True, backend=backend)
    served_by(backend, "bwd")
    want = reference_grads(x, w, b, None, None, True, dout, None)
    for name, g, e, dt in zip(("x", "weight", "bias"), got, want, (torch.bfloat16, torch.float32, torch.float32)):
        assert_grad(name, g, e, dt)
