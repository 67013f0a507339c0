"""Input builders shared by the tests: layouts, dtype pairs, devices and backends; the CMake
build's artefacts; child Python processes."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reference import TOL, reference_update

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
DTYPE_PAIRS = [(xd, wd) for xd in FLOATS for wd in FLOATS]
PAIR_IDS = [f"x{SHORT[a]}-w{SHORT[b]}" for a, b in DTYPE_PAIRS]

# cf: channel-first contiguous (B, D, L); cl: channel-last, a (B, L, D) tensor transposed;
# the others are non-contiguous views.
LAYOUTS = ["cf", "cl", "cf_dim_slice", "cl_dim_slice", "time_step", "expand_batch"]

HAS_CUDA = torch.cuda.is_available()
_GPU = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")]

# AOTAutograd (torch.compile's aot_eager and inductor backends) takes a custom op that writes its
# inputs (the update's conv_state, the backward's dx_out) through auto_functionalize, which torch
# 2.3 added; torch 2.1 and 2.2 refuse such an op there ("Found a custom (non-ATen) operator that
# either mutates..."). Dynamo still traces those calls whole, and the eager backend runs them.
AOT_MUTATION = importlib.util.find_spec("torch._higher_order_ops.auto_functionalize") is not None
NEEDS_AOT_MUTATION = pytest.mark.skipif(
    not AOT_MUTATION, reason=f"torch {torch.__version__} has no auto_functionalize (torch >= 2.3): "
                             "AOTAutograd cannot take an op that writes its inputs")


def compile_backend(backend: str) -> str:
    """An AOTAutograd backend's name, or "eager" where torch cannot give it our writing ops."""
    return backend if AOT_MUTATION else "eager"


def _emulate_unavailable():
    from causal_conv1d import _lib

    lib = _lib.library()
    if lib is None:
        return None  # the test then fails with the load error, like the cpu backend's tests
    ok, why = lib.backend_available(_lib.BACKEND_IDS["emulate"], _lib.DEVICE_CPU, 0)
    return None if ok else why


_EMULATE_WHY = _emulate_unavailable()

# (device, backend) pairs every numerical test runs over. emulate (libcc1d's GPU kernels run on
# the host) runs when this libcc1d was built with it (CC1D_BUILD_EMULATOR=ON).
DEV_BACKENDS = [
    pytest.param("cpu", "cpu", id="cpu-cpu"),
    pytest.param("cpu", "aten", id="cpu-aten"),
    pytest.param("cpu", "emulate", id="cpu-emulate",
                 marks=pytest.mark.skipif(_EMULATE_WHY is not None, reason=f"emulate backend: {_EMULATE_WHY}")),
    pytest.param("cuda", "nvrtc", id="cuda-nvrtc", marks=_GPU),
    pytest.param("cuda", "aten", id="cuda-aten", marks=_GPU),
]


def served_by(backend, op=None):
    """The last call on this thread was served by `backend` (and was op `op`, when given)."""
    import causal_conv1d

    choice = causal_conv1d.last_backend()
    assert choice is not None and choice.backend == backend, f"served by {choice}, expected {backend}"
    assert op is None or choice.op == op, f"served by {choice}, expected op {op}"


def randn(shape, gen, dtype, device="cpu"):
    return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)


def make_x(B, D, L, dtype, layout, gen, device="cpu"):
    """x of shape (B, D, L) in the given memory layout."""
    if layout == "cf":
        x = randn((B, D, L), gen, dtype, device)
    elif layout == "cl":
        x = randn((B, L, D), gen, dtype, device).transpose(1, 2)
    elif layout == "cf_dim_slice":
        x = randn((B, 2 * D, L), gen, dtype, device)[:, ::2, :]
    elif layout == "cl_dim_slice":
        x = randn((B, L, 2 * D), gen, dtype, device)[:, :, ::2].transpose(1, 2)
    elif layout == "time_step":
        x = randn((B, D, 2 * L + 1), gen, dtype, device)[:, :, 1::2]
    elif layout == "expand_batch":
        x = randn((1, D, L), gen, dtype, device).expand(B, D, L)
    else:
        raise ValueError(layout)
    assert tuple(x.shape) == (B, D, L)
    return x


def make_states(B, D, W, dtype, layout, gen, device="cpu"):
    """(B, D, W-1) states, channel-first ('cf') or channel-last ('cl')."""
    if layout == "cf":
        return randn((B, D, W - 1), gen, dtype, device)
    return randn((B, W - 1, D), gen, dtype, device).transpose(1, 2)


