"""The argument packer: libcc1d_pyargs (C) writes the same bytes as the Python packer, declines
what libcc1d cannot describe (the Python packer then raises its error), and leaks nothing."""

import ctypes
import gc
import os
import sys
import sysconfig
import tracemalloc

import pytest
import torch

from causal_conv1d import _lib, _op_fwd, _op_update, _pack

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)


def c_pack():
    f = _pack.c_packer()
    if not f:
        headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
        if headers and _lib.library() is not None:
            pytest.fail(f"this Python has headers, so libcc1d_pyargs should have been built: {_pack.c_packer_state()}")
        pytest.skip(f"no C packer here: {_pack.c_packer_state()}")
    return f


def normalized(buf, packer, base=None) -> bytes:
    """The buffer's bytes with each tensor pointer made an offset from the buffer's start (base:
    where it was when packed, for a copy), cut after the present tensors' descriptors (the C
    packer's buffer has room for all of them)."""
    raw = bytearray(bytes(buf))
    base = ctypes.addressof(buf) if base is None else base
    present = 0
    for i in range(len(packer.tensors)):
        at = 8 + 8 * i
        p = int.from_bytes(raw[at:at + 8], sys.byteorder)
        if p:
            raw[at:at + 8] = (p - base).to_bytes(8, sys.byteorder)
            present += 1
    return bytes(raw[:packer.size + present * ctypes.sizeof(_lib.CTensor)])


def random_tensor(g, dtype):
    rank = int(torch.randint(0, 5, (), generator=g))
    shape = [int(torch.randint(0, 6, (), generator=g)) for _ in range(rank)]
    t = (torch.randn(shape, generator=g) * 10).to(dtype)
    kind = int(torch.randint(0, 4, (), generator=g))
    if kind == 1 and rank >= 2:
        t = t.transpose(0, rank - 1)
    elif kind == 2 and rank >= 1:
        t = t[..., ::2]
    elif kind == 3 and rank >= 1:
        t = t.expand(*t.shape) if rank == 0 else t.unsqueeze(0).expand(3, *t.shape).select(0, 1)
    return torch.nn.Parameter(t, requires_grad=False) if dtype.is_floating_point and kind == 0 else t


@pytest.mark.parametrize("struct", [_op_fwd.CFwdArgs, _op_update.CUpdateArgs], ids=["fwd", "update"])
def test_c_packer_writes_the_python_packers_bytes(struct):
    c_pack()
    p = _pack.packer(struct)
    g = torch.Generator().manual_seed(1234)
    for trial in range(300):
        tensors = tuple(None if torch.rand((), generator=g) < 0.3 else
                        random_tensor(g, DTYPES[int(torch.randint(0, 4, (), generator=g))]) for _ in p.tensors)
        scalars = [int(torch.randint(-5, 2 ** 31 - 1, (), generator=g)) for _ in p.scalars]
        scalars[-1] = int(torch.randint(0, 2 ** 62, (), generator=g))  # the stream: a pointer-sized value
        c, py = p.pack(tensors, scalars), p.pack_python(tensors, scalars)
        assert ctypes.sizeof(c) == ctypes.sizeof(p._full)  # the C path served it
        assert normalized(c, p) == normalized(py, p), f"trial {trial}: {[None if t is None else (t.dtype, t.shape, t.stride()) for t in tensors]}"


def recording_entry(size: int, status: int = 0):
    """(a C function pointer standing for an op's entry point, the list it appends each call's
    first `size` bytes and their address to); it returns `status`."""
    seen = []

    def entry(args):
        seen.append((ctypes.string_at(args, size), args))
        return status

    f = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(entry)
    recording_entry.keep.append(f)
    return ctypes.cast(f, ctypes.c_void_p).value, seen


recording_entry.keep = []


