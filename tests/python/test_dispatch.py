"""Backend selection: argument > use_backend() > CAUSAL_CONV1D_BACKEND > auto; fallbacks warn
once per process and reason; strict mode; forced backends that cannot serve raise."""

import ctypes
import logging
import threading
import warnings

import pytest
import torch

import causal_conv1d
from causal_conv1d import CausalConv1dWarning, StrictModeError, _dispatch, _lib, _pack, causal_conv1d_fn
from reference import assert_matches


@pytest.fixture
def xw(gen):
    return torch.randn(2, 8, 30, generator=gen), torch.randn(8, 4, generator=gen)


def served():
    return causal_conv1d.last_backend()


def test_auto_picks_cpu_for_host_tensors(lib, xw, fresh_dispatch):
    x, w = xw
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalConv1dWarning)
        out = causal_conv1d_fn(x, w)
    c = served()
    assert (c.backend, c.requested, c.source) == ("cpu", "auto", "default")
    assert c.fallback_from == () and "auto" in c.reason
    assert_matches(out, x, w)


def test_argument_beats_context_beats_env(lib, xw, monkeypatch):
    x, w = xw
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "aten")
    causal_conv1d_fn(x, w)
    assert (served().backend, served().source) == ("aten", "CAUSAL_CONV1D_BACKEND")
    with causal_conv1d.use_backend("cpu"):
        causal_conv1d_fn(x, w)
        assert (served().backend, served().source) == ("cpu", "use_backend()")
        causal_conv1d_fn(x, w, backend="aten")
        assert (served().backend, served().source) == ("aten", "argument backend=")
    causal_conv1d_fn(x, w)
    assert served().backend == "aten", "the env var applies again after the block"


def test_env_var_is_read_at_call_time(lib, xw, monkeypatch):
    x, w = xw
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "cpu")
    causal_conv1d_fn(x, w)
    assert served().backend == "cpu"
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "ATEN ")  # case and spaces are tolerated
    causal_conv1d_fn(x, w)
    assert served().backend == "aten"
    monkeypatch.setenv("CAUSAL_CONV1D_BACKEND", "auto")
    causal_conv1d_fn(x, w)
    assert (served().backend, served().requested) == ("cpu", "auto")


def test_use_backend_nests_and_restores_on_error(lib, xw):
    x, w = xw
    with causal_conv1d.use_backend("aten"):
        with causal_conv1d.use_backend("cpu"):
            causal_conv1d_fn(x, w)
            assert served().backend == "cpu"
        causal_conv1d_fn(x, w)
        assert served().backend == "aten"
        with pytest.raises(ZeroDivisionError):
            with causal_conv1d.use_backend("cpu"):
                1 / 0
        causal_conv1d_fn(x, w)
        assert served().backend == "aten"
    causal_conv1d_fn(x, w)
    assert served().source == "default"


def test_use_backend_is_per_thread(lib, xw):
    x, w = xw
    seen = {}

    def worker():
        causal_conv1d_fn(x, w)
        seen["choice"] = causal_conv1d.last_backend()

    with causal_conv1d.use_backend("aten"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        causal_conv1d_fn(x, w)
        assert served().backend == "aten"
    assert seen["choice"].backend == "cpu" and seen["choice"].source == "default"


def test_last_backend_is_per_thread(lib, xw):
    x, w = xw
    causal_conv1d_fn(x, w, backend="aten")
    seen = {}
    t = threading.Thread(target=lambda: seen.setdefault("v", causal_conv1d.last_backend()))
    t.start()
    t.join()
    assert seen["v"] is None
    assert served().backend == "aten"


def test_forced_nvrtc_on_host_tensors_raises(xw, fresh_dispatch):
    x, w = xw
    with pytest.raises(causal_conv1d.BackendUnavailableError, match=r"'nvrtc'.*argument backend=.*CUDA tensors"):
        causal_conv1d_fn(x, w, backend="nvrtc")


def test_forced_emulate_serves_or_says_why(lib, xw, fresh_dispatch):
    """Whatever this build has: emulate either serves correctly, or raises the library's reason."""
    x, w = xw
    ok, why = lib.backend_available(_lib.BACKEND_IDS["emulate"], _lib.DEVICE_CPU, 0)
    if ok:
        out = causal_conv1d_fn(x, w, backend="emulate")
        assert served().backend == "emulate"
        assert_matches(out, x, w)
    else:
        with pytest.raises(causal_conv1d.BackendUnavailableError) as info:
            causal_conv1d_fn(x, w, backend="emulate")
        assert why in str(info.value) and "'emulate'" in str(info.value)


def test_meta_tensors_give_meta_outputs_without_warning(xw, fresh_dispatch):
    """Meta tensors are shape-only: the op's fake implementation (custom op) or aten (plain
    path) answers with outputs of the right shape and layout, and nothing warns."""
    x, w = xw
    xm = x.transpose(1, 2).contiguous().transpose(1, 2).to("meta")  # channel-last
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalConv1dWarning)
        out, fs = causal_conv1d_fn(xm, w.to("meta"), return_final_states=True)
    assert out.device.type == "meta" and out.shape == x.shape and fs.shape == (2, 8, 3)
    assert out.stride() == xm.stride()


