"""libcc1d's C ABI called directly through ctypes, bypassing the Python validation: each invalid
argument gives its status code and a message naming the argument; nothing is written then."""

import ctypes
import gc
import json
import logging
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

import causal_conv1d
from causal_conv1d import _lib
from causal_conv1d._pack import tensor_struct
from causal_conv1d._op_fwd import CFwdArgs
from reference import assert_matches, reference_final_states

B, D, L, W = 2, 8, 16, 4


class Call:
    """A valid forward call, built from tensors, whose structs a test may then damage."""

    def __init__(self, lib, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.lib = lib
        self.x = torch.randn(B, L, D, generator=g).transpose(1, 2)  # channel-last
        self.weight = torch.randn(D, W, generator=g)
        self.bias = torch.randn(D, generator=g)
        self.seq_idx = torch.tensor([[0] * 5 + [1] * 9 + [-1] * 2, [0] * 16], dtype=torch.int32)
        self.initial_states = torch.randn(B, D, W - 1, generator=g)
        self.out = torch.full((B, D, L), float("nan"))
        self.final_states = torch.full((B, D, W - 1), float("nan"))
        self.t = {n: tensor_struct(getattr(self, n)) for n in
                  ("x", "weight", "bias", "seq_idx", "initial_states", "out", "final_states")}
        self.args = CFwdArgs()
        self.args.struct_size = ctypes.sizeof(CFwdArgs)
        for n, s in self.t.items():
            setattr(self.args, n, ctypes.pointer(s))
        self.args.activation = _lib.ACT_SILU
        self.args.backend = _lib.BACKEND_IDS["cpu"]

    def set(self, name, tensor=None, **overrides):
        """Replace argument `name` by a struct for `tensor` (default: the current one) with overrides."""
        if tensor is not None:
            setattr(self, name, tensor)
        self.t[name] = tensor_struct(getattr(self, name), **overrides)
        setattr(self.args, name, ctypes.pointer(self.t[name]))

    def drop(self, name):
        setattr(self.args, name, None)

    def run(self):
        return self.lib.call_status("cc1d_causal_conv1d_fwd", self.args)


def expect(call, status, *needles):
    got = call.run()
    msg = call.lib.last_error()
    assert got == status, f"status {got} ({_lib.STATUS_NAMES.get(got)}), expected {status} " \
                          f"({_lib.STATUS_NAMES.get(status)}); message: {msg!r}"
    for n in needles:
        assert n in msg, f"message {msg!r} lacks {n!r}"
    assert torch.isnan(call.out).all(), "a failing call wrote out"
    assert torch.isnan(call.final_states).all(), "a failing call wrote final_states"
    return msg


@pytest.fixture
def call(lib):
    return Call(lib)


# ---- versions and the valid call -----------------------------------------------------------


def test_abi_and_version(lib):
    assert lib.dll.cc1d_abi_version() == _lib.ABI_VERSION == 1
    assert lib.version == causal_conv1d.package_version, "libcc1d and the Python package disagree on the version"


def test_valid_call_writes_every_output(call):
    assert call.run() == _lib.OK, call.lib.last_error()
    assert_matches(call.out, call.x, call.weight, call.bias, seq_idx=call.seq_idx,
                   initial_states=call.initial_states, silu=True)
    assert torch.equal(call.final_states, reference_final_states(call.x, W, call.initial_states))


def test_optional_tensors_may_be_null(call):
    for n in ("bias", "seq_idx", "initial_states", "final_states"):
        call.drop(n)
    assert call.run() == _lib.OK, call.lib.last_error()
    assert_matches(call.out, call.x, call.weight, silu=True)


def test_out_may_be_any_strided_layout(call):
    base = torch.full((B, 2 * D, 3 * L), float("nan"))
    view = base[:, ::2, ::3]
    call.set("out", view)
    assert call.run() == _lib.OK, call.lib.last_error()
    assert_matches(view, call.x, call.weight, call.bias, seq_idx=call.seq_idx,
                   initial_states=call.initial_states, silu=True)
    untouched = base.clone()
    untouched[:, ::2, ::3] = float("nan")
    assert torch.isnan(untouched).all(), "wrote outside the out view"


# ---- null pointers ---------------------------------------------------------------------------


def test_null_args(lib):
    assert lib.dll.cc1d_causal_conv1d_fwd(None) == _lib.ERR_NULL_POINTER
    assert "args" in lib.last_error()


@pytest.mark.parametrize("name", ["x", "weight", "out"])
def test_null_required_tensor(call, name):
    call.drop(name)
    expect(call, _lib.ERR_NULL_POINTER, name)


def test_null_data_pointer(call):
    call.set("x", data=0)
    expect(call, _lib.ERR_NULL_POINTER, "x", "NULL")


# ---- struct and enum fields ----------------------------------------------------------------


def test_struct_size_too_small(call):
    call.args.struct_size = 8
    expect(call, _lib.ERR_INVALID_ARGUMENT, "struct_size")


def test_unknown_activation(call):
    call.args.activation = 7
    expect(call, _lib.ERR_INVALID_ARGUMENT, "activation", "7")


def test_unknown_backend(call):
    call.args.backend = 42
    expect(call, _lib.ERR_INVALID_ARGUMENT, "backend", "42")


def test_unknown_device_type(call):
    call.set("x", device=(5, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "device_type")


# ---- shapes, dtypes, devices -----------------------------------------------------------------


def test_x_rank(call):
    call.set("x", call.x[0])
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "3-D")


def test_x_ndim_beyond_max_rank(call):
    call.t["x"].ndim = 7  # more dims than cc1d_tensor can hold
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "3-D")


