"""ctypes binding of libcc1d, the C runtime (runtime/include/cc1d/cc1d.h).

Nothing here links libtorch: tensors are described to the library by data pointer, dtype,
device, shape and strides (in elements), and CUDA work is queued on the caller's stream. This
module knows no op: each op module packs its own argument struct (_pack.py) and calls
`Library.call`.

The constants below are copies of cc1d.h's; tests/python/test_c_abi.py parses the header and
proves they match. The backend and op names are read from the loaded library.

The library is looked up, in order:
  1. CAUSAL_CONV1D_LIBRARY (a path to the .so) when set, and only there;
  2. causal_conv1d/lib/libcc1d.so next to this file (what `pip install .` puts there).
Loading never raises: `load()` returns the Library or None and records the reason in
`load_error()`; the package decides whether that is a warning or (strict mode) an error.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import logging
import os
import threading
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from ._diag import logger

ABI_VERSION = 1
MAX_RANK = 4
MAX_WIDTH = 8
MAX_BACKENDS = 8
MAX_VARLEN_STATE_LEN = 1048576

# cc1d_status
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_INVALID_TYPE = 2
ERR_NULL_POINTER = 3
ERR_UNSUPPORTED = 4
ERR_BACKEND_UNAVAILABLE = 5
ERR_COMPILE = 6
ERR_CUDA = 7
ERR_BUFFER_TOO_SMALL = 8
ERR_INTERNAL = 9
STATUS_NAMES = {
    OK: "CC1D_OK",
    ERR_INVALID_ARGUMENT: "CC1D_ERR_INVALID_ARGUMENT",
    ERR_INVALID_TYPE: "CC1D_ERR_INVALID_TYPE",
    ERR_NULL_POINTER: "CC1D_ERR_NULL_POINTER",
    ERR_UNSUPPORTED: "CC1D_ERR_UNSUPPORTED",
    ERR_BACKEND_UNAVAILABLE: "CC1D_ERR_BACKEND_UNAVAILABLE",
    ERR_COMPILE: "CC1D_ERR_COMPILE",
    ERR_CUDA: "CC1D_ERR_CUDA",
    ERR_BUFFER_TOO_SMALL: "CC1D_ERR_BUFFER_TOO_SMALL",
    ERR_INTERNAL: "CC1D_ERR_INTERNAL",
}

# cc1d_dtype
FLOAT32 = 0
FLOAT16 = 1
BFLOAT16 = 2
INT32 = 3

# cc1d_device_type
DEVICE_CPU = 0
DEVICE_CUDA = 1

# cc1d_backend, by name (cc1d_backend_name of the loaded library must agree)
BACKEND_IDS = {"auto": 0, "cpu": 1, "nvrtc": 2, "emulate": 3, "aten": 4}
BACKEND_NAMES = {v: k for k, v in BACKEND_IDS.items()}

# cc1d_op, by name (cc1d_op_name must agree)
OP_IDS = {"fwd": 0, "update": 1, "bwd": 2, "varlen_states": 3}

# cc1d_cache_cmd, by name
CACHE_COMMANDS = {"path": 0, "stats": 1, "list": 2, "verify": 3, "clear": 4}

# cc1d_source
SOURCE_NAMES = {0: "argument", 1: "CAUSAL_CONV1D_BACKEND", 2: "default"}

# cc1d_activation
ACT_NONE = 0
ACT_SILU = 1

# cc1d_log_level -> logging levels
LOG_LEVELS = {0: 5, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR, 5: logging.CRITICAL + 10}


class CTensor(ctypes.Structure):
    """struct cc1d_tensor."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


class CCandidate(ctypes.Structure):
    """struct cc1d_candidate."""

    _fields_ = [
        ("backend", ctypes.c_int32),
        ("available", ctypes.c_int32),
        ("host_copies", ctypes.c_int32),
        ("runs_in_host", ctypes.c_int32),
        ("reason", ctypes.c_char_p),
    ]


class CPlan(ctypes.Structure):
    """struct cc1d_plan."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("requested", ctypes.c_int32),
        ("source", ctypes.c_int32),
        ("strict", ctypes.c_int32),
        ("count", ctypes.c_int32),
        ("candidates", CCandidate * MAX_BACKENDS),
    ]


_I32P = ctypes.POINTER(ctypes.c_int32)


class CPrecompileArgs(ctypes.Structure):
    """struct cc1d_precompile_args."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("out_dir", ctypes.c_char_p),
        ("archs", _I32P), ("num_archs", ctypes.c_int32),
        ("ops", _I32P), ("num_ops", ctypes.c_int32),
        ("dtypes", _I32P), ("num_dtypes", ctypes.c_int32),
        ("widths", _I32P), ("num_widths", ctypes.c_int32),
        ("driver_version", ctypes.c_int32),
        ("torch_cuda_major", ctypes.c_int32),
        ("jobs", ctypes.c_int32),
    ]


