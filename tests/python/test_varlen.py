"""causal_conv1d_varlen_states on every backend against the float64 reference (tests/python/
reference.py): random cu_seqlens with empty sequences and sequences shorter and longer than
state_len, every dtype, x and cu_seqlens of any strides; the result's layout is upstream's; the
op copies bits; bad input raises naming the argument; the torch operator passes opcheck and
compiles; not differentiable, like upstream's."""

import pytest
import torch

import causal_conv1d
from causal_conv1d import _lib, _pack
from causal_conv1d.causal_conv1d_varlen import causal_conv1d_varlen_states, causal_conv1d_varlen_states_ref

from helpers import DEV_BACKENDS, FLOATS, HAS_CUDA, randn, served_by
from reference import reference_varlen_states

X_LAYOUTS = ["rows", "every_other_channel", "channel_major", "padded_rows"]


def _served_by(backend, op="varlen_states"):
    served_by(backend, op)


def make_case(batch, dim, state_len, dtype, gen, *, layout="rows", lead=2, tail=1, device="cpu", cu_strided=False):
    """x (total, dim) in `layout` and cu_seqlens (batch+1,) int32 starting at `lead`: about a fifth
    of the sequences empty, the others shorter than, equal to or longer than state_len."""
    kinds = torch.randint(0, 5, (batch,), generator=gen).tolist()
    lens = [0 if k == 0 else int(torch.randint(1, max(2, state_len), (1,), generator=gen)) if k == 1
            else state_len if k == 2 else int(torch.randint(state_len, 3 * state_len + 5, (1,), generator=gen))
            for k in kinds]
    cu = torch.tensor([lead] + lens, dtype=torch.int64).cumsum(0).to(torch.int32)
    total = int(cu[-1]) + tail
    if layout == "rows":
        x = randn((total, dim), gen, dtype, device)
    elif layout == "every_other_channel":
        x = randn((total, 2 * dim), gen, dtype, device)[:, ::2]
    elif layout == "channel_major":
        x = randn((dim, total), gen, dtype, device).t()
    else:
        x = randn((total, dim + 8), gen, dtype, device)[:, :dim]
    if cu_strided:
        wide = torch.full((2 * (batch + 1),), -7, dtype=torch.int32)
        wide[::2] = cu
        cu = wide[::2]
    return x, cu.to(device)


def check_states(states, x, cu, state_len):
    want = reference_varlen_states(x, cu, state_len)
    batch, dim = cu.shape[0] - 1, x.shape[1]
    assert states.dtype == x.dtype and states.shape == (batch, dim, state_len) and states.device == x.device
    if batch > 1 and dim > 1 and state_len > 1:
        assert states.stride() == (state_len * dim, 1, dim), "not upstream's layout"
    got = states.cpu().double()
    assert not torch.isnan(got).any(), "an element was never written"
    assert torch.equal(got, want), f"states differ from the reference at {(got != want).nonzero()[:3].tolist()}"
    assert not torch.signbit(got[want == 0]).any(), "a zero-filled slot is -0.0"


