"""Torch tensors to libcc1d's C structs: the cc1d_tensor descriptor and an op's argument struct.

Every op's argument struct (cc1d.h) is `struct_size`, then its `const cc1d_tensor*` members,
then its scalars. ArgPacker packs such a struct and one cc1d_tensor per present tensor into a
single buffer with one struct.pack_into call (the format is made once per pattern of ranks and
absent arguments): setting ctypes fields one by one costs tens of microseconds per call.

Each descriptor carries its own tensor's device, so libcc1d's validation sees a tensor on the
wrong device. A tensor libcc1d cannot describe (a dtype or device it has no code for, a rank
above MAX_RANK, a sparse layout) raises here; the op's own validation words that error for
users, which is why the ops validate in Python before the slow path packs.

ArgPacker.pack does the same in C where it can: libcc1d_pyargs (python/pyargs/pyargs.c, built
beside libcc1d when Python's headers were found) writes the same bytes in about half the time,
since reading each tensor's attributes from Python was most of the cost. ArgPacker.call, the
ops' fast path, packs and calls the op's entry point in one call into it: a Python function of
libcc1d_pyargs's, where two ctypes calls cost more than the packing. Where it is absent or
declines a tensor, pack_python runs; c_packer_state() says which (`causal-conv1d report`).
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys
import sysconfig
import threading
from typing import Optional, Sequence

from . import _lib
from ._lib import BFLOAT16, DEVICE_CPU, DEVICE_CUDA, FLOAT16, FLOAT32, INT32, MAX_RANK, CTensor

_DTYPE_CODES: dict = {}


def _dtype_codes() -> dict:
    import torch

    _DTYPE_CODES.update({torch.float32: FLOAT32, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16,
                         torch.int32: INT32})
    return _DTYPE_CODES


def dtype_code(dtype) -> int:
    try:
        return (_DTYPE_CODES or _dtype_codes())[dtype]
    except KeyError:
        raise TypeError(f"libcc1d has no element type for {dtype}; expected float32, float16, "
                        f"bfloat16 (or int32 for indices)") from None


def device_codes(device) -> tuple:
    if device.type == "cpu":
        return DEVICE_CPU, 0
    if device.type == "cuda":
        return DEVICE_CUDA, 0 if device.index is None else int(device.index)
    raise ValueError(f"libcc1d serves cpu and cuda tensors; got a tensor on {device}")


def tensor_struct(t, *, dtype: Optional[int] = None, device: Optional[tuple] = None,
                  shape: Optional[Sequence[int]] = None, strides: Optional[Sequence[int]] = None,
                  data: Optional[int] = None) -> CTensor:
    """Describes torch tensor `t` as a cc1d_tensor. Keyword overrides exist for ABI tests."""
    s = CTensor()
    shape = tuple(t.shape) if shape is None else tuple(shape)
    strides = tuple(t.stride()) if strides is None else tuple(strides)
    if len(shape) > MAX_RANK or len(strides) != len(shape):
        raise ValueError(f"cc1d_tensor holds rank 0..{MAX_RANK} with one stride per dim; got shape "
                         f"{shape} and strides {strides}")
    ptr = t.data_ptr() if data is None else data
    s.data = ptr if ptr else None
    s.dtype = dtype_code(t.dtype) if dtype is None else dtype
    s.device_type, s.device_index = device_codes(t.device) if device is None else device
    s.ndim = len(shape)
    for i, (n, st) in enumerate(zip(shape, strides)):
        s.shape[i] = n
        s.strides[i] = st
    return s


# One cc1d_tensor per rank: unused shape and stride slots are pad bytes, left zero.
_TENSOR_FORMATS = [f"Piiii{n}q{8 * (MAX_RANK - n)}x{n}q{8 * (MAX_RANK - n)}x" for n in range(MAX_RANK + 1)]
_TENSOR_BYTES = ctypes.sizeof(CTensor)
assert all(struct.calcsize("@" + f) == _TENSOR_BYTES for f in _TENSOR_FORMATS), "cc1d_tensor layout mismatch"
_SCALAR_FORMATS = {ctypes.c_uint32: "I", ctypes.c_int32: "i", ctypes.c_void_p: "P"}
_STANDARD_FORMATS = {ctypes.c_uint32: "I", ctypes.c_int32: "i",
                     ctypes.c_void_p: {8: "Q", 4: "I"}[ctypes.sizeof(ctypes.c_void_p)]}


class ArgPacker:
    """Packs one op's argument struct (a ctypes.Structure: struct_size, the tensor pointers, the
    scalars) with its tensors' descriptors after it, in one buffer."""

    def __init__(self, struct_type):
        self.struct_type = struct_type
        self.size = ctypes.sizeof(struct_type)
        fields = struct_type._fields_
        tensor_type = ctypes.POINTER(CTensor)
        self.tensors = tuple(n for n, t in fields if t is tensor_type)
        self.scalars = tuple(n for n, t in fields[1 + len(self.tensors):])
        assert fields[0][0] == "struct_size" and all(t is tensor_type for _, t in fields[1:1 + len(self.tensors)]) \
            and all(t is not tensor_type for _, t in fields[1 + len(self.tensors):]), \
            f"{struct_type.__name__}: expected struct_size, the tensor pointers, then the scalars"
        # The header's format with "{}" for each tensor pointer: "P", or 8 pad bytes (NULL) when absent.
        fmt, at = "@", 0
        for name, ctype in fields:
            offset = getattr(struct_type, name).offset
            fmt += f"{offset - at}x" + ("{}" if ctype is tensor_type else _SCALAR_FORMATS[ctype])
            at = offset + ctypes.sizeof(ctype)
        self._header = fmt + f"{self.size - at}x"
        assert struct.calcsize(self._header.format(*["P"] * len(self.tensors))) == self.size, \
            f"{struct_type.__name__}: layout mismatch"
        self._formats: dict = {}  # ranks (None for an absent tensor) -> _format()
        # For the C packer: a buffer with room for every tensor, and the scalars alone (standard
        # sizes, explicit padding: they start at an offset that native alignment would not see).
        self._full = ctypes.c_char * (self.size + len(self.tensors) * _TENSOR_BYTES)
        self._scalars_at = getattr(struct_type, self.scalars[0]).offset if self.scalars else self.size
        fmt, at = "=", self._scalars_at
        for name in self.scalars:
            ctype = dict(fields)[name]
            offset = getattr(struct_type, name).offset
            fmt += f"{offset - at}x" + _STANDARD_FORMATS[ctype]
            at = offset + ctypes.sizeof(ctype)
        self._scalars = struct.Struct(fmt)

    def _format(self, ranks: tuple):
        """(struct.Struct of the whole buffer, its ctypes array type, the offsets of the present
        tensors' descriptors from the buffer's start) for this pattern of ranks."""
        f = self._formats.get(ranks)
        if f is None:
            header = self._header.format(*["8x" if r is None else "P" for r in ranks])
            fmt = struct.Struct(header + "".join(_TENSOR_FORMATS[r] for r in ranks if r is not None))
            n = sum(r is not None for r in ranks)
            f = self._formats[ranks] = (fmt, ctypes.c_char * fmt.size,
                                        tuple(self.size + i * _TENSOR_BYTES for i in range(n)))
        return f

    def pack(self, tensors: Sequence, scalars: Sequence, like: Optional[tuple] = None):
        """The buffer for `tensors` (in the struct's order, None for an absent one) and `scalars`
        (ints, in order). like=(i, j), j < i: tensors[i] has tensors[j]'s shape, strides, dtype
        and device (as torch.empty_like makes them from a contiguous tensor), so pack_python
        reads only its data pointer. Raises TypeError/ValueError for a tensor libcc1d cannot
        describe. Packed by libcc1d_pyargs when it is loaded and tensors is a tuple (as every
        caller in the package passes them)."""
        f = _c_pack if _c_pack is not None else c_packer()
        if f and type(tensors) is tuple:
            buf = self._full()  # zeroed: absent pointers and unused shape slots stay 0
            if not f(tensors, buf, self.size):
                self._scalars.pack_into(buf, self._scalars_at, *scalars)
                return buf
        return self.pack_python(tensors, scalars, like)

    def call(self, entry: str, tensors: tuple, scalars: Sequence, like: Optional[tuple] = None) -> int:
        """libcc1d's `entry` (an op's entry point, e.g. "cc1d_causal_conv1d_fwd") called with
        pack(tensors, scalars, like); returns its raw status. libcc1d_pyargs's pack_call does both
        in one call, the GIL released during the entry as ctypes releases it. Raises as pack()."""
        lib = _lib.library()
        f = _c_pack if _c_pack is not None else c_packer()
        if f and type(tensors) is tuple:
            status = _c_call(lib.entry_address(entry), self.size, self._scalars_at, self._scalars.pack(*scalars),
                             tensors, like)
            if status is not None:
                return status
        return lib.packed_entry(entry)(self.pack_python(tensors, scalars, like))

    def pack_python(self, tensors: Sequence, scalars: Sequence, like: Optional[tuple] = None):
        """pack() in Python: the same bytes but for where the descriptors start (each present
        tensor's follows the header in order either way, in a buffer sized for the present ones)."""
        codes = _DTYPE_CODES or _dtype_codes()
        copy_to, copy_from = like or (-1, -1)
        ranks, descs, i, src = [], [], -1, None
        for t in tensors:
            i += 1
            if t is None:
                ranks.append(None)
                continue
            if i == copy_to:
                ranks.append(src[4])
                descs += (t.data_ptr(), *src[1:])
                continue
            shape = t.shape
            n = len(shape)
            if n > MAX_RANK:
                raise ValueError(f"cc1d_tensor holds rank 0..{MAX_RANK}; got shape {tuple(shape)}")
            dt = codes.get(t.dtype)
            if dt is None:
                dtype_code(t.dtype)  # raises the TypeError
            if t.is_cuda:
                dev, index = DEVICE_CUDA, t.get_device()
            elif t.is_cpu:
                dev, index = DEVICE_CPU, 0
            else:
                raise ValueError(f"libcc1d serves cpu and cuda tensors; got a tensor on {t.device}")
            ranks.append(n)
            d = (t.data_ptr(), dt, dev, index, n, *shape, *t.stride())
            if i == copy_from:
                src = d
            descs += d
        fmt, array, offsets = self._format(tuple(ranks))
        buf = array()  # zeroed: absent pointers and unused shape slots stay 0
        fmt.pack_into(buf, 0, self.size, *map(ctypes.addressof(buf).__add__, offsets), *scalars, *descs)
        return buf