def test_x_dtype_int32(call):
    call.set("x", dtype=_lib.INT32)
    expect(call, _lib.ERR_INVALID_TYPE, "x", "int32")


def test_x_dtype_unknown(call):
    call.set("x", dtype=99)
    expect(call, _lib.ERR_INVALID_TYPE, "x")


def test_x_negative_size(call):
    call.set("x", shape=(B, D, -3))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "negative")


def test_x_negative_stride(call):
    call.set("x", strides=(D * L, 1, -D))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "negative")


def test_x_seqlen_zero(call):
    call.set("x", shape=(B, D, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "x", "seqlen")


def test_weight_dim_mismatch(call):
    call.set("weight", torch.randn(D + 1, W))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "weight", "dim=8", "(9, 4)")


def test_weight_rank(call):
    call.set("weight", torch.randn(D))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "weight", "2-D")


@pytest.mark.parametrize("width", [0, 9])
def test_width_out_of_range(call, width):
    call.set("weight", torch.randn(D, width))
    call.drop("initial_states")
    call.drop("final_states")
    expect(call, _lib.ERR_INVALID_ARGUMENT, "weight", "1..8", str(width))


def test_weight_dtype(call):
    call.set("weight", dtype=_lib.INT32)
    expect(call, _lib.ERR_INVALID_TYPE, "weight", "int32")


def test_weight_device(call):
    call.set("weight", device=(_lib.DEVICE_CUDA, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "weight", "device", "cuda:0")


def test_bias_shape(call):
    call.set("bias", torch.randn(D + 1))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "bias", "(9,)")


def test_bias_dtype_mismatch(call):
    call.set("bias", call.bias.half())
    expect(call, _lib.ERR_INVALID_TYPE, "bias", "float32", "float16")


def test_bias_device(call):
    call.set("bias", device=(_lib.DEVICE_CUDA, 1))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "bias", "device")


def test_seq_idx_dtype(call):
    call.set("seq_idx", call.seq_idx.float())
    expect(call, _lib.ERR_INVALID_TYPE, "seq_idx", "int32", "float32")


