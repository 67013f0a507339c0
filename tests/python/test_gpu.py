"""CUDA-only behaviour beyond the numerical grid (which runs on CUDA via DEV_BACKENDS in
test_fwd.py): streams, auto selection without fallback, cpu-with-copies, devices."""

import warnings

import pytest
import torch

import causal_conv1d
from causal_conv1d import CausalConv1dWarning, causal_conv1d_fn
from helpers import make_seq_idx, make_states, make_x, randn
from reference import assert_matches, reference_final_states

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA device (torch.cuda.is_available() is False)")]


def test_auto_serves_cuda_with_nvrtc_strictly(monkeypatch, gen, fresh_dispatch):
    """On a GPU machine auto must not fall back: strict mode on, no warning, nvrtc serves."""
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "1")
    x = make_x(2, 64, 500, torch.bfloat16, "cl", gen, "cuda")
    w = randn((64, 4), gen, torch.bfloat16, "cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalConv1dWarning)
        out = causal_conv1d_fn(x, w, activation="silu")
    c = causal_conv1d.last_backend()
    assert c.backend == "nvrtc" and c.requested == "auto" and c.fallback_from == ()
    assert_matches(out, x, w, silu=True)


def test_runs_on_the_current_stream(gen):
    """The launch goes to torch's current stream: work queued before it on a side stream is
    seen, and the result is complete after synchronising that stream."""
    x = make_x(4, 256, 4096, torch.float32, "cf", gen, "cuda")
    w = randn((256, 4), gen, torch.float32, "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x * 2  # queued on s, before the conv
        out = causal_conv1d_fn(y, w, backend="nvrtc")
    s.synchronize()
    assert_matches(out, y, w)


@pytest.mark.parametrize("raw", [True, False], ids=["raw-handle", "public-api"])
def test_stream_of_is_torchs_current_stream(monkeypatch, raw):
    """libcc1d is handed torch's current stream of the tensor's device, default or side stream,
    through the raw handle or (a torch without it) the public API."""
    from causal_conv1d import _dispatch

    if not raw:
        monkeypatch.setattr(_dispatch, "_raw_stream", None)
    elif _dispatch._raw_stream is None:
        pytest.skip("this torch has no torch._C._cuda_getCurrentRawStream")
    for index in range(min(torch.cuda.device_count(), 2)):
        x = torch.zeros(1, device=f"cuda:{index}")
        assert _dispatch.stream_of(x) == torch.cuda.current_stream(index).cuda_stream
        s = torch.cuda.Stream(device=index)
        with torch.cuda.stream(s):
            assert _dispatch.stream_of(x) == s.cuda_stream != torch.cuda.default_stream(index).cuda_stream
    assert _dispatch.stream_of(torch.zeros(1)) == 0


def test_cpu_backend_with_cuda_tensors_copies(gen):
    x = make_x(2, 16, 100, torch.float16, "cl", gen, "cuda")
    w = randn((16, 3), gen, torch.float32, "cuda")
    init = make_states(2, 16, 3, torch.float16, "cf", gen, "cuda")
    seq = make_seq_idx(2, 100, gen, "cuda")
    out, fs = causal_conv1d_fn(x, w, seq_idx=seq, initial_states=init, return_final_states=True, backend="cpu")
    c = causal_conv1d.last_backend()
    assert c.backend == "cpu" and c.host_copies
    assert out.device == x.device and fs.device == x.device
    assert_matches(out, x, w, seq_idx=seq, initial_states=init)
    assert torch.equal(fs.cpu(), reference_final_states(x.cpu(), 3, init.cpu()))


def test_tensors_on_another_device_are_rejected(gen):
    x = randn((1, 4, 10), gen, torch.float32, "cuda")
    w = randn((4, 3), gen, torch.float32, "cpu")
    with pytest.raises(ValueError, match="'weight'.*cuda.*cpu"):
        causal_conv1d_fn(x, w)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_device(gen):
    x = make_x(2, 32, 300, torch.bfloat16, "cf", gen, "cuda:1")
    w = randn((32, 4), gen, torch.bfloat16, "cuda:1")
    out = causal_conv1d_fn(x, w, backend="nvrtc")
    assert out.device == x.device
    assert_matches(out, x, w)


@pytest.mark.skipif(not causal_conv1d._ops.USE_CUSTOM_OP, reason="torch.library.custom_op needs torch >= 2.4")
def test_opcheck_cuda(gen):
    x = make_x(2, 8, 40, torch.float32, "cl", gen, "cuda").requires_grad_()
    w = randn((8, 4), gen, torch.float32, "cuda").requires_grad_()
    b = randn((8,), gen, torch.float32, "cuda")
    torch.library.opcheck(torch.ops.causal_conv1d.fwd.default, (x, w, b, None, None, True, True, ""))
