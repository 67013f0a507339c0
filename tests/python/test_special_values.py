"""Special values agree across backends: with width 1 and weight 1 the pre-activation is x itself,
so silu(-inf) = NaN, silu(+inf) = +inf and NaN stay what aten gives, at every position (the cpu
backend's vector lanes and tails alike)."""

import pytest
import torch

from causal_conv1d import causal_conv1d_fn

BACKENDS = ("aten", "cpu", "emulate")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["channel-first", "channel-last"])
def test_silu_special_values_match_aten(dtype, layout, gen):
    L = 53  # not a multiple of any vector width: tails included
    x = torch.randn(2, 24, L, generator=gen)
    specials = torch.tensor([float("-inf"), float("inf"), float("nan"), -100.0, 100.0, 0.0, -0.0])
    for i in range(x.numel() // 5):  # every position class modulo 16 gets each special value
        x.view(-1)[5 * i] = specials[i % len(specials)]
    x = x.to(dtype)
    if layout == "channel-last":
        x = x.transpose(1, 2).contiguous().transpose(1, 2)
    w = torch.ones(24, 1, dtype=dtype)
    got = {b: causal_conv1d_fn(x, w, activation="silu", backend=b).float() for b in BACKENDS}
    want = got["aten"]
    assert torch.isnan(want).any() and torch.isinf(want).any()
    for b in ("cpu", "emulate"):
        assert torch.equal(torch.isnan(got[b]), torch.isnan(want)), b
        finite = torch.isfinite(want)
        assert torch.equal(got[b][~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)]), b
        tol = 1e-5 if dtype == torch.float32 else 1e-2
        assert torch.allclose(got[b][finite], want[finite], rtol=tol, atol=tol), b
