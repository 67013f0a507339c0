"""cc1d_torch, the libtorch op library, and its handshake: Python loads it only when its build
record matches the running torch and every symbol it imports is exported, checked before dlopen;
otherwise it says why (debug log, doctor) and the ctypes path serves. Tested by editing the record
of the built library, and on small ELF files built here."""

import json
import shutil
import subprocess

import pytest
import torch

from causal_conv1d import _elf, _lib, _torch_lib
from helpers import run_python

RUNNING = ("2.15.0+cu132", "13.2", 1)
STABLE = {"cc1d_version": "0.2.0", "abi": "stable", "torch_version": "2.15.0+cu132", "torch_min": "2.10",
          "torch_cuda": "13.2", "cxx11_abi": 1, "ops": ["fwd", "update"]}
CLASSIC = dict(STABLE, abi="classic", torch_min="2.15")


@pytest.mark.parametrize("record, running, cc1d, reason", [
    (STABLE, RUNNING, "0.2.0", None),
    (STABLE, ("2.10.1", None, 0), "0.2.0", None),  # the stable ABI: any newer torch, any CUDA, any C++ ABI
    (STABLE, ("2.9.0+cu126", "12.6", 1), "0.2.0", "stable ABI of torch >= 2.10, running 2.9.0+cu126"),
    (CLASSIC, RUNNING, "0.2.0", None),
    (CLASSIC, ("2.11.0+cu132", "13.2", 1), "0.2.0", "built for torch 2.15 cu13 cxx11, running torch 2.11 cu13 cxx11"),
    (CLASSIC, ("2.15.0+cu132", "13.2", 0), "0.2.0", "running torch 2.15 cu13 pre-cxx11"),
    (CLASSIC, ("2.15.0+cpu", None, 1), "0.2.0", "running torch 2.15 cpu cxx11"),
    (CLASSIC, ("2.15.0+cu126", "12.6", 1), "0.2.0", "running torch 2.15 cu12 cxx11"),
    (STABLE, RUNNING, "0.3.0", "built with libcc1d 0.2.0, this process loaded libcc1d 0.3.0"),
    (STABLE, RUNNING, None, "libcc1d is not loaded"),
    ({k: v for k, v in STABLE.items() if k != "torch_min"}, RUNNING, "0.2.0", "lacks torch_min"),
    (dict(STABLE, abi="future"), RUNNING, "0.2.0", "unknown ABI 'future'"),
])
def test_recorded_facts_against_the_running_torch(record, running, cc1d, reason):
    got = _torch_lib.facts_mismatch(record, running, cc1d)
    assert (got is None) if reason is None else (reason in (got or "")), got


def test_torch_symbol_names():
    for name in ("_ZN3c1019UndefinedTensorImpl10_singletonE", "_ZNK2at10TensorBase4sizeEl", "aoti_torch_empty_strided",
                 "torch_call_dispatcher", "_ZN5torch8autograd12VariableInfoC1Ev", "_Z16THPVariable_WrapRKN2at10TensorBaseE",
                 "_ZTVN3c1011StorageImplE"):
        assert _torch_lib.is_torch_symbol(name), name
    for name in ("malloc", "_ZNSt6vectorIiSaIiEE9push_backERKi", "cc1d_version", "_ZN5c10xx3fooEv", "PyInit__C"):
        assert not _torch_lib.is_torch_symbol(name), name


# ---- ELF files built here --------------------------------------------------------------------


def _compile(tmp_path, name: str, source: str, *flags) -> str:
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the test's shared objects")
    src = tmp_path / f"{name}.cpp"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run([cxx, "-shared", "-fPIC", str(src), "-o", str(out), *flags], check=True, capture_output=True)
    return str(out)


def _torch_lib_dir() -> str:
    return _torch_lib._torch_lib_dir()


def test_a_planted_torch_symbol_is_found_before_dlopen(tmp_path, lib):
    so = _compile(tmp_path, "libplanted.so", """
namespace c10 { void cc1d_planted_symbol(int); }
namespace c10 { namespace detail { [[noreturn]] void torchCheckFail(const char*, const char*, unsigned, const char*); } }
extern "C" void use() { c10::cc1d_planted_symbol(1); c10::detail::torchCheckFail("a", "b", 1, "c"); }
""", f"-L{_torch_lib_dir()}", "-Wl,--no-as-needed", "-lc10")
    with _elf.ElfFile(so) as f:
        assert "libc10.so" in f.needed()
        assert "_ZN3c1019cc1d_planted_symbolEi" in f.undefined()
    why = _torch_lib.symbols_mismatch(so, _torch_lib_dir(), lib.path)
    assert why is not None and "1 symbol(s) the running libtorch does not export" in why
    assert "_ZN3c1019cc1d_planted_symbolEi" in why  # torchCheckFail is exported: only the planted one