@pytest.mark.parametrize("layout", X_LAYOUTS)
@pytest.mark.parametrize("dtype", FLOATS, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_grid(device, backend, dtype, layout, gen):
    i = FLOATS.index(dtype) * 4 + X_LAYOUTS.index(layout)
    batch, dim, state_len = [1, 6, 13][i % 3], [1, 5, 8, 40, 64, 136][i % 6], [1, 3, 4, 7][(i // 2) % 4]
    x, cu = make_case(batch, dim, state_len, dtype, gen, layout=layout, device=device, cu_strided=i % 5 == 2)
    states = causal_conv1d_varlen_states(x, cu, state_len, backend=backend)
    _served_by(backend)
    check_states(states, x, cu, state_len)


@pytest.mark.parametrize("device,backend", DEV_BACKENDS)
def test_shapes_beyond_a_tile(device, backend, gen):
    """Many sequences, a long state, a wide dim with the 16-byte path, and an empty batch."""
    for batch, dim, state_len, dtype in ((70, 24, 3, torch.float16), (3, 16, 37, torch.bfloat16),
                                         (9, 1024, 4, torch.float32), (0, 16, 4, torch.float32)):
        x, cu = make_case(batch, dim, state_len, dtype, gen, device=device)
        states = causal_conv1d_varlen_states(x, cu, state_len, backend=backend)
        check_states(states, x, cu, state_len)


def test_upstream_semantics_on_a_hand_written_case():
    """Upstream's docstring example shape: three sequences of lengths 2, 0 and 5, state_len 3."""
    x = torch.arange(7 * 2, dtype=torch.float32).reshape(7, 2)
    cu = torch.tensor([0, 2, 2, 7], dtype=torch.int32)
    states = causal_conv1d_varlen_states(x, cu, 3)
    want = torch.tensor([[[0, 0, 2], [0, 1, 3]], [[0, 0, 0], [0, 0, 0]], [[8, 10, 12], [9, 11, 13]]],
                        dtype=torch.float32)
    assert torch.equal(states, want)


@pytest.mark.parametrize("backend", ["cpu", "aten", "emulate"])
def test_int64_cu_seqlens_like_upstream(backend, gen):
    """Upstream takes int64 cu_seqlens (a cumsum's dtype, as its own get_states test passes): the
    same states as int32, from the function and from its ref."""
    if backend == "emulate" and not _lib.library().backend_available(_lib.BACKEND_IDS["emulate"], 0, 0)[0]:
        pytest.skip("this libcc1d has no emulate backend")
    x, cu = make_case(9, 24, 5, torch.bfloat16, gen)
    got = causal_conv1d_varlen_states(x, cu.long(), 5, backend=backend)
    check_states(got, x, cu, 5)
    assert torch.equal(causal_conv1d_varlen_states_ref(x, cu.long(), 5), got)


def test_bits_are_copied(gen):
    """NaN payloads, infinities and -0.0 pass through unchanged on every host backend."""
    x = torch.tensor([float("nan"), float("inf"), -0.0, -float("inf"), 1.5, -2.25], dtype=torch.float16)
    x = x.repeat(8, 1).t().contiguous()  # (6, 8)
    cu = torch.tensor([0, 4, 6], dtype=torch.int32)
    ref = causal_conv1d_varlen_states_ref(x, cu, 4)
    for backend in ("cpu", "aten", "emulate"):
        if backend == "emulate" and not _lib.library().backend_available(_lib.BACKEND_IDS["emulate"], 0, 0)[0]:
            continue
        got = causal_conv1d_varlen_states(x, cu, 4, backend=backend)
        assert torch.equal(got.view(torch.int16), ref.view(torch.int16)), backend


def test_ref_matches_reference_in_float64(gen):
    x, cu = make_case(7, 12, 4, torch.float64, gen, layout="channel_major")
    states = causal_conv1d_varlen_states_ref(x, cu, 4)
    assert states.dtype == torch.float64 and states.stride() == (4 * 12, 1, 12)
    assert torch.equal(states, reference_varlen_states(x, cu, 4))


def test_not_differentiable_like_upstream(gen):
    x, cu = make_case(3, 8, 3, torch.float32, gen)
    x.requires_grad_(True)
    states = causal_conv1d_varlen_states(x, cu, 3)
    assert not states.requires_grad and states.grad_fn is None


# ---- dispatch: the same policy as every op ---------------------------------------------------


def test_fallback_warns_and_strict_refuses(cpu_unavailable, gen, monkeypatch):
    x, cu = make_case(3, 8, 3, torch.float32, gen)
    with pytest.warns(causal_conv1d.CausalConv1dWarning, match="simulated: cpu switched off"):
        states = causal_conv1d_varlen_states(x, cu, 3)
    _served_by("aten")
    check_states(states, x, cu, 3)
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "1")
    with pytest.raises(causal_conv1d.StrictModeError, match=r"backend 'cpu'.*simulated"):
        causal_conv1d_varlen_states(x, cu, 3)


def test_backend_choice_precedence(gen, monkeypatch):
    """backend= > use_backend() > CAUSAL_CONV1D_BACKEND > auto, as for causal_conv1d_fn."""
    x, cu = make_case(3, 8, 3, torch.float32, gen)
    causal_conv1d_varlen_states(x, cu, 3)
    _served_by("cpu")
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "aten")
    causal_conv1d_varlen_states(x, cu, 3)
    _served_by("aten")
    with causal_conv1d.use_backend("cpu"):
        causal_conv1d_varlen_states(x, cu, 3)
        _served_by("cpu")
        check_states(causal_conv1d_varlen_states(x, cu, 3, backend="aten"), x, cu, 3)
        _served_by("aten")
    with pytest.raises(causal_conv1d.BackendUnavailableError, match="nvrtc"):
        causal_conv1d_varlen_states(x, cu, 3, backend="nvrtc")


# ---- errors: named, and nothing written --------------------------------------------------


def _valid(gen):
    x, cu = make_case(4, 8, 3, torch.float32, gen)
    return dict(x=x, cu_seqlens=cu, state_len=3)


def _decreasing(a):
    a["cu_seqlens"] = torch.tensor([0, 3, 2, 4, 5], dtype=torch.int32)


def _beyond_total(a):
    a["cu_seqlens"] = torch.tensor([0, 1, 2, 3, a["x"].shape[0] + 1], dtype=torch.int32)


def _negative(a):
    a["cu_seqlens"] = torch.tensor([-1, 1, 2, 3, 4], dtype=torch.int32)


ERRORS = {
    "x_rank_3": (lambda a: a.update(x=a["x"][None]), ValueError, ["'x'", "2 dims"]),
    "x_int": (lambda a: a.update(x=a["x"].int()), TypeError, ["'x'", "torch.int32"]),
    "cu_int16": (lambda a: a.update(cu_seqlens=a["cu_seqlens"].short()), TypeError, ["'cu_seqlens'", "torch.int32", "torch.int16"]),
    "cu_int64_beyond": (lambda a: a.update(cu_seqlens=a["cu_seqlens"].long() + (1 << 32)), ValueError,
                        ["cu_seqlens[0] is 4294967298", "total_tokens"]),
    "cu_rank_2": (lambda a: a.update(cu_seqlens=a["cu_seqlens"][None]), ValueError, ["'cu_seqlens'", "1 dim"]),
    "cu_empty": (lambda a: a.update(cu_seqlens=a["cu_seqlens"][:0]), ValueError, ["'cu_seqlens'", "batch+1 >= 1", "(0,)"]),
    "cu_device": (lambda a: a.update(cu_seqlens=a["cu_seqlens"].to("meta")), ValueError, ["'cu_seqlens'", "meta"]),
    "state_len_0": (lambda a: a.update(state_len=0), ValueError, ["'state_len'", "between 1 and 1048576", "got 0"]),
    "state_len_huge": (lambda a: a.update(state_len=1 << 21), ValueError, ["'state_len'", "2097152"]),
    "state_len_float": (lambda a: a.update(state_len=3.0), TypeError, ["'state_len'", "int", "float"]),
    "state_len_bool": (lambda a: a.update(state_len=True), TypeError, ["'state_len'", "bool"]),
    "decreasing": (_decreasing, ValueError, ["cu_seqlens[2] is 2, below cu_seqlens[1] = 3", "non-decreasing"]),
    "beyond_total": (_beyond_total, ValueError, ["cu_seqlens[4]", "total_tokens = x.shape[0]"]),
    "negative": (_negative, ValueError, ["cu_seqlens[0] is -1"]),
    "backend": (lambda a: a.update(backend="gpu"), ValueError, ["'backend'", "nvrtc"]),
}


@pytest.mark.parametrize("backend", ["cpu", "aten", "emulate"])
@pytest.mark.parametrize("case", list(ERRORS))
def test_invalid_argument(case, backend, gen):
    if backend == "emulate" and not _lib.library().backend_available(_lib.BACKEND_IDS["emulate"], 0, 0)[0]:
        pytest.skip("this libcc1d has no emulate backend")
    a = _valid(gen)
    a["backend"] = backend
    change, exc, needles = ERRORS[case]
    change(a)
    with pytest.raises(exc) as info:
        causal_conv1d_varlen_states(**a)
    for n in needles:
        assert n in str(info.value), f"{str(info.value)!r} lacks {n!r}"


def test_library_rejects_bad_values_before_writing(lib, gen):
    """The C ABI alone (Python's checks bypassed) refuses them too, before writing anything."""
    from causal_conv1d._op_varlen import CVarlenStatesArgs

    a = _valid(gen)
    _decreasing(a)
    out = torch.full((4, 3, 8), float("nan")).transpose(1, 2)
    args = _pack.fill_args(CVarlenStatesArgs, dict(x=a["x"], cu_seqlens=a["cu_seqlens"], out=out),
                          backend=_lib.BACKEND_IDS["cpu"], stream=None)
    assert lib.call_status("cc1d_causal_conv1d_varlen_states", args) == _lib.ERR_INVALID_ARGUMENT
    assert "cu_seqlens[2]" in lib.last_error()
    assert torch.isnan(out).all()


# ---- the torch operator -------------------------------------------------------------------

needs_opcheck = pytest.mark.skipif(not hasattr(torch.library, "opcheck"),
                                   reason="torch.library.opcheck needs torch >= 2.4")


@needs_opcheck
@pytest.mark.parametrize("backend", ["cpu", "aten", "emulate"])
def test_opcheck(backend, gen):
    if backend == "emulate" and not _lib.library().backend_available(_lib.BACKEND_IDS["emulate"], 0, 0)[0]:
        pytest.skip("this libcc1d has no emulate backend")
    x, cu = make_case(5, 16, 4, torch.bfloat16, gen)
    torch.library.opcheck(torch.ops.causal_conv1d.varlen_states.default, (x, cu, 4, backend))


def test_schema_mutates_nothing():
    schema = str(torch.ops.causal_conv1d.varlen_states.default._schema)
    assert "!" not in schema and schema.endswith("-> Tensor")


def test_compile_fullgraph(gen):
    x, cu = make_case(4, 16, 3, torch.float32, gen)
    want = causal_conv1d_varlen_states(x, cu, 3)

    @torch.compile(fullgraph=True, backend="aot_eager" if hasattr(torch.library, "custom_op") else "eager")
    def states_times_two(x, cu):
        return causal_conv1d_varlen_states(x, cu, 3) * 2

    torch.testing.assert_close(states_times_two(x, cu), want * 2, rtol=0, atol=0)


# ---- CUDA ---------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")
@pytest.mark.parametrize("dtype", FLOATS, ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("layout", ["rows", "channel_major"])
def test_cuda_nvrtc_matches_reference(dtype, layout, gen):
    """The 16-byte kernel (rows) and the scalar one (channel-major x) on a real device."""
    x, cu = make_case(33, 2048 + 64, 4, dtype, gen, layout=layout, device="cuda")
    states = causal_conv1d_varlen_states(x, cu, 4, backend="nvrtc")
    _served_by("nvrtc")
    check_states(states, x, cu, 4)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_cuda_kernel_clamps_bad_values(gen, monkeypatch):
    """Device values are not read by libcc1d: the kernel clamps them (end to [0, total], begin to
    [0, end]; never a read outside x), and CAUSAL_CONV1D_CHECK_INDICES=1 turns them into the host
    tensors' error."""
    x = randn((10, 64), gen, torch.float16, "cuda")
    cu = torch.tensor([-4, 12, 3, 1, 10], dtype=torch.int32, device="cuda")
    states = causal_conv1d_varlen_states(x, cu, 4, backend="nvrtc").cpu().double()
    last = reference_varlen_states(x, torch.tensor([0, 10]), 4)[0]  # tokens 6..9
    zero = torch.zeros_like(last)
    assert torch.equal(states, torch.stack([last, zero, zero, last]))
    monkeypatch.setenv("CAUSAL_CONV1D_CHECK_INDICES", "1")
    with pytest.raises(ValueError, match=r"cu_seqlens\[0\] is -4"):
        causal_conv1d_varlen_states(x, cu, 4, backend="nvrtc")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_cuda_graph_capture_and_replay(gen):
    x, cu = make_case(8, 256, 3, torch.bfloat16, gen, device="cuda")
    causal_conv1d_varlen_states(x, cu, 3, backend="nvrtc")  # compile first
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        states = causal_conv1d_varlen_states(x, cu, 3, backend="nvrtc")
    for _ in range(2):
        x.copy_(randn(tuple(x.shape), gen, x.dtype, "cuda"))
        graph.replay()
        torch.cuda.synchronize()
        check_states(states, x, cu, 3)