# ---- simulated unavailability: the fallback path on this (GPU-less) machine ---------------


def test_fallback_warns_once_per_reason(cpu_unavailable, xw):
    x, w = xw
    with pytest.warns(CausalConv1dWarning) as rec:
        out = causal_conv1d_fn(x, w)
    msgs = [str(r.message) for r in rec if issubclass(r.category, CausalConv1dWarning)]
    assert len(msgs) == 1
    m = msgs[0]
    assert "backend 'cpu'" in m and "simulated: cpu switched off" in m
    assert "Falling back to 'aten'" in m and "CAUSAL_CONV1D_STRICT=1" in m
    assert_matches(out, x, w)
    c = served()
    assert c.backend == "aten" and c.fallback_from[0][0] == "cpu" and "simulated" in c.reason

    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalConv1dWarning)  # a repeat would raise here
        causal_conv1d_fn(x, w)
        causal_conv1d_fn(x, w, activation="silu")
    assert served().backend == "aten"

    # a different reason is a new warning
    cpu_unavailable["cpu"] = "simulated: another reason"
    _dispatch._clear_caches()
    with pytest.warns(CausalConv1dWarning, match="another reason"):
        causal_conv1d_fn(x, w)


def test_strict_turns_fallback_into_error(cpu_unavailable, xw, monkeypatch):
    x, w = xw
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "1")
    with pytest.raises(StrictModeError, match=r"backend 'cpu'.*simulated.*Falling back to 'aten'.*STRICT") as info:
        causal_conv1d_fn(x, w)
    assert isinstance(info.value, RuntimeError)


def test_forced_backend_that_cannot_serve_raises(cpu_unavailable, xw):
    x, w = xw
    with pytest.raises(causal_conv1d.BackendUnavailableError, match=r"'cpu' \(requested by use_backend\(\)\).*simulated"):
        with causal_conv1d.use_backend("cpu"):
            causal_conv1d_fn(x, w)


def fail_library_calls(lib, monkeypatch, status, message):
    """Every op call into libcc1d fails with `status` and `message`, on each line that calls it:
    run()'s (Library.call) and the direct route's, libcc1d_pyargs's pack_call (which calls what
    Library.entry_address gives it, here a C function pointer into Python) or, without it,
    Library.packed_entry. Returns the list that records each call."""
    calls = []

    def failing_call(*a, **k):
        calls.append(1)
        raise _lib.error_for_status(status, message)

    def failing_status(args):
        calls.append(1)
        return status

    entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(failing_status)
    monkeypatch.setattr(lib, "call", failing_call)
    monkeypatch.setattr(lib, "packed_entry", lambda name: failing_status)
    monkeypatch.setattr(lib, "entry_address", lambda name, _keep=entry: ctypes.cast(_keep, ctypes.c_void_p).value)
    monkeypatch.setattr(lib, "last_error", lambda: message)
    return calls


@pytest.fixture(params=["c", "python"])
def packer(request, monkeypatch):
    """The fast path's two lines into libcc1d: libcc1d_pyargs's pack_call, or the Python packer
    and a ctypes call."""
    if not _pack.c_packer() and request.param == "c":
        pytest.skip(f"no C packer here: {_pack.c_packer_state()}")
    if request.param == "python":
        monkeypatch.setattr(_pack, "_c_pack", False)


def _falls_back_to_aten(lib, xw, monkeypatch, status, message):
    """Every call into libcc1d fails with `status`: auto moves on to aten, warning once with the
    library's message; returns the list recording each library call (after two op calls)."""
    x, w = xw
    calls = fail_library_calls(lib, monkeypatch, status, message)
    with pytest.warns(CausalConv1dWarning, match=message):
        out = causal_conv1d_fn(x, w)
    assert served().backend == "aten"
    assert_matches(out, x, w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalConv1dWarning)  # the same reason: no second warning
        causal_conv1d_fn(x, w)
    return calls


def test_call_time_unavailability_falls_back(lib, xw, monkeypatch, fresh_dispatch, python_dispatch, packer):
    """The library accepting the backend but then failing the call with BACKEND_UNAVAILABLE:
    auto moves on to aten (with a warning) and remembers it."""
    calls = _falls_back_to_aten(lib, xw, monkeypatch, _lib.ERR_BACKEND_UNAVAILABLE,
                                "simulated: worker threads could not start")
    assert len(calls) == 1, "an unavailable backend is not retried on every call"
    # forced: the same failure raises
    with pytest.raises(causal_conv1d.BackendUnavailableError):
        causal_conv1d_fn(*xw, backend="cpu")