@pytest.mark.parametrize("struct", [_op_fwd.CFwdArgs, _op_update.CUpdateArgs], ids=["fwd", "update"])
def test_pack_call_hands_the_entry_the_python_packers_bytes(struct):
    """pack_call (the fast path's one call: pack, then the op's entry point) gives the entry the
    bytes pack_python writes, scalars included, with like= and without, and returns its status."""
    c_pack()
    p = _pack.packer(struct)
    entry, seen = recording_entry(ctypes.sizeof(p._full), status=-7)
    g = torch.Generator().manual_seed(4321)
    out = p.tensors.index("out")
    for trial in range(200):
        tensors = [None if torch.rand((), generator=g) < 0.3 else
                   random_tensor(g, DTYPES[int(torch.randint(0, 4, (), generator=g))]) for _ in p.tensors]
        like = None
        if trial % 2 and tensors[0] is not None:  # out made as the fast paths make it: empty_like(x)
            tensors[out], like = torch.empty_like(tensors[0].contiguous()), (out, 0)
            tensors[0] = tensors[0].contiguous()
        tensors = tuple(tensors)
        scalars = [int(torch.randint(-5, 2 ** 31 - 1, (), generator=g)) for _ in p.scalars]
        scalars[-1] = int(torch.randint(0, 2 ** 62, (), generator=g))
        assert _pack._c_call(entry, p.size, p._scalars_at, p._scalars.pack(*scalars), tensors, like) == -7
        raw, base = seen.pop()
        expected = normalized(p.pack_python(tensors, scalars), p)
        assert normalized(raw, p, base) == expected, f"trial {trial}, like={like}"


def test_pack_call_declines_before_calling_and_checks_its_layout():
    c_pack()
    p = _pack.packer(_op_update.CUpdateArgs)
    entry, seen = recording_entry(8)
    x = torch.randn(2, 8)
    sc = p._scalars.pack(1, 0, 0)
    call = _pack._c_call
    assert call(entry, p.size, p._scalars_at, sc, (x, torch.zeros(2, dtype=torch.float64)) + (None,) * 4 + (x,),
                None) is None
    assert call(entry, p.size, p._scalars_at, sc, (x, 7) + (None,) * 5, None) is None
    assert not seen, "a declined call reached the entry point"
    for bad in [(0, p.size, p._scalars_at, sc, (x,), None),           # no entry
                (entry, p.size, p.size - 1, sc, (x,), None),          # scalars past the header
                (entry, p.size, p._scalars_at, sc, (x,) * 40, None),  # past the buffer
                (entry, p.size, p._scalars_at, sc, (x, x), (0, 1)),   # like: j >= i
                (entry, p.size, p._scalars_at, sc, [x], None)]:       # not a tuple
        with pytest.raises(ValueError, match="pack_call"):
            call(*bad)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        call(entry, p.size)
    assert not seen


def test_the_fast_paths_call_through_pack_call(monkeypatch):
    """causal_conv1d_fn and causal_conv1d_update, eager on the cpu backend, make their one call
    into libcc1d through pack_call (not the Python packer and a ctypes call)."""
    c_pack()
    from causal_conv1d import causal_conv1d_fn, causal_conv1d_update

    lib = _lib.library()
    entry, seen = recording_entry(8, status=_lib.OK)
    names = []
    monkeypatch.setattr(lib, "entry_address", lambda name: names.append(name) or entry)
    monkeypatch.setattr(lib, "packed_entry", lambda name: pytest.fail(f"{name} called through ctypes"))
    x, w = torch.randn(2, 8, 16), torch.randn(8, 4)
    causal_conv1d_fn(x, w, activation="silu", backend="cpu")
    causal_conv1d_update(torch.randn(2, 8), torch.randn(2, 8, 4), w, backend="cpu")
    assert names == ["cc1d_causal_conv1d_fwd", "cc1d_causal_conv1d_update"] and len(seen) == 2


def test_pack_call_releases_the_gil_during_the_entry():
    """As ctypes does, so that other Python threads run during a long call. The entry here is
    PyGILState_Check itself: its status is 1 where the GIL was held."""
    c_pack()
    p = _pack.packer(_op_update.CUpdateArgs)
    check = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value
    assert ctypes.pythonapi.PyGILState_Check() == 1  # the probe works: held here
    assert _pack._c_call(check, p.size, p._scalars_at, p._scalars.pack(1, 0, 0), (torch.randn(2, 8),), None) == 0


