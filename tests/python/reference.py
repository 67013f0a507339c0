"""An independent float64 reference for the tests (it does not use the package's code), and its
gradients by autograd.

Formulated as a sliding window (Tensor.unfold) and an einsum, unlike the package's sum over
shifted copies, so a shared mistake is unlikely. Differentiable (for the autograd tests).

    y[b,c,t] = act(bias[c] + sum_k w[c,k] * xs[b,c,t+k]),   xs = concat(init or 0, x)  (W-1 + L)
    with seq_idx: tap k of token t counts only if seq(t-W+1+k) == seq(t), where positions
    before 0 carry seq(0); tokens with seq(t) < 0 output 0.
    final_states = xs[..., L:]  (the last W-1 entries, in x's dtype)
"""

from __future__ import annotations

import torch

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def reference(x, weight, bias=None, seq_idx=None, initial_states=None, silu=False, *, absolute=False):
    """float64 output (B, D, L). With absolute=True: the same sum over |w|*|x| + |bias| without
    activation — the magnitude of the terms, which scales the rounding error of the result."""
    B, D, L = x.shape
    W = weight.shape[1]
    x64 = x.to(torch.float64)
    w64 = weight.to(torch.float64)
    init = (initial_states.to(torch.float64) if initial_states is not None
            else torch.zeros(B, D, W - 1, dtype=torch.float64, device=x.device))
    if absolute:
        x64, w64, init = x64.abs(), w64.abs(), init.abs()
    xs = torch.cat([init, x64], dim=-1)  # (B, D, W-1+L)
    win = xs.unfold(-1, W, 1)  # (B, D, L, W): win[b,c,t,k] = xs[b,c,t+k]
    if seq_idx is not None:
        s = seq_idx.to(torch.int64)
        spad = torch.cat([s[:, :1].expand(B, W - 1), s], dim=1)  # (B, W-1+L)
        swin = spad.unfold(-1, W, 1)  # (B, L, W)
        keep = (swin == s[:, :, None])[:, None]  # (B, 1, L, W)
        win = torch.where(keep, win, torch.zeros((), dtype=torch.float64, device=x.device))
    y = torch.einsum("bctk,ck->bct", win, w64)
    if bias is not None:
        b64 = bias.to(torch.float64)
        y = y + (b64.abs() if absolute else b64)[None, :, None]
    if silu and not absolute:
        y = y * torch.sigmoid(y)
    if seq_idx is not None:
        y = torch.where((seq_idx >= 0)[:, None, :], y, torch.zeros((), dtype=torch.float64, device=x.device))
    return y


def reference_final_states(x, width, initial_states=None):
    """The last W-1 entries of concat(initial_states or zeros, x) along time, in x's dtype."""
    B, D, L = x.shape
    init = (initial_states if initial_states is not None
            else torch.zeros(B, D, width - 1, dtype=x.dtype, device=x.device))
    return torch.cat([init.to(x.dtype), x], dim=-1)[..., L:].clone()