def test_seq_idx_shape(call):
    call.set("seq_idx", call.seq_idx[:, :-1])
    expect(call, _lib.ERR_INVALID_ARGUMENT, "seq_idx", "(2, 15)")


def test_seq_idx_device(call):
    call.set("seq_idx", device=(_lib.DEVICE_CUDA, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "seq_idx", "device")


def test_initial_states_shape(call):
    call.set("initial_states", torch.randn(B, D, W))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "initial_states", "width-1=3", "(2, 8, 4)")


def test_initial_states_dtype(call):
    call.set("initial_states", call.initial_states.bfloat16())
    expect(call, _lib.ERR_INVALID_TYPE, "initial_states", "bfloat16")


def test_initial_states_device(call):
    call.set("initial_states", device=(_lib.DEVICE_CUDA, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "initial_states", "device")


def test_out_shape(call):
    call.set("out", torch.full((B, D, L + 1), float("nan")))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "out", "(2, 8, 17)")


def test_out_dtype(call):
    call.set("out", torch.full((B, D, L), float("nan"), dtype=torch.float16))
    expect(call, _lib.ERR_INVALID_TYPE, "out", "float16")


def test_out_broadcast(call):
    row = torch.full((1, D, L), float("nan"))
    call.set("out", row.expand(B, D, L))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "out", "stride 0")


def test_out_aliases_x(call):
    call.set("out", call.x)
    got = call.run()
    assert got == _lib.ERR_INVALID_ARGUMENT and "overlaps x" in call.lib.last_error(), call.lib.last_error()


def test_out_device(call):
    call.set("out", device=(_lib.DEVICE_CUDA, 0))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "out", "device")


def test_final_states_shape(call):
    call.set("final_states", torch.full((B, D, W), float("nan")))
    expect(call, _lib.ERR_INVALID_ARGUMENT, "final_states", "(2, 8, 4)")


def test_final_states_dtype(call):
    call.set("final_states", torch.full((B, D, W - 1), float("nan"), dtype=torch.bfloat16))
    expect(call, _lib.ERR_INVALID_TYPE, "final_states", "bfloat16")


def test_final_states_overlaps_out(call):
    call.set("final_states", call.out[:, :, : W - 1])
    got = call.run()
    assert got == _lib.ERR_INVALID_ARGUMENT and "final_states" in call.lib.last_error(), call.lib.last_error()


# ---- other entry points --------------------------------------------------------------------


def test_backend_available_cpu(lib):
    assert lib.dll.cc1d_backend_available(_lib.BACKEND_IDS["cpu"], _lib.DEVICE_CPU, 0) == _lib.OK


def test_backend_available_cpu_rejects_cuda_memory(lib):
    st = lib.dll.cc1d_backend_available(_lib.BACKEND_IDS["cpu"], _lib.DEVICE_CUDA, 0)
    assert st == _lib.ERR_BACKEND_UNAVAILABLE and lib.last_error()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU answer")
def test_backend_available_nvrtc_without_gpu(lib):
    st = lib.dll.cc1d_backend_available(_lib.BACKEND_IDS["nvrtc"], _lib.DEVICE_CUDA, 0)
    assert st == _lib.ERR_BACKEND_UNAVAILABLE
    assert len(lib.last_error()) > 10, "the reason must say why"


def test_backend_available_bad_device_type(lib):
    assert lib.dll.cc1d_backend_available(_lib.BACKEND_IDS["cpu"], 9, 0) == _lib.ERR_INVALID_ARGUMENT
    assert "device_type" in lib.last_error()


def test_report_json(lib):
    needed = ctypes.c_size_t(0)
    assert lib.dll.cc1d_report(None, 0, ctypes.byref(needed)) == _lib.ERR_BUFFER_TOO_SMALL
    assert needed.value > 2
    small = ctypes.create_string_buffer(2)
    assert lib.dll.cc1d_report(small, 2, ctypes.byref(needed)) == _lib.ERR_BUFFER_TOO_SMALL
    buf = ctypes.create_string_buffer(needed.value)
    assert lib.dll.cc1d_report(buf, needed.value, ctypes.byref(needed)) == _lib.OK
    report = json.loads(buf.value.decode())
    assert isinstance(report, dict) and report