@pytest.mark.parametrize("bad, error", [
    (torch.zeros(2, 3, dtype=torch.float64), TypeError),
    (torch.zeros(2, 3, dtype=torch.complex64), TypeError),
    (torch.zeros(1, 1, 1, 1, 2), ValueError),
    (torch.zeros(2, 3, device="meta"), ValueError),
    (7, AttributeError),
])
def test_c_packer_declines_what_the_python_packer_rejects(bad, error):
    f = c_pack()
    p = _pack.packer(_op_update.CUpdateArgs)
    x = torch.randn(2, 8)
    tensors = (x, bad, None, None, None, None, x)
    assert f(tensors, p._full(), p.size) == -1
    with pytest.raises(error) as from_pack:
        p.pack(tensors, [0, 0, 0])
    with pytest.raises(error) as from_python:
        p.pack_python(tensors, [0, 0, 0])
    assert str(from_pack.value) == str(from_python.value)


def test_c_packer_leaks_no_references_or_memory():
    c_pack()
    p = _pack.packer(_op_update.CUpdateArgs)
    x, s = torch.randn(2, 64, dtype=torch.bfloat16), torch.randn(2, 64, 4, dtype=torch.bfloat16)
    w = torch.randn(64, 4, dtype=torch.bfloat16)
    tensors = (x, s, w, None, None, None, torch.randn(3, dtype=torch.float64))  # the last one declined
    ok = tensors[:-1] + (x,)
    watched = (x, s, w, torch.bfloat16, torch.float64)
    gc.collect()
    gc.disable()  # a collection in between could drop other holders of these objects
    try:
        before = [sys.getrefcount(o) for o in watched]
        for _ in range(100):
            p.pack(ok, [1, 0, 0])
            with pytest.raises(TypeError):
                p.pack(tensors, [1, 0, 0])
        after = [sys.getrefcount(o) for o in watched]
    finally:
        gc.enable()
    assert after == before
    tracemalloc.start()
    try:
        snap = tracemalloc.take_snapshot()
        for _ in range(3000):
            p.pack(ok, [1, 0, 0])
        gc.collect()
        grown = sum(d.size_diff for d in tracemalloc.take_snapshot().compare_to(snap, "filename") if d.size_diff > 0)
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes more after 3000 packs"


def test_report_names_the_packer():
    from causal_conv1d._cmd_report import build_report

    state = build_report()["package"]["arg_packer"]
    assert state == _pack.c_packer_state() and state.split(" ")[0] in ("c", "python")


# One build of libcc1d_pyargs serves every CPython from 3.9 on (the limited API): loaded into the
# other CPythons found on PATH, with stand-in tensors (those Pythons have no torch), it must write
# the bytes the Python packer writes here for the same attributes.
# A tensor's five attributes, from ("float32", shape, strides, data pointer, CUDA index or None);
# `dtypes` maps the dtype's name to the object standing for it (torch's here, stand-ins there).
_STAND_IN = """
class StandIn:
    def __init__(self, dtype, shape, stride, ptr, cuda_index):
        self.dtype, self.shape, self._stride, self._ptr = dtypes[dtype], shape, stride, ptr
        self.is_cuda, self.is_cpu, self._index = cuda_index is not None, cuda_index is None, cuda_index
    def stride(self): return self._stride
    def data_ptr(self): return self._ptr
    def get_device(self): return self._index
"""
_CHILD = r"""
import ctypes, sys
dll = ctypes.PyDLL(sys.argv[1])
header = int(sys.argv[2])
init, pack = dll.cc1d_pyargs_init, dll.cc1d_pyargs_pack
init.argtypes, init.restype = [ctypes.py_object], ctypes.c_int
pack.argtypes, pack.restype = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int64], ctypes.c_int
dtypes = {name: type(name, (), {})() for name in ("float32", "float16", "bfloat16", "int32")}
init(tuple((dtypes[n], c) for n, c in eval(sys.argv[3])))
""" + _STAND_IN + r"""
tensors = tuple(None if d is None else StandIn(*d) for d in eval(sys.argv[4]))
buf = (ctypes.c_char * (header + len(tensors) * int(sys.argv[5])))()
print(pack(tensors, buf, header), ctypes.addressof(buf), bytes(buf).hex())
caller = dll.cc1d_pyargs_caller
caller.restype = ctypes.py_object
seen = []
entry = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda p: seen.append((p, ctypes.string_at(p, len(buf)))) or 5)
status = caller()(ctypes.cast(entry, ctypes.c_void_p).value, header, int(sys.argv[6]), bytes.fromhex(sys.argv[7]),
                  tensors, None)
print(status, seen[0][0], seen[0][1].hex())
"""