_packers: dict = {}


def packer(struct_type) -> ArgPacker:
    p = _packers.get(struct_type)
    if p is None:
        p = _packers[struct_type] = ArgPacker(struct_type)
    return p


def fill_args(struct_type, tensors: dict, **scalars):
    """An op's argument struct packed with its tensors (name -> tensor or None; names not given
    are NULL) and its scalars by name (absent or None: 0). Pass the buffer to Library.call;
    struct_type.from_buffer(buf) reads it back. The buffer holds the tensors' data pointers, and
    references to the tensors (`buf.tensors`), so a tensor made for the call lives as long as the
    buffer: a temporary once made the packed calls read freed memory."""
    p = packer(struct_type)
    unknown = tensors.keys() - set(p.tensors)
    if unknown:
        raise KeyError(f"{struct_type.__name__} has no tensor field {', '.join(sorted(unknown))}")
    ordered = tuple(tensors.get(n) for n in p.tensors)
    buf = p.pack(ordered, [scalars.get(n) or 0 for n in p.scalars])
    buf.tensors = ordered  # a ctypes array takes attributes
    return buf


# ---- libcc1d_pyargs ---------------------------------------------------------------------------

PYARGS_FILE = "libcc1d_pyargs.so"  # beside libcc1d (CMake's target cc1d_pyargs)
_PYARGS_ABI = 2 << 16 | _TENSOR_BYTES  # pyargs.c: cc1d_pyargs_abi()
_c_pack = None  # its cc1d_pyargs_pack once c_packer() has looked; False where it cannot load
_c_call = None  # its pack_call, where _c_pack is loaded
_c_pack_state = "not looked for yet"
_c_pack_lock = threading.Lock()