def test_call_time_unsupported_falls_back_for_that_call_only(lib, xw, monkeypatch, fresh_dispatch, python_dispatch,
                                                            packer):
    """UNSUPPORTED at call time (a device the shipped PTX tier alone serves, asked for a kernel
    it lacks): that call falls back to aten with one warning, but the backend is not marked
    broken: every later call asks it again, and once it serves, it is used."""
    calls = _falls_back_to_aten(lib, xw, monkeypatch, _lib.ERR_UNSUPPORTED,
                                "simulated: the shipped PTX tier does not hold it")
    assert len(calls) == 2, "an unsupported call is asked again: the next one may be served"
    monkeypatch.undo()
    assert_matches(causal_conv1d_fn(*xw), *xw)
    assert served().backend == "cpu"


def test_library_errors_are_not_fallbacks(lib, xw, monkeypatch, fresh_dispatch, python_dispatch, packer):
    """A CUDA/internal error from the library propagates; it is not hidden by a fallback."""
    x, w = xw
    fail_library_calls(lib, monkeypatch, _lib.ERR_INTERNAL, "simulated internal error")
    with pytest.raises(RuntimeError, match="simulated internal error"):
        causal_conv1d_fn(x, w)


def test_explain(lib):
    e = causal_conv1d.explain_backend("cpu")
    assert e["backend"] == "cpu" and e["requested"] == "auto" and not e["fallback"]
    c = causal_conv1d.explain_backend("cuda")
    if not torch.cuda.is_available():
        assert c["rejected"][0]["backend"] == "nvrtc" and c["rejected"][0]["reason"]
        assert c["backend"] == "cpu"  # the last resort: host copies
    with causal_conv1d.use_backend("aten"):
        assert causal_conv1d.explain_backend("cpu")["backend"] == "aten"


def test_strict_values(cpu_unavailable, xw, monkeypatch, caplog):
    x, w = xw
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "0")
    with pytest.warns(CausalConv1dWarning, match="Falling back"):
        causal_conv1d_fn(x, w)
    monkeypatch.setenv("CAUSAL_CONV1D_STRICT", "sometimes")  # unknown: strict, and libcc1d says so once
    with caplog.at_level(logging.WARNING, logger="causal_conv1d"):
        with pytest.raises(StrictModeError):
            causal_conv1d_fn(x, w)
    assert any("CAUSAL_CONV1D_STRICT='sometimes'" in r.getMessage() for r in caplog.records)


def _x86_cpu():
    """(vendor, flags) from /proc/cpuinfo on Linux x86-64; None elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in info.splitlines()[:40] if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if "vendor_id" not in fields or "flags" not in fields:
        return None
    return fields["vendor_id"], set(fields["flags"].split())


@pytest.mark.skipif(_x86_cpu() is None, reason="reads the CPU's vendor and features from Linux's x86 /proc/cpuinfo")
def test_cpu_isa_choice(lib):
    """The cpu backend's SIMD build: the best the CPU runs, avx512bf16_div (silu divided) only on
    AMD's cores; CAUSAL_CONV1D_CPU_ISA takes the build it names wherever the CPU runs it, caps
    the choice below it, and an unknown name falls back to the baseline with a warning that
    lists the names."""
    from helpers import run_python

    vendor, flags = _x86_cpu()
    avx512 = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
    bf16 = avx512 and "avx512_bf16" in flags
    avx2 = {"avx2", "fma"} <= flags
    child = ("from causal_conv1d import _lib\n"
             "print(_lib.library().report()['backends']['cpu']['simd'])")

    def chosen(isa):
        r = run_python(child, env={"CAUSAL_CONV1D_CPU_ISA": isa, "CAUSAL_CONV1D_LOG_LEVEL": "warn"})
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()[-1], r.stderr

    best_x86 = "avx512" if avx512 else "avx2" if avx2 else "base"
    if bf16:
        best_x86 = "avx512bf16_div" if vendor == "AuthenticAMD" else "avx512bf16"
    assert chosen(None)[0] == best_x86
    assert chosen("avx512bf16_div")[0] == ("avx512bf16_div" if bf16 else best_x86)
    assert chosen("avx512bf16")[0] == ("avx512bf16" if bf16 else best_x86)
    assert chosen("avx2")[0] == ("avx2" if avx2 else "base")
    assert chosen("base")[0] == "base"
    name, err = chosen("sse9")
    assert name == "base"
    assert "CAUSAL_CONV1D_CPU_ISA=sse9 is not one of avx512bf16_div, avx512bf16, avx512, avx2, base" in err