def test_set_torch_info_accepts_nulls(lib):
    assert lib.dll.cc1d_set_torch_info(None, None, -1) == _lib.OK
    lib.set_torch_info(str(torch.__version__), torch.version.cuda, int(torch._C._GLIBCXX_USE_CXX11_ABI))
    text = lib.report_text()
    assert str(torch.__version__) in text


def test_last_error_is_thread_local(call):
    call.args.activation = 7
    assert call.run() == _lib.ERR_INVALID_ARGUMENT
    main_msg = call.lib.last_error()
    seen = {}

    def other():
        seen["before"] = call.lib.last_error()
        c2 = Call(call.lib, seed=1)
        c2.args.backend = 42
        seen["status"] = c2.run()
        seen["after"] = c2.lib.last_error()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["before"] == "", "another thread's error leaked into a new thread"
    assert seen["status"] == _lib.ERR_INVALID_ARGUMENT and "backend" in seen["after"]
    assert call.lib.last_error() == main_msg, "this thread's message changed"


def test_status_mapping(lib):
    """Python's exceptions for library statuses: 1 -> ValueError, 2 -> TypeError, else RuntimeError."""
    c = Call(lib)
    c.args.activation = 7
    with pytest.raises(ValueError, match="activation"):
        lib.raise_for(c.run(), "test")
    c = Call(lib)
    c.set("x", dtype=99)
    with pytest.raises(TypeError):
        lib.raise_for(c.run(), "test")
    assert lib.dll.cc1d_causal_conv1d_fwd(None) == _lib.ERR_NULL_POINTER
    with pytest.raises(RuntimeError) as info:
        lib.raise_for(_lib.ERR_NULL_POINTER, "test")
    assert not isinstance(info.value, (ValueError, TypeError))
    assert info.value.status == _lib.ERR_NULL_POINTER


# ---- the Python copies of cc1d.h's constants, and what the library says -------------------

HEADER = Path(__file__).resolve().parents[2] / "runtime" / "include" / "cc1d" / "cc1d.h"


def _header_constants() -> dict:
    """Every `#define CC1D_X N` and every `CC1D_X = N` enum entry of cc1d.h."""
    text = HEADER.read_text()
    consts = {m[0]: int(m[1]) for m in re.findall(r"#define (CC1D_\w+) (\d+)u?\b", text)}
    consts.update({m[0]: int(m[1]) for m in re.findall(r"\b(CC1D_\w+) = (\d+)", text)})
    return consts


def test_python_constants_match_the_header():
    h = _header_constants()
    assert h["CC1D_ABI_VERSION"] == _lib.ABI_VERSION
    assert h["CC1D_MAX_RANK"] == _lib.MAX_RANK
    assert h["CC1D_MAX_WIDTH"] == _lib.MAX_WIDTH
    assert h["CC1D_MAX_BACKENDS"] == _lib.MAX_BACKENDS
    assert h["CC1D_MAX_VARLEN_STATE_LEN"] == _lib.MAX_VARLEN_STATE_LEN
    statuses = {k: v for k, v in h.items() if k.startswith("CC1D_OK") or k.startswith("CC1D_ERR_")}
    assert statuses == {name: code for code, name in _lib.STATUS_NAMES.items()}
    for name in ("FLOAT32", "FLOAT16", "BFLOAT16", "INT32"):
        assert h["CC1D_" + name] == getattr(_lib, name)
    assert (h["CC1D_DEVICE_CPU"], h["CC1D_DEVICE_CUDA"]) == (_lib.DEVICE_CPU, _lib.DEVICE_CUDA)
    assert {k[len("CC1D_BACKEND_"):].lower(): v for k, v in h.items() if k.startswith("CC1D_BACKEND_")} == \
        _lib.BACKEND_IDS
    assert {k[len("CC1D_OP_"):].lower(): v for k, v in h.items() if k.startswith("CC1D_OP_")} == _lib.OP_IDS
    assert (h["CC1D_ACT_NONE"], h["CC1D_ACT_SILU"]) == (_lib.ACT_NONE, _lib.ACT_SILU)
    assert {k[len("CC1D_CACHE_"):].lower(): v for k, v in h.items() if k.startswith("CC1D_CACHE_")} == \
        _lib.CACHE_COMMANDS
    assert sorted(v for k, v in h.items() if k.startswith("CC1D_SOURCE_")) == sorted(_lib.SOURCE_NAMES)
    assert sorted(v for k, v in h.items() if k.startswith("CC1D_LOG_")) == sorted(_lib.LOG_LEVELS)