def _other_cpythons():
    """One interpreter per CPython 3.9+ minor version other than this one: on PATH, or pyenv's."""
    import glob
    import shutil
    import subprocess

    pyenv = os.path.join(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), "versions")
    found = {}
    for minor in range(9, 16):
        if minor == sys.version_info[1]:
            continue
        for exe in [shutil.which(f"python3.{minor}")] + sorted(glob.glob(f"{pyenv}/3.{minor}.*/bin/python3.{minor}")):
            try:  # a pyenv shim of a version that is not active fails here
                r = subprocess.run([exe, "-c", "import sys; print(sys.implementation.name, sys.version_info[1])"],
                                   capture_output=True, text=True, timeout=60)
            except (subprocess.SubprocessError, OSError, TypeError):
                continue
            if r.returncode == 0 and r.stdout.split() == ["cpython", str(minor)]:
                found[minor] = exe
                break
    return list(found.values())


def test_one_c_packer_build_serves_every_cpython():
    import subprocess

    c_pack()
    others = _other_cpythons()
    if not others:
        pytest.skip("no other CPython 3.9+ on PATH to load libcc1d_pyargs into")
    p = _pack.packer(_op_update.CUpdateArgs)
    descs = [("bfloat16", (2, 4096), (4096, 1), 0x7f0000001000, None),
             ("bfloat16", (3, 4096, 4), (16384, 4, 1), 0x7f0000100000, 1),
             None,
             ("float32", (), (), 0, None),
             ("int32", (5,), (2,), 0x2000, None),
             None,
             ("float16", (1, 2, 3, 4), (-24, 12, 0, 1), 0x10, 3)]
    here = {"dtypes": {n: getattr(torch, n) for n in ("float32", "float16", "bfloat16", "int32")}}
    exec(_STAND_IN, here)
    scalars = [1, 2, 0x7f00deadbeef]
    expected = normalized(p.pack_python(tuple(None if d is None else here["StandIn"](*d) for d in descs), scalars), p)
    codes = [(str(k).replace("torch.", ""), v) for k, v in _pack._dtype_codes().items()]
    path = os.path.join(os.path.dirname(_lib.library().path), _pack.PYARGS_FILE)
    for exe in others:
        r = subprocess.run([exe, "-c", _CHILD, path, str(p.size), repr(codes), repr(descs),
                            str(ctypes.sizeof(_lib.CTensor)), str(p._scalars_at), p._scalars.pack(*scalars).hex()],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{exe}: {r.stderr}"
        rc, base, raw, status, call_base, call_raw = r.stdout.split()
        assert rc == "0", f"{exe} declined the stand-ins"
        raw = bytearray(bytes.fromhex(raw))
        raw[p._scalars_at:p.size] = bytes.fromhex(call_raw)[p._scalars_at:p.size]  # pack() leaves the scalars
        assert normalized(raw, p, int(base)) == expected, f"{exe} packed other bytes"
        assert status == "5", f"{exe}: pack_call returned {status}, not the entry's status"
        assert normalized(bytes.fromhex(call_raw), p, int(call_base)) == expected, f"{exe}: pack_call, other bytes"