def test_a_library_needing_another_libcc1d_is_refused(tmp_path, lib):
    other = _compile(tmp_path, "libcc1d.so.7", "extern \"C\" int cc1d_other() { return 7; }", "-Wl,-soname,libcc1d.so.7")
    so = _compile(tmp_path, "libneeds.so", "extern \"C\" int cc1d_other(); extern \"C\" int f() { return cc1d_other(); }",
                  other, "-Wl,--no-as-needed")
    why = _torch_lib.symbols_mismatch(so, _torch_lib_dir(), lib.path)
    assert why is not None and "it needs libcc1d.so.7" in why


def test_a_library_importing_what_libcc1d_lacks_is_refused(tmp_path, lib):
    so = _compile(tmp_path, "libimports.so", "extern \"C\" int cc1d_no_such_entry(); extern \"C\" int f() "
                                            "{ return cc1d_no_such_entry(); }")
    why = _torch_lib.symbols_mismatch(so, _torch_lib_dir(), lib.path)
    assert why is not None and "cc1d_no_such_entry" in why


def test_elf_reader_rejects_what_is_not_a_shared_object(tmp_path):
    bad = tmp_path / "libnot.so"
    bad.write_text("not an ELF file")
    with pytest.raises(_elf.ElfError, match="not an ELF file"):
        _elf.ElfFile(str(bad))
    assert _elf.read_needed(str(bad)) is None
    (tmp_path / "empty.so").write_bytes(b"")
    assert _elf.read_needed(str(tmp_path / "empty.so")) is None


def _beside(path) -> str:
    """The libcc1d built with cc1d_torch (the one it links): the children below load this pair,
    whatever libcc1d this process runs (an installed wheel's, say, which cc1d_torch refuses)."""
    return str(path.parent / "libcc1d.so")


def _built_for_this_torch(path, lib) -> dict:
    record = _torch_lib.read_record(str(path))
    why = _torch_lib.facts_mismatch(record, _lib.torch_facts(), lib.version)
    if why is not None:  # a build against another torch (the same tests run under torch 2.1)
        pytest.skip(f"the built cc1d_torch does not fit this torch: {why}")
    return record


def test_the_built_library_passes(cc1d_torch_path, lib):
    record = _built_for_this_torch(cc1d_torch_path, lib)
    assert _torch_lib.symbols_mismatch(str(cc1d_torch_path), _torch_lib_dir(), _beside(cc1d_torch_path)) is None
    assert record["ops"] == list(_lib.OP_IDS)


# ---- the handshake end to end, by editing the record --------------------------------------------

STATUS = r"""
import json, torch, causal_conv1d
from causal_conv1d import _lib, _ops, _torch_lib
x = torch.randn(2, 8, 30); w = torch.randn(8, 4)
y = causal_conv1d.causal_conv1d_fn(x, w, activation="silu")
ref = causal_conv1d.causal_conv1d_ref(x.double(), w.double(), activation="silu")
print(json.dumps({"status": _torch_lib.status(), "mode": _ops.mode("fwd"), "err": float((y.double() - ref).abs().max()),
                  "schemas": [str(getattr(torch.ops.causal_conv1d, op).default._schema) for op in _lib.OP_IDS],
                  "choice": causal_conv1d.last_backend().reason}))
"""


def _copy(cc1d_torch_path, tmp_path, edit=None):
    lib = tmp_path / "libcc1d_torch.so"
    shutil.copy(cc1d_torch_path, lib)
    record = json.loads(cc1d_torch_path.with_suffix(".json").read_text())
    if edit is not None:
        edit(record)
    (tmp_path / "libcc1d_torch.json").write_text(json.dumps(record))
    return lib


def _run(lib, built):
    r = run_python(STATUS, env={"CAUSAL_CONV1D_TORCH_LIBRARY": lib, "CAUSAL_CONV1D_LIBRARY": _beside(built),
                                "CAUSAL_CONV1D_LOG_LEVEL": "debug"})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_matching_record_loads_and_serves(cc1d_torch_path, tmp_path, lib):
    _built_for_this_torch(cc1d_torch_path, lib)
    res, _ = _run(_copy(cc1d_torch_path, tmp_path), cc1d_torch_path)
    assert res["status"]["loaded"] and res["mode"] == "cc1d_torch", res["status"]
    assert res["err"] < 1e-5 and res["choice"].startswith("auto: cpu tensors are served by libcc1d CPU kernels")
    # The C++ schemas are the Python ones, character for character.
    assert res["schemas"] == [str(getattr(torch.ops.causal_conv1d, op).default._schema) for op in _lib.OP_IDS]


def _edit(**changes):
    return lambda record: record.update(changes)