def make_seq_idx(B, L, gen, device="cpu", padding=True):
    """(B, L) int32 segment ids: increasing segments with random boundaries (some short ones),
    and, with padding, a run of -1 at the end and an isolated -1 in the middle."""
    rows = []
    for _ in range(B):
        starts = torch.rand(L, generator=gen) < 0.08
        starts[0] = False
        seg = torch.cumsum(starts.to(torch.int32), 0).to(torch.int32)
        if padding and L >= 4:
            npad = int(torch.randint(1, max(2, L // 6), (1,), generator=gen))
            seg[L - npad:] = -1
            mid = int(torch.randint(0, L - npad, (1,), generator=gen))
            seg[mid] = -1
        rows.append(seg)
    return torch.stack(rows).to(device)


def nan_like_states(B, D, W, dtype, layout, device="cpu"):
    if layout == "cf":
        return torch.full((B, D, W - 1), float("nan"), dtype=dtype, device=device)
    return torch.full((B, W - 1, D), float("nan"), dtype=dtype, device=device).transpose(1, 2)


def make_update_case(B, D, L, W, S, xd, wd, *, circular, gather, state_cl, x_2d, gen, device="cpu"):
    """x, conv_state, weight, bias, cache_seqlens and conv_state_indices of one update case."""
    x = randn((B, D) if x_2d else (B, D, L), gen, xd, device)
    weight = randn((D, W), gen, wd, device) * 0.5
    bias = randn((D,), gen, wd, device)
    pool = B + 3 if gather else B
    state = randn((pool, S, D), gen, xd, device).transpose(1, 2) if state_cl else randn((pool, D, S), gen, xd, device)
    cache = torch.randint(0, 3 * S + 5, (B,), generator=gen, dtype=torch.int32).to(device) if circular else None
    indices = None
    if gather:
        perm = torch.randperm(pool, generator=gen)[:B].to(torch.int32)
        perm[1::3] = -1  # every third row is a padding slot
        indices = perm.to(device)
    return x, state, weight, bias, cache, indices


def check_update(out, state_after, x, state_before, weight, bias, silu, cache, indices):
    """The update's output within x's tolerance of the float64 reference, and its state exact."""
    want_out, want_state = reference_update(x, state_before, weight, bias, silu, cache, indices)
    assert out.dtype == x.dtype and out.shape == x.shape
    o = out.detach().cpu().double()
    assert not torch.isnan(o).any(), "an output element was never written"
    tol = TOL.get(x.dtype, 1e-12)  # float64: the reference's own precision
    err = (o - want_out).abs()
    assert (err <= tol * (1 + want_out.abs())).all(), f"out: max error {err.max().item():.3g}"
    # The state holds x's values unconverted: exact, including rows that must not change.
    assert torch.equal(state_after.cpu().double(), want_state), "conv_state differs from the reference"


REPO = Path(__file__).resolve().parents[2]


def build_artifact(relative: str):
    """A file of the CMake build this libcc1d comes from: beside CAUSAL_CONV1D_LIBRARY, else in
    build/cmake (what `make cpp-test` builds). None when absent."""
    dirs = []
    if os.environ.get("CAUSAL_CONV1D_LIBRARY"):
        dirs.append(Path(os.environ["CAUSAL_CONV1D_LIBRARY"]).resolve().parent)
    dirs.append(REPO / "build" / "cmake")
    for d in dirs:
        if (d / relative).exists():
            return d / relative
    return None


def run_python(code: str = None, env: dict = None, timeout: int = 300, args=()) -> subprocess.CompletedProcess:
    """`python -c code` (or `python <args>`) in a child with this environment plus `env` (a None
    value unsets); the shell's backend and strict settings are dropped."""
    full = {k: v for k, v in os.environ.items() if k not in ("CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT")}
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = str(v)
    cmd = [sys.executable, *(args or ("-c", code))]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=timeout)


def make_bwd_case(gen, device, layout, xd, wd, W, L, D, *, bias, seq, init, dfinal, state_layout="cl", B=2):
    """x, weight, bias, seq_idx, initial_states, dout (x's layout) and dfinal_states (the
    states' layout) of one backward case; optional parts None unless asked."""
    x = make_x(B, D, L, xd, layout, gen, device)
    w = randn((D, W), gen, wd, device) * 0.5
    b = randn((D,), gen, wd, device) if bias else None
    s = make_seq_idx(B, L, gen, device) if seq else None
    i = make_states(B, D, W, xd, state_layout, gen, device) if init else None
    dout = make_x(B, D, L, xd, layout, gen, device)
    df = make_states(B, D, W, xd, state_layout, gen, device) if dfinal else None
    return x, w, b, s, i, dout, df