def _load_c_packer() -> tuple:
    """(cc1d_pyargs_pack as a ctypes function, or False; its pack_call or None; a line saying
    which packer and why)."""
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    if sys.implementation.name != "cpython" or free_threaded:
        return False, None, (f"python (libcc1d_pyargs needs CPython with the GIL; this is "
                             f"{sys.implementation.name} {platform.python_version()}"
                             f"{' free-threaded' if free_threaded else ''})")
    lib = _lib.library()
    if lib is None:
        return False, None, "python (libcc1d is not loaded)"
    path = os.path.join(os.path.dirname(lib.path), PYARGS_FILE)
    if not os.path.exists(path):
        return False, None, f"python ({path} does not exist: it is built where Python's headers are found)"
    try:
        dll = ctypes.PyDLL(path)  # PyDLL: called with the GIL held, as the Python API needs
        abi = dll.cc1d_pyargs_abi()
        if abi != _PYARGS_ABI:
            return False, None, (f"python ({path} has interface {abi:#x}, this package {_PYARGS_ABI:#x}: it "
                                 f"comes from another build; reinstall causal-conv1d)")
        init = dll.cc1d_pyargs_init
        init.argtypes, init.restype = [ctypes.py_object], ctypes.c_int
        init(tuple((_DTYPE_CODES or _dtype_codes()).items()))
        f = dll.cc1d_pyargs_pack
        f.argtypes, f.restype = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int64], ctypes.c_int
        caller = dll.cc1d_pyargs_caller
        caller.argtypes, caller.restype = [], ctypes.py_object
        pack_call = caller()
    except (OSError, AttributeError, ValueError, TypeError) as e:
        return False, None, f"python ({path} cannot be used: {e})"
    return f, pack_call, f"c ({path})"


def c_packer():
    """libcc1d_pyargs's pack function, loaded on first use; False where it cannot be."""
    global _c_pack, _c_call, _c_pack_state
    with _c_pack_lock:
        if _c_pack is None:
            _c_pack, _c_call, _c_pack_state = _load_c_packer()
    return _c_pack


def c_packer_state() -> str:
    """Which packer the fast paths use: "c (path)" or "python (why not C)"."""
    c_packer()
    return _c_pack_state