def assert_matches(out, x, weight, bias=None, seq_idx=None, initial_states=None, silu=False, what="out"):
    """out (x's dtype) agrees with the float64 reference within the dtype's tolerance, scaled by
    the magnitude of the summed terms; padding tokens (seq_idx < 0) must be exactly 0."""
    assert out.dtype == x.dtype, f"{what}: dtype {out.dtype}, expected x's {x.dtype}"
    assert tuple(out.shape) == tuple(x.shape), f"{what}: shape {tuple(out.shape)}, expected {tuple(x.shape)}"
    o = out.detach().to("cpu", torch.float64)
    xc = x.detach().cpu()
    args = dict(bias=None if bias is None else bias.detach().cpu(),
                seq_idx=None if seq_idx is None else seq_idx.cpu(),
                initial_states=None if initial_states is None else initial_states.detach().cpu())
    ref = reference(xc, weight.detach().cpu(), silu=silu, **args)
    mag = reference(xc, weight.detach().cpu(), absolute=True, **args)
    nan = torch.isnan(o)
    assert not nan.any(), f"{what}: {int(nan.sum())} NaN element(s) (unwritten?), first at {nan.nonzero()[0].tolist()}"
    tol = TOL[x.dtype]
    err = (o - ref).abs()
    fi = torch.finfo(x.dtype)
    bound = tol * (ref.abs() + mag) + fi.tiny * fi.eps  # + the subnormal spacing of x's dtype
    if seq_idx is not None:
        pad = (seq_idx.cpu() < 0)[:, None, :].expand_as(o)
        assert torch.all(o[pad] == 0), f"{what}: padding tokens (seq_idx < 0) must output exactly 0"
    bad = err > bound
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{bad.numel()} element(s) outside tolerance {tol} * (|ref| + |terms|); "
            f"first at {list(i)}: got {o[i].item()!r}, reference {ref[i].item()!r}, terms {mag[i].item()!r}; "
            f"max error {err.max().item():.3g}")


def reference_update(x, conv_state, weight, bias=None, silu=False, cache_seqlens=None, conv_state_indices=None):
    """float64 (out, new_state) of the decode-step update, computed row by row with plain loops
    over time (independent of the package's gather/scatter formulation). out has x's rank;
    new_state is the whole pool after the call."""
    x3 = x if x.dim() == 3 else x[..., None]
    B, D, L = x3.shape
    W = weight.shape[1]
    S = conv_state.shape[2]
    w = weight.double().cpu()
    b64 = bias.double().cpu() if bias is not None else torch.zeros(D, dtype=torch.float64)
    xs = x3.double().cpu()
    state = conv_state.double().cpu().clone()
    out = torch.zeros(B, D, L, dtype=torch.float64)
    for b in range(B):
        row = b if conv_state_indices is None else int(conv_state_indices[b])
        cs = 0 if cache_seqlens is None else int(cache_seqlens[b])
        if row < 0 or row >= state.shape[0] or cs < 0:
            continue  # padding: output 0, state untouched
        st = state[row]  # (D, S)
        if cache_seqlens is None:
            window = [st[:, S - (W - 1) + i] for i in range(W - 1)]
        else:
            window = [st[:, (cs - (W - 1) + i) % S] for i in range(W - 1)]
        seq = window + [xs[b, :, t] for t in range(L)]
        for t in range(L):
            acc = b64.clone()
            for k in range(W):
                acc += w[:, k] * seq[t + k]
            if silu:
                acc = acc * torch.sigmoid(acc)
            out[b, :, t] = acc
        new = st.clone()
        if cache_seqlens is None:
            full = torch.cat([st, xs[b]], dim=1)
            new = full[:, -S:].clone()
        else:
            for t in range(L):
                new[:, (cs + t) % S] = xs[b, :, t]
        state[row] = new
    return (out if x.dim() == 3 else out[..., 0]), state


# ---- gradients ------------------------------------------------------------------------------


def reference_grads(x, weight, bias, seq_idx, init, silu, dout, dfinal):
    """float64 (dx, dweight, dbias, dinit) by autograd of the reference; None for absent inputs.
    Each gradient carries `.mag`: the same sums over the terms' magnitudes (see grad_magnitudes),
    which assert_grad uses to scale the accumulation's rounding error."""
    res = _grads(x, weight, bias, seq_idx, init, silu, dout, dfinal)
    for g, m in zip(res, grad_magnitudes(x, weight, bias, seq_idx, init, silu, dout, dfinal)):
        if g is not None:
            g.mag = m
    return res