def test_backend_and_op_names_come_from_the_library(lib):
    assert lib.names("cc1d_backend_name") == tuple(_lib.BACKEND_IDS)
    assert lib.names("cc1d_op_name") == tuple(_lib.OP_IDS)
    assert causal_conv1d.BACKENDS == tuple(_lib.BACKEND_IDS)


@pytest.mark.parametrize("value", ["", "0", "1", "true", "false", "yes", "no", "on", "off", "maybe"])
def test_strict_parsing_agrees_with_the_library(lib, monkeypatch, value):
    """Python's copy of the CAUSAL_CONV1D_STRICT rule (used only without a library) matches it."""
    from causal_conv1d import _diag

    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _diag.strict_mode() == lib.plan("fwd", "auto", _lib.DEVICE_CPU, 0).strict


def test_log_lines_reach_python_logging(lib, caplog):
    """libcc1d logs through the `causal_conv1d` Python logger (a callback), at libcc1d's level."""
    before = lib.dll.cc1d_get_log_level()
    assert lib.dll.cc1d_set_log_level(1) == _lib.OK  # debug
    try:
        with caplog.at_level(logging.DEBUG, logger="causal_conv1d"):
            c = Call(lib)
            c.args.activation = 7
            assert c.run() == _lib.ERR_INVALID_ARGUMENT  # libcc1d logs each error at debug
        assert any(r.name == "causal_conv1d" and r.levelno == logging.DEBUG and "activation" in r.getMessage()
                   for r in caplog.records)
    finally:
        lib.dll.cc1d_set_log_level(before)
    assert lib.dll.cc1d_set_log_level(9) == _lib.ERR_INVALID_ARGUMENT


def test_log_level_means_the_same_on_both_sides():
    """CAUSAL_CONV1D_LOG_LEVEL=debug: libcc1d's debug lines appear on stderr through Python."""
    code = ("import torch, causal_conv1d\n"
            "x = torch.randn(1, 2, 3); w = torch.randn(2, 9)\n"
            "from causal_conv1d import _lib\n"
            "lib = _lib.library()\n"
            "import logging; print(logging.getLogger('causal_conv1d').getEffectiveLevel(), lib.dll.cc1d_get_log_level())\n"
            "from test_c_abi import Call\n"
            "c = Call(lib); c.args.activation = 7; c.run()\n")
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, CAUSAL_CONV1D_LOG_LEVEL="debug", PYTHONPATH=path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["10", "1"]  # logging.DEBUG, CC1D_LOG_DEBUG
    assert "[causal_conv1d] DEBUG: cc1d_causal_conv1d_fwd: activation" in r.stderr