class CSelfTestResult(ctypes.Structure):
    """struct cc1d_self_test_result."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int32),
        ("passed", ctypes.c_int32),
        ("runs", ctypes.c_int32),
        ("elements", ctypes.c_int64),
        ("mismatches", ctypes.c_int64),
        ("max_abs_error", ctypes.c_double),
        ("tolerance", ctypes.c_double),
        ("first_ms", ctypes.c_double),
        ("median_ms", ctypes.c_double),
    ]


LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)


# ---- exceptions ---------------------------------------------------------------------------


class LibraryError(Exception):
    """A failing libcc1d call. `status` is the cc1d_status, the text is cc1d_last_error()."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.status_name = STATUS_NAMES.get(status, f"status {status}")


class LibraryValueError(LibraryError, ValueError):
    """CC1D_ERR_INVALID_ARGUMENT."""


class LibraryTypeError(LibraryError, TypeError):
    """CC1D_ERR_INVALID_TYPE."""


class LibraryRuntimeError(LibraryError, RuntimeError):
    """Every other status."""


class BackendUnavailableError(RuntimeError):
    """A backend cannot run here (CC1D_ERR_BACKEND_UNAVAILABLE, or the library is missing)."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class LibraryLoadError(ImportError, RuntimeError):
    """libcc1d could not be loaded and CAUSAL_CONV1D_STRICT=1 forbids serving without it."""


def error_for_status(status: int, message: str) -> LibraryError:
    if status == ERR_INVALID_ARGUMENT:
        return LibraryValueError(status, message)
    if status == ERR_INVALID_TYPE:
        return LibraryTypeError(status, message)
    return LibraryRuntimeError(status, message)


class Candidate(NamedTuple):
    backend: str
    available: bool
    host_copies: bool
    runs_in_host: bool
    reason: str


class Plan(NamedTuple):
    requested: str
    source: str  # argument | CAUSAL_CONV1D_BACKEND | default
    strict: bool
    candidates: tuple


# ---- the loaded library -------------------------------------------------------------------


class Library:
    """A loaded libcc1d with prototypes set, and thin wrappers that raise on failure."""

    def __init__(self, path: str, cdll: ctypes.CDLL):
        self.path = path
        self._dll = d = cdll
        sig = {
            "cc1d_abi_version": (ctypes.c_uint32, []),
            "cc1d_version": (ctypes.c_char_p, []),
            "cc1d_last_error": (ctypes.c_char_p, []),
            "cc1d_backend_name": (ctypes.c_char_p, [ctypes.c_int32]),
            "cc1d_op_name": (ctypes.c_char_p, [ctypes.c_int32]),
            "cc1d_plan_dispatch": (ctypes.c_int, [ctypes.c_int32] * 4 + [ctypes.POINTER(CPlan)]),
            "cc1d_backend_available": (ctypes.c_int, [ctypes.c_int32] * 3),
            "cc1d_set_log_callback": (ctypes.c_int, [LOG_FN, ctypes.c_void_p]),
            "cc1d_set_log_level": (ctypes.c_int, [ctypes.c_int32]),
            "cc1d_get_log_level": (ctypes.c_int32, []),
            "cc1d_set_torch_info": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32]),
            "cc1d_report": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
            "cc1d_cache_command": (ctypes.c_int, [ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)]),
            "cc1d_precompile": (ctypes.c_int, [ctypes.POINTER(CPrecompileArgs), ctypes.POINTER(ctypes.c_void_p)]),
            "cc1d_free": (None, [ctypes.c_void_p]),
            "cc1d_self_test": (ctypes.c_int, [ctypes.c_int32] * 3 + [ctypes.POINTER(CSelfTestResult)]),
        }
        for name, (restype, argtypes) in sig.items():
            f = getattr(d, name)  # AttributeError: not a usable libcc1d
            f.restype, f.argtypes = restype, argtypes
        self.abi_version = int(d.cc1d_abi_version())
        self.version = (d.cc1d_version() or b"").decode("utf-8", "replace")
        self._entries = {}
        self._packed_entries = {}
        self._entry_addresses = {}
        self._log_fn = None

    @property
    def dll(self) -> ctypes.CDLL:
        """Raw access, for tests of the ABI itself."""
        return self._dll

    def last_error(self) -> str:
        msg = self._dll.cc1d_last_error()
        return (msg or b"").decode("utf-8", "replace")

    def raise_for(self, status: int, what: str) -> None:
        if status != OK:
            raise self.error_for(status, what)

    def error_for(self, status: int, what: str) -> LibraryError:
        """The exception for a failed call of `what` (this thread's cc1d_last_error)."""
        text = self.last_error() or f"(libcc1d gave no message for {what})"
        return error_for_status(status, f"{text} [{STATUS_NAMES.get(status, status)} from {what}]")

    def names(self, fn: str) -> tuple:
        """cc1d_backend_name or cc1d_op_name for 0, 1, ... until NULL."""
        f = getattr(self._dll, fn)
        out, i = [], 0
        while (n := f(i)) is not None:
            out.append(n.decode())
            i += 1
        return tuple(out)

    def call_status(self, entry: str, args) -> int:
        """Calls an op's entry point (e.g. "cc1d_causal_conv1d_fwd") with its argument struct
        (fill_args' buffer, or a ctypes.Structure) and returns the raw status (the GIL is
        released during the call)."""
        f = self._entries.get(entry)
        if f is None:
            f = getattr(self._dll, entry)
            f.restype, f.argtypes = ctypes.c_int, [ctypes.c_void_p]
            self._entries[entry] = f
        return f(args if isinstance(args, ctypes.Array) else ctypes.byref(args))

    def call(self, entry: str, args) -> None:
        self.raise_for(self.call_status(entry, args), entry)

    def packed_entry(self, entry: str):
        """An op's entry point as a ctypes function of one packed buffer (fill_args/ArgPacker:
        a ctypes array, which ctypes passes by address without converting it) returning the raw
        status: the call_status of the hot path, without its checks."""
        f = self._packed_entries.get(entry)
        if f is None:
            f = self._dll[entry]  # a function object of its own: call_status's keeps its argtypes
            f.restype = ctypes.c_int
            self._packed_entries[entry] = f
        return f

    def entry_address(self, entry: str) -> int:
        """An op's entry point's address, for libcc1d_pyargs's pack_call (_pack.ArgPacker.call)."""
        a = self._entry_addresses.get(entry)
        if a is None:
            a = self._entry_addresses[entry] = ctypes.cast(self._dll[entry], ctypes.c_void_p).value
        return a

    def query(self, entry: str, args) -> int:
        """Calls `entry(const args*, int64_t* out)` (e.g. "cc1d_causal_conv1d_bwd_workspace") and
        returns *out; raises on failure."""
        f = self._entries.get(entry)
        if f is None:
            f = getattr(self._dll, entry)
            f.restype, f.argtypes = ctypes.c_int, [ctypes.POINTER(type(args)), ctypes.POINTER(ctypes.c_int64)]
            self._entries[entry] = f
        out = ctypes.c_int64(0)
        self.raise_for(int(f(ctypes.byref(args), ctypes.byref(out))), entry)
        return out.value

    def plan(self, op: str, backend: str, device_type: int, device_index: int) -> Plan:
        """The dispatch policy's candidates for `op` (cc1d_plan_dispatch)."""
        p = CPlan()
        p.struct_size = ctypes.sizeof(CPlan)
        status = int(self._dll.cc1d_plan_dispatch(OP_IDS[op], BACKEND_IDS[backend], device_type, device_index,
                                                  ctypes.byref(p)))
        self.raise_for(status, "cc1d_plan_dispatch")
        cands = tuple(Candidate(BACKEND_NAMES[c.backend], bool(c.available), bool(c.host_copies),
                                bool(c.runs_in_host), (c.reason or b"").decode("utf-8", "replace"))
                      for c in p.candidates[:p.count])
        return Plan(BACKEND_NAMES[p.requested], SOURCE_NAMES[p.source], bool(p.strict), cands)

    def backend_available(self, backend: int, device_type: int, device_index: int) -> tuple:
        """(True, "") or (False, reason). Other failures raise."""
        status = int(self._dll.cc1d_backend_available(backend, device_type, device_index))
        if status == OK:
            return True, ""
        if status == ERR_BACKEND_UNAVAILABLE:
            return False, self.last_error() or "libcc1d gave no reason"
        self.raise_for(status, "cc1d_backend_available")
        return False, ""  # unreachable

    def report_text(self) -> str:
        needed = ctypes.c_size_t(0)
        status = int(self._dll.cc1d_report(None, 0, ctypes.byref(needed)))
        for _ in range(4):
            if status == OK:
                break
            if status != ERR_BUFFER_TOO_SMALL:
                self.raise_for(status, "cc1d_report")
            size = max(int(needed.value), 1)
            buf = ctypes.create_string_buffer(size)
            status = int(self._dll.cc1d_report(buf, size, ctypes.byref(needed)))
            if status == OK:
                return buf.value.decode("utf-8", "replace")
        self.raise_for(status, "cc1d_report")
        return ""

    def report(self) -> dict:
        text = self.report_text()
        try:
            return json.loads(text)
        except ValueError as e:
            return {"unparsed_report": text, "json_error": str(e)}

    def _json_result(self, status: int, out: ctypes.c_void_p, what: str) -> dict:
        """The JSON text libcc1d returned in `out` (released here), or the error raised."""
        try:
            self.raise_for(status, what)
            return json.loads(ctypes.string_at(out.value).decode("utf-8", "replace"))
        finally:
            if out.value:
                self._dll.cc1d_free(out)

    def cache_command(self, command: str) -> dict:
        """cc1d_cache_command: "path", "stats", "list", "verify" or "clear" on the kernel cache the
        environment configures (CAUSAL_CONV1D_CACHE_DIR, CAUSAL_CONV1D_CACHE_PATH)."""
        out = ctypes.c_void_p()
        status = int(self._dll.cc1d_cache_command(CACHE_COMMANDS[command], ctypes.byref(out)))
        return self._json_result(status, out, "cc1d_cache_command")

    def precompile(self, out_dir: str, *, archs: Sequence[int] = (), ops: Sequence[int] = (),
                   dtypes: Sequence[int] = (), widths: Sequence[int] = (), driver_version: int = 0,
                   torch_cuda_major: int = 0, jobs: int = 0) -> dict:
        """cc1d_precompile (ids and codes as in cc1d.h; empty lists mean the defaults); returns the
        manifest. The GIL is released while it compiles."""
        a = CPrecompileArgs()
        a.struct_size = ctypes.sizeof(CPrecompileArgs)
        a.out_dir = os.fsencode(out_dir)
        keep = []
        for name, values in (("archs", archs), ("ops", ops), ("dtypes", dtypes), ("widths", widths)):
            arr = (ctypes.c_int32 * len(values))(*values)
            keep.append(arr)
            setattr(a, name, ctypes.cast(arr, _I32P) if len(values) else None)
            setattr(a, "num_" + name, len(values))
        a.driver_version, a.torch_cuda_major, a.jobs = driver_version, torch_cuda_major, jobs
        out = ctypes.c_void_p()
        status = int(self._dll.cc1d_precompile(ctypes.byref(a), ctypes.byref(out)))
        return self._json_result(status, out, "cc1d_precompile")

    def self_test(self, backend: str, device_type: int, device_index: int) -> dict:
        """cc1d_self_test: the forward on one device through `backend`, compared with a float64
        reference and timed. Raises (like an op) when the backend cannot serve the device."""
        r = CSelfTestResult()
        r.struct_size = ctypes.sizeof(CSelfTestResult)
        status = int(self._dll.cc1d_self_test(BACKEND_IDS[backend], device_type, device_index, ctypes.byref(r)))
        self.raise_for(status, "cc1d_self_test")
        return {"backend": BACKEND_NAMES[r.backend], "passed": bool(r.passed), "elements": r.elements,
                "mismatches": r.mismatches, "max_abs_error": r.max_abs_error, "tolerance": r.tolerance,
                "first_ms": r.first_ms, "median_ms": r.median_ms, "runs": r.runs}

    def set_torch_info(self, torch_version: Optional[str], torch_cuda: Optional[str], cxx11_abi: int) -> None:
        enc = (lambda s: None if s is None else str(s).encode("utf-8"))
        status = int(self._dll.cc1d_set_torch_info(enc(torch_version), enc(torch_cuda), int(cxx11_abi)))
        self.raise_for(status, "cc1d_set_torch_info")

    def route_log_to_python(self) -> None:
        """libcc1d's log lines go to the `causal_conv1d` logger, whose level follows libcc1d's
        (CAUSAL_CONV1D_LOG_LEVEL means the same on both sides)."""
        level = LOG_LEVELS.get(int(self._dll.cc1d_get_log_level()), logging.WARNING)
        if os.environ.get("CAUSAL_CONV1D_LOG_LEVEL", "").strip():
            logger.setLevel(level)
            if not logger.handlers:  # asked for explicitly: show it even without logging config
                h = logging.StreamHandler()
                h.setFormatter(logging.Formatter("[causal_conv1d] %(levelname)s: %(message)s"))
                logger.addHandler(h)

        def forward(lvl, message, _user):
            try:
                logger.log(LOG_LEVELS.get(lvl, logging.WARNING), "%s", (message or b"").decode("utf-8", "replace"))
            except Exception:  # never let an exception cross back into C
                pass

        self._log_fn = LOG_FN(forward)  # kept alive as long as the library
        self.raise_for(int(self._dll.cc1d_set_log_callback(self._log_fn, None)), "cc1d_set_log_callback")
        # Worker threads may log while the interpreter shuts down: back to stderr before that.
        atexit.register(lambda: self._dll.cc1d_set_log_callback(LOG_FN(), None))


_lock = threading.Lock()
_loaded = False
_library: Optional[Library] = None
_load_error: Optional[str] = None
_tried: list = []


def package_lib_dir() -> Path:
    return Path(__file__).resolve().parent / "lib"


def candidate_paths() -> list:
    env = os.environ.get("CAUSAL_CONV1D_LIBRARY", "").strip()
    if env:
        return [env]
    return [str(package_lib_dir() / "libcc1d.so")]


def _add_torch_nvrtc_root() -> None:
    """Lets libcc1d find the NVRTC wheel torch depends on (site-packages/nvidia/...), also when
    libcc1d itself is not installed beside it (CAUSAL_CONV1D_LIBRARY, a build tree). libcc1d
    reads CAUSAL_CONV1D_NVRTC_SEARCH_PATH when it first looks for NVRTC."""
    import torch

    site = str(Path(torch.__file__).resolve().parent.parent)
    roots = [r for r in os.environ.get("CAUSAL_CONV1D_NVRTC_SEARCH_PATH", "").split(":") if r]
    if site not in roots:
        os.environ["CAUSAL_CONV1D_NVRTC_SEARCH_PATH"] = ":".join(roots + [site])


def torch_facts() -> tuple:
    """(torch.__version__, torch.version.cuda or None, C++11 ABI 1/0, or -1 when unknown)."""
    import torch

    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    return str(torch.__version__), getattr(torch.version, "cuda", None), (-1 if abi is None else int(abi))


def _try_load() -> tuple:
    paths = candidate_paths()
    errors = []
    from_env = bool(os.environ.get("CAUSAL_CONV1D_LIBRARY", "").strip())
    for path in paths:
        if not from_env and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            cdll = ctypes.CDLL(path)
        except OSError as e:  # dlopen's text usually starts with the path already
            errors.append(str(e) if str(e).startswith(path) else f"{path}: {e}")
            continue
        try:
            lib = Library(path, cdll)
        except AttributeError as e:  # a missing symbol: not our library, or an older one
            errors.append(f"{path}: not a usable libcc1d ({e}); reinstall causal-conv1d so the Python code and "
                          f"libcc1d come from the same build")
            continue
        if lib.abi_version != ABI_VERSION:
            errors.append(f"{path}: cc1d_abi_version() is {lib.abi_version}, this package needs "
                          f"{ABI_VERSION} (library {lib.version!r}); reinstall causal-conv1d so the "
                          f"Python code and libcc1d come from the same build")
            continue
        lib.route_log_to_python()
        try:
            lib.set_torch_info(*torch_facts())
        except Exception as e:  # informative only; never a reason to refuse the library
            logger.debug("cc1d_set_torch_info failed: %s", e)
        _add_torch_nvrtc_root()
        return lib, None, paths
    how = ("CAUSAL_CONV1D_LIBRARY is set, so only that path was tried; unset it or point it at a "
           "built libcc1d.so" if from_env else
           "reinstall the package (`pip install causal-conv1d` builds libcc1d with CMake), or set "
           "CAUSAL_CONV1D_LIBRARY to the path of a built libcc1d.so")
    return None, "could not load libcc1d: " + "; ".join(errors) + f". To fix: {how}.", paths


def load() -> Optional[Library]:
    """Loads libcc1d once per process; returns None (see load_error()) when it cannot."""
    global _loaded, _library, _load_error, _tried
    if _loaded:
        return _library
    with _lock:
        if not _loaded:
            _library, _load_error, _tried = _try_load()
            _loaded = True
            if _library is not None:
                logger.debug("loaded libcc1d %s (ABI %d) from %s", _library.version,
                             _library.abi_version, _library.path)
            else:
                logger.debug("%s", _load_error)
    return _library


def library() -> Optional[Library]:
    return load()


def load_error() -> Optional[str]:
    load()
    return _load_error


def tried_paths() -> list:
    load()
    return list(_tried)