def grad_magnitudes(x, weight, bias, seq_idx, init, silu, dout, dfinal):
    """float64 (dx, dweight, dbias, dinit) summed over |terms| instead of terms: the gradients of
    the absolute forward (|w|, |x|, |bias|, |init|, no activation) for the upstream gradient
    |dout * act'(pre)|. A reduction over batch and time (dweight, dbias) that cancels to a small
    value carries a rounding error of this scale, not of the result's."""
    g = dout.detach().cpu().double().abs()
    if silu:
        pre = reference(x.detach().cpu(), weight.detach().cpu(), None if bias is None else bias.detach().cpu(),
                        None if seq_idx is None else seq_idx.cpu(), None if init is None else init.detach().cpu())
        sig = torch.sigmoid(pre)
        g = g * (sig * (1 + pre * (1 - sig))).abs()
    absd = [None if t is None else t.detach().cpu().abs() for t in (x, weight, bias, init)]
    mags = _grads(absd[0], absd[1], absd[2], seq_idx, absd[3], False, g,
                  None if dfinal is None else dfinal.detach().abs())
    return [None if m is None else m.abs() for m in mags]


def _grads(x, weight, bias, seq_idx, init, silu, dout, dfinal):
    leaves = [None if t is None else t.detach().cpu().double().requires_grad_() for t in (x, weight, bias, init)]
    L = x.shape[2]
    W = weight.shape[1]
    out = reference(leaves[0], leaves[1], leaves[2], None if seq_idx is None else seq_idx.cpu(), leaves[3], silu=silu)
    outs, grads = [out], [dout.detach().cpu().double()]
    if dfinal is not None:
        pre = leaves[3] if leaves[3] is not None else torch.zeros(x.shape[0], x.shape[1], W - 1, dtype=torch.float64)
        outs.append(torch.cat([pre, leaves[0]], -1)[..., L:])
        grads.append(dfinal.detach().cpu().double())
    asked = [t for t in leaves if t is not None]
    got = iter(torch.autograd.grad(outs, asked, grads, allow_unused=True))
    res = []
    for t in leaves:
        g = next(got) if t is not None else None
        res.append(None if t is None else (torch.zeros_like(t) if g is None else g))
    return res


def assert_grad(name, got, want, dtype):
    """got (its input's dtype) within the dtype's rounding of want, plus fp32 arithmetic on a
    tensor of this scale and on terms of want.mag's (when reference_grads gave it); NaN (an
    unwritten element) fails."""
    assert got is not None and got.dtype == dtype, f"d{name}: {None if got is None else got.dtype}, expected {dtype}"
    g = got.detach().cpu().double()
    assert tuple(g.shape) == tuple(want.shape), f"d{name}: shape {tuple(g.shape)}, expected {tuple(want.shape)}"
    assert not torch.isnan(g).any(), f"d{name}: {int(torch.isnan(g).sum())} NaN element(s) (unwritten?)"
    if want.numel() == 0:
        return
    fi = torch.finfo(dtype)
    bound = TOL[dtype] * want.abs() + 1e-4 * want.abs().max() + fi.tiny * fi.eps
    mag = getattr(want, "mag", None)  # reference_grads': the fp32 accumulation's scale
    if mag is not None:
        bound = bound + TOL[torch.float32] * mag
    bad = (g - want).abs() > bound
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise AssertionError(f"d{name}: {int(bad.sum())}/{bad.numel()} element(s) off; first at {list(i)}: got "
                             f"{g[i].item()!r}, want {want[i].item()!r}; max error {(g - want).abs().max().item():.3g}")


def reference_varlen_states(x, cu_seqlens, state_len):
    """float64 states (batch, dim, state_len): a plain loop over sequences and slots."""
    xd = x.detach().cpu().double()
    cu = [int(v) for v in cu_seqlens.cpu().tolist()]
    out = torch.zeros(len(cu) - 1, x.shape[1], state_len, dtype=torch.float64)
    for b in range(len(cu) - 1):
        n = min(cu[b + 1] - cu[b], state_len)
        for j in range(n):  # token end-n+j goes to slot state_len-n+j
            out[b, :, state_len - n + j] = xd[cu[b + 1] - n + j]
    return out