def test_packed_arguments_read_back_as_the_struct():
    """_pack's one-buffer packing: every field, each descriptor with its own tensor's metadata."""
    from causal_conv1d import _op_fwd
    from causal_conv1d._pack import fill_args

    x = torch.randn(2, 8, 16).transpose(1, 2)
    w = torch.randn(16, 4)
    out = torch.empty(2, 16, 8)
    buf = fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, out=out), activation=1, backend=3, stream=None)
    s = _op_fwd.CFwdArgs.from_buffer(buf)
    assert s.struct_size == ctypes.sizeof(_op_fwd.CFwdArgs) and (s.activation, s.backend, s.stream) == (1, 3, None)
    assert not s.bias and not s.seq_idx and not s.initial_states and not s.final_states
    for field, t in (("x", x), ("weight", w), ("out", out)):
        d = getattr(s, field).contents
        assert d.data == t.data_ptr() and d.dtype == _lib.FLOAT32 and d.device_type == _lib.DEVICE_CPU
        assert list(d.shape[:d.ndim]) == list(t.shape) and list(d.strides[:d.ndim]) == list(t.stride())
        assert list(d.shape[d.ndim:]) == [0] * (4 - d.ndim)
    with pytest.raises(ValueError, match="serves cpu and cuda tensors; got a tensor on meta"):
        fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w.to("meta"), out=out))
    with pytest.raises(TypeError, match="no element type for torch.float64"):
        fill_args(_op_fwd.CFwdArgs, dict(x=x.double(), weight=w, out=out))
    with pytest.raises(KeyError, match="no tensor field outt"):
        fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, outt=out))


@pytest.mark.parametrize("packer", ["c", "python"])
def test_packed_arguments_keep_their_tensors_alive(packer, monkeypatch):
    """fill_args' buffer holds references to its tensors, not only their data pointers: a tensor
    made for the call (cpu_fwd.py's seq_idx once, the backward's CUDA workspace) lives as long as
    the buffer, on either packer."""
    import weakref

    from causal_conv1d import _op_fwd, _pack

    if packer == "python":
        monkeypatch.setattr(_pack, "_c_pack", False)
    elif not _pack.c_packer():
        pytest.skip(f"libcc1d_pyargs is not loaded here: {_pack.c_packer_state()}")
    x, w = torch.randn(2, 16, 8), torch.randn(16, 4)
    seq = torch.zeros(2, 8, dtype=torch.int32)
    alive = weakref.ref(seq)
    buf = _pack.fill_args(_op_fwd.CFwdArgs, dict(x=x, weight=w, out=torch.empty_like(x), seq_idx=seq))
    del seq
    gc.collect()
    assert alive() is not None, "the buffer let its seq_idx go"
    assert _op_fwd.CFwdArgs.from_buffer(buf).seq_idx.contents.data == alive().data_ptr()
    del buf
    gc.collect()
    assert alive() is None, "the tensor outlived its buffer"


def test_packed_output_laid_out_like_its_input():
    """ArgPacker.pack(like=(out, x)): out's descriptor is x's with out's data pointer, field by
    field the same as describing out itself (out = empty_like of a contiguous x)."""
    from causal_conv1d import _op_update

    x = torch.randn(3, 8, 2, dtype=torch.bfloat16)
    state = torch.randn(5, 8, 4, dtype=torch.bfloat16)
    w = torch.randn(8, 4)
    idx = torch.tensor([4, -1, 0], dtype=torch.int32)
    out = torch.empty_like(x)
    tensors, scalars = (x, state, w, None, None, idx, out), (1, 2, 0)
    like = _op_update._OUT_LIKE_X
    assert like == (6, 0)
    described = _op_update.CUpdateArgs.from_buffer(_op_update._ARGS.pack(tensors, scalars))
    copied = _op_update.CUpdateArgs.from_buffer(_op_update._ARGS.pack(tensors, scalars, like))
    assert copied.out.contents.data == out.data_ptr() != x.data_ptr()
    for field in ("x", "conv_state", "weight", "conv_state_indices", "out"):
        assert bytes(getattr(copied, field).contents) == bytes(getattr(described, field).contents), field
    assert not copied.bias and not copied.cache_seqlens and (copied.activation, copied.backend) == (1, 2)
