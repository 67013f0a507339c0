"""Random combinations of every option, on every backend, against the float64 references.

The grids of test_fwd, test_bwd_autograd and test_update tie their options to a case index, so a
given run meets a fixed set of combinations. Here each case draws every option at once: shape,
width, the dtype pair, the layouts of x and of the states, bias, silu, seq_idx with padding,
initial states, final states (returned, or written into final_states_out) and the gradients (the forward), or the update's modes,
gather, state layout, seqlen and x's rank. The draws come from the run's seed (conftest), so
successive runs reach different combinations and a failure replays with CC1D_TEST_SEED; each
failure names its case. CC1D_RANDOM_CASES sets the cases per test (default 40).
"""

import os
import random

import pytest
import torch

from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from helpers import (DEV_BACKENDS, DTYPE_PAIRS, LAYOUTS, check_update, make_bwd_case, make_update_case,
                     nan_like_states)
from reference import assert_grad, assert_matches, reference_final_states, reference_grads

CASES = int(os.environ.get("CC1D_RANDOM_CASES") or 40)


def _draws(gen):
    """A Python RNG seeded from the test's generator: one stream for every choice of the test."""
    return random.Random(int(torch.randint(0, 1 << 62, (1,), generator=gen)))


def _each_case(gen, draw, check):
    rng = _draws(gen)
    for n in range(CASES):
        case = draw(rng)
        try:
            check(case)
        except AssertionError as e:
            raise AssertionError(f"case {n} of {CASES}, {case}: {e}") from None


def _draw_fwd(rng):
    final = rng.random() < 0.5
    return dict(
        pair=rng.choice(DTYPE_PAIRS), W=rng.randint(1, 8), B=rng.choice([1, 2, 3]),
        D=rng.choice([1, 3, 8, 24, 64, 130]), L=rng.choice([1, 2, 5, 16, 63, 64, 65, 200, 1030]),
        layout=rng.choice(LAYOUTS), state_layout=rng.choice(["cf", "cl"]),
        bias=rng.random() < 0.6, silu=rng.random() < 0.6, seq=rng.random() < 0.3, init=rng.random() < 0.5,
        final=final, final_out=final and rng.random() < 0.3, grad=rng.random() < 0.5)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_forward_and_gradients(device, backend, gen):
    def check(c):
        xd, wd = c["pair"]
        x, w, b, s, init, dout, df = make_bwd_case(
            gen, device, c["layout"], xd, wd, c["W"], c["L"], c["D"], bias=c["bias"], seq=c["seq"], init=c["init"],
            dfinal=c["final"], state_layout=c["state_layout"], B=c["B"])
        leaves = [None if t is None else t.detach().clone().requires_grad_(c["grad"]) for t in (x, w, b, init)]
        fso = nan_like_states(c["B"], c["D"], c["W"], xd, c["state_layout"], device) if c["final_out"] else None
        res = causal_conv1d_fn(leaves[0], leaves[1], leaves[2], seq_idx=s, initial_states=leaves[3],
                               return_final_states=c["final"], final_states_out=fso,
                               activation="silu" if c["silu"] else None, backend=backend)
        out, fs = res if c["final"] else (res, None)
        assert_matches(out, x, w, b, seq_idx=s, initial_states=init, silu=c["silu"])
        if fs is not None:
            want = reference_final_states(x.cpu(), c["W"], None if init is None else init.cpu())
            assert torch.equal(fs.detach().cpu(), want), "final states differ from the reference"
            assert fso is None or fs is fso, "final_states_out must be returned"
        if not c["grad"] or fso is not None:  # final_states_out is written in place: not differentiable
            return
        outs, grads = ([out, fs], [dout, df]) if fs is not None else ([out], [dout])
        asked = [t for t in leaves if t is not None]
        got = iter(torch.autograd.grad(outs, asked, grads))
        want = reference_grads(x, w, b, s, init, c["silu"], dout, df)
        for name, t, e, dt in zip(("x", "weight", "bias", "initial_states"), leaves, want, (xd, wd, wd, xd)):
            if t is not None:
                assert_grad(name, next(got), e, dt)

    _each_case(gen, _draw_fwd, check)


def _draw_update(rng):
    W = rng.randint(1, 8)
    L = rng.choice([1, 1, 2, 3, 7, 12])
    return dict(
        pair=rng.choice(DTYPE_PAIRS), W=W, B=rng.choice([1, 2, 4, 5]), D=rng.choice([1, 5, 16, 33, 256]), L=L,
        S=max(1, W - 1) + rng.choice([0, 0, 1, 3, 9]), circular=rng.random() < 0.5, gather=rng.random() < 0.5,
        state_cl=rng.random() < 0.5, x_2d=L == 1 and rng.random() < 0.5, bias=rng.random() < 0.6,
        silu=rng.random() < 0.6)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_update(device, backend, gen):
    def check(c):
        xd, wd = c["pair"]
        x, state, w, b, cache, idx = make_update_case(
            c["B"], c["D"], c["L"], c["W"], c["S"], xd, wd, circular=c["circular"], gather=c["gather"],
            state_cl=c["state_cl"], x_2d=c["x_2d"], gen=gen, device=device)
        b = b if c["bias"] else None
        before = state.clone()
        out = causal_conv1d_update(x, state, w, b, "silu" if c["silu"] else None, cache, idx, backend=backend)
        check_update(out, state, x, before, w, b, c["silu"], cache, idx)

    _each_case(gen, _draw_update, check)