@pytest.mark.parametrize("edit, reason", [
    (_edit(abi="stable", torch_min="2.99"), "stable ABI of torch >= 2.99, running " + torch.__version__),
    (_edit(abi="classic", torch_version="2.11.0+cu132", torch_cuda="13.2", torch_min="2.11"),
     "cc1d_torch built for torch 2.11 cu13 cxx11, running " + _torch_lib._describe(*_lib.torch_facts())),
    (_edit(abi="classic", torch_cuda="13.2", cxx11_abi=0), "cu13 pre-cxx11, running torch"),
    (_edit(cc1d_version="0.1.0"), "built with libcc1d 0.1.0"),
    (lambda record: record.clear(), "its build record lacks cc1d_version"),
], ids=["stable-too-new", "classic-other-torch", "classic-other-abi", "other-libcc1d", "empty-record"])
def test_an_edited_record_keeps_the_ctypes_path(cc1d_torch_path, tmp_path, edit, reason):
    res, log = _run(_copy(cc1d_torch_path, tmp_path, edit), cc1d_torch_path)
    st = res["status"]
    assert not st["loaded"] and reason in st["reason"], st
    assert res["mode"] != "cc1d_torch" and res["err"] < 1e-5  # the ctypes path served
    assert reason in log and "the ctypes path serves" in log  # said at debug level


def test_a_missing_record_keeps_the_ctypes_path(cc1d_torch_path, tmp_path):
    lib = tmp_path / "libcc1d_torch.so"
    shutil.copy(cc1d_torch_path, lib)
    res, _ = _run(lib, cc1d_torch_path)
    assert not res["status"]["loaded"] and "has no build record" in res["status"]["reason"]


def test_off_disables(cc1d_torch_path):
    res, _ = _run("off", cc1d_torch_path)
    assert res["status"] == {"path": None, "loaded": False, "record": None,
                             "reason": "disabled (CAUSAL_CONV1D_TORCH_LIBRARY=off)"}


def test_translate_keeps_the_exception_types():
    from causal_conv1d import StrictModeError

    e = _torch_lib.translate(RuntimeError("causal_conv1d: argument 'x' ... [CC1D_ERR_INVALID_ARGUMENT]"))
    assert isinstance(e, ValueError) and isinstance(e, _lib.LibraryError) and e.status == _lib.ERR_INVALID_ARGUMENT
    assert isinstance(_torch_lib.translate(RuntimeError("... [CC1D_ERR_INVALID_TYPE]")), TypeError)
    e = _torch_lib.translate(RuntimeError("causal_conv1d: backend 'nvrtc' ... [CC1D_ERR_BACKEND_UNAVAILABLE]"))
    assert isinstance(e, _lib.BackendUnavailableError) and e.status == _lib.ERR_BACKEND_UNAVAILABLE
    assert isinstance(_torch_lib.translate(RuntimeError("x. (CAUSAL_CONV1D_STRICT=1 forbids the fallback.)")),
                      StrictModeError)
    plain = RuntimeError("something else")
    assert _torch_lib.translate(plain) is plain


SERVES = r"""
import json, torch, causal_conv1d
from causal_conv1d import causal_conv1d_update, causal_conv1d_update_ref
g = torch.Generator().manual_seed(3)
out = {}
x = torch.randn(3, 16, 2, generator=g); w = torch.randn(16, 4, generator=g); b = torch.randn(16, generator=g)
state = torch.randn(5, 16, 6, generator=g); cache = torch.tensor([1, 7, 0], dtype=torch.int32)
idx = torch.tensor([4, -1, 0], dtype=torch.int32)
for backend in ("cpu", "aten", "emulate"):
    s1, s2 = state.clone(), state.double()
    y = causal_conv1d_update(x, s1, w, b, "silu", cache, idx, backend=backend)
    r = causal_conv1d_update_ref(x.double(), s2, w.double(), b.double(), "silu", cache, idx)
    out[backend] = [float((y.double() - r).abs().max()), bool(torch.equal(s1.double(), s2)),
                    causal_conv1d.last_backend().backend]
with causal_conv1d.use_backend("aten"):
    causal_conv1d.causal_conv1d_fn(x, w)
out["context"] = [causal_conv1d.last_backend().backend, causal_conv1d.last_backend().source]
try:
    causal_conv1d_update(x, state, w, b, "silu", None, torch.tensor([9, 0, 1], dtype=torch.int32), backend="aten")
except ValueError as e:
    out["bad_index"] = str(e)
print(json.dumps(out))
"""


def test_cc1d_torch_serves_like_the_ctypes_path(cc1d_torch_path, lib):
    """The update on every host backend (the ATen reference included) against the float64
    reference, use_backend() and last_backend(), and an invalid index as a ValueError, through
    cc1d_torch's C++ ops."""
    _built_for_this_torch(cc1d_torch_path, lib)
    r = run_python(SERVES, env={"CAUSAL_CONV1D_TORCH_LIBRARY": cc1d_torch_path,
                                "CAUSAL_CONV1D_LIBRARY": _beside(cc1d_torch_path)})
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for backend in ("cpu", "aten", "emulate"):
        err, state_ok, served = res[backend]
        assert err < 1e-5 and state_ok and served == backend, (backend, res[backend])
    assert res["context"] == ["aten", "use_backend()"]
    assert "conv_state_indices[0]" in res["bad_index"] and "CC1D_ERR_INVALID_ARGUMENT" in res["bad_index"]
