"""cc1d_torch, the optional libtorch op library, and the handshake that guards loading it.

cc1d_torch (built by CMake when it finds libtorch; never in the wheel) registers the ops in C++
under the same names and schemas as the Python ops. Python uses it only when it is found and
every fact recorded at its build matches this process; otherwise the reason is logged at debug
level (and shown by `causal-conv1d doctor`) and the ctypes path serves, as without it.

Where:   CAUSAL_CONV1D_TORCH_LIBRARY (a path; "off" or "0" disables), else
         causal_conv1d/lib/libcc1d_torch.so beside the package's libcc1d.
Record:  libcc1d_torch.json next to the library, written by the same CMake run that built it:
         {library, cc1d_version, abi ("stable" or "classic"), torch_version, torch_min,
          torch_cuda, cxx11_abi, ops}.
Handshake, before any dlopen (so an undefined symbol cannot happen, by construction):
  1. the record exists and names the libcc1d version this process loaded;
  2. a "classic" (TORCH_LIBRARY) build needs the same torch major.minor, CUDA major and C++11
     ABI; a "stable" (STABLE_TORCH_LIBRARY) build needs torch >= torch_min;
  3. the library's ELF file is read: every library it needs from torch or libcc1d is the one
     this process has, and every torch or libcc1d symbol it imports is exported there.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading
from pathlib import Path
from typing import Optional

from . import _elf, _lib
from ._diag import logger

RECORD_SUFFIX = ".json"
_TORCH_LIBS = ("libtorch", "libc10")
_TORCH_SYMBOL = re.compile(
    r"^(?:_Z(?:T[VIST])?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)(?=[0-9ICDES])|_Z\d+THP|aoti_torch_|torch_)")

NOTICE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
NOTICE_FALLBACK, NOTICE_CHOICE = 0, 1

_lock = threading.Lock()
_status: Optional[dict] = None
_hooks = []  # keeps the ctypes callbacks alive


def is_torch_symbol(name: str) -> bool:
    """Whether an imported symbol is one libtorch / libc10 must provide (c10::, at::, torch::,
    caffe2:: C++ names, the THP Python glue, and the stable C shim)."""
    return bool(_TORCH_SYMBOL.match(name))


def find() -> Optional[str]:
    env = os.environ.get("CAUSAL_CONV1D_TORCH_LIBRARY", "").strip()
    if env.lower() in ("off", "0"):
        return None
    if env:
        return env
    path = _lib.package_lib_dir() / "libcc1d_torch.so"
    return str(path) if path.exists() else None


def record_path(library: str) -> str:
    return str(Path(library).with_suffix(RECORD_SUFFIX))


def read_record(library: str) -> dict:
    """The build record; raises ValueError with the reason when missing or unreadable."""
    path = record_path(library)
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"it has no build record {path}; rebuild cc1d_torch (cmake --build)") from None
    except (OSError, ValueError) as e:
        raise ValueError(f"its build record {path} is unreadable ({e}); rebuild cc1d_torch") from None
    if not isinstance(record, dict):
        raise ValueError(f"its build record {path} is not a JSON object; rebuild cc1d_torch")
    return record


def _mm(version) -> Optional[tuple]:
    parts = str(version or "").split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _describe(version, cuda, abi) -> str:
    mm = _mm(version)
    return (f"torch {mm[0]}.{mm[1]}" if mm else f"torch {version!r}") + \
        (f" cu{str(cuda).split('.')[0]}" if cuda else " cpu") + (" cxx11" if abi else " pre-cxx11")


def facts_mismatch(record: dict, running: tuple, cc1d_version: Optional[str]) -> Optional[str]:
    """Why the recorded build facts do not fit this process, or None. `running` is
    (torch version, torch CUDA or None, C++11 ABI 1/0)."""
    version, cuda, abi = running
    need = ("cc1d_version", "abi", "torch_version", "torch_min", "torch_cuda", "cxx11_abi")
    missing = [k for k in need if k not in record]
    if missing:
        return f"its build record lacks {', '.join(missing)}; rebuild cc1d_torch"
    if cc1d_version is None:
        return "libcc1d is not loaded"
    if record["cc1d_version"] != cc1d_version:
        return f"it was built with libcc1d {record['cc1d_version']}, this process loaded libcc1d {cc1d_version}"
    built = _describe(record["torch_version"], record["torch_cuda"], record["cxx11_abi"])
    here = _describe(version, cuda, abi)
    if record["abi"] == "stable":
        low, now = _mm(record["torch_min"]), _mm(version)
        if low is None or now is None or now < low:
            return f"cc1d_torch uses the stable ABI of torch >= {record['torch_min']}, running {version}"
        return None
    if record["abi"] != "classic":
        return f"its build record names an unknown ABI {record['abi']!r}; rebuild cc1d_torch"
    same_cuda = (record["torch_cuda"] is None) == (cuda is None) and (
        cuda is None or str(record["torch_cuda"]).split(".")[0] == str(cuda).split(".")[0])
    if _mm(record["torch_version"]) != _mm(version) or bool(record["cxx11_abi"]) != bool(abi) or not same_cuda:
        return f"cc1d_torch built for {built}, running {here}"
    return None


def symbols_mismatch(library: str, torch_lib_dir: str, libcc1d_path: str) -> Optional[str]:
    """Why the dynamic linker could not bind `library` in this process, or None: a torch or
    libcc1d library it needs that is not this process's, or a symbol they do not export."""
    try:
        with _elf.ElfFile(library) as f:
            needed, undefined = f.needed(), f.undefined()
        with _elf.ElfFile(libcc1d_path) as cc1d:
            cc1d_name = (cc1d.dynamic(_elf.DT_SONAME) or [os.path.basename(libcc1d_path)])[0]
            cc1d_missing = [s for s in undefined if s.startswith("cc1d_") and not cc1d.exports(s)]
    except (OSError, _elf.ElfError) as e:
        return f"its ELF file cannot be read ({e})"
    for name in needed:
        if name.startswith("libcc1d") and name != cc1d_name:
            return f"it needs {name}, this process loaded {libcc1d_path} ({cc1d_name}); rebuild cc1d_torch beside it"
        if name.startswith(_TORCH_LIBS) and not os.path.exists(os.path.join(torch_lib_dir, name)):
            return f"it needs {name}, which this torch does not have ({torch_lib_dir})"
    if cc1d_missing:
        return f"it imports {len(cc1d_missing)} symbol(s) libcc1d does not export, e.g. {cc1d_missing[0]}"
    wanted = [s for s in undefined if is_torch_symbol(s)]
    libs = [os.path.join(torch_lib_dir, n) for n in sorted(os.listdir(torch_lib_dir))
            if n.endswith(".so") and n.startswith(_TORCH_LIBS)]
    missing = set(wanted)
    for path in libs:
        if not missing:
            break
        try:
            with _elf.ElfFile(path) as lib:
                missing = {s for s in missing if not lib.exports(s)}
        except (OSError, _elf.ElfError):
            continue
    if missing:
        return (f"it imports {len(missing)} symbol(s) the running libtorch does not export, e.g. "
                f"{sorted(missing)[0]}")
    return None


_STATUS_TAG = re.compile(r"\[(CC1D_(?:OK|ERR_\w+))\]$")
_STRICT_MARKER = "(CAUSAL_CONV1D_STRICT=1 forbids the fallback.)"


def translate(e: RuntimeError) -> Exception:
    """The exception the ctypes path raises for the same failure, from the status tag that ends
    each of cc1d_torch's messages (run.h); `e` itself when it carries none."""
    from ._diag import StrictModeError

    text = str(e).strip()
    if text.endswith(_STRICT_MARKER):
        return StrictModeError(text)
    m = _STATUS_TAG.search(text)
    if m is None:
        return e
    status = {v: k for k, v in _lib.STATUS_NAMES.items()}[m[1]]
    if status == _lib.ERR_BACKEND_UNAVAILABLE:
        return _lib.BackendUnavailableError(text, status)
    return _lib.error_for_status(status, text)


def _torch_lib_dir() -> str:
    import torch

    return str(Path(torch.__file__).resolve().parent / "lib")


def _install_hooks(path: str) -> None:
    """Fallback notices become CausalConv1dWarnings (once per reason) and each call's choice
    becomes last_backend(), as on the ctypes path."""
    from . import _diag, _dispatch

    dll = ctypes.CDLL(path)  # the handle torch.ops.load_library opened
    setter = dll.cc1d_torch_set_notice_callback
    setter.restype, setter.argtypes = None, [NOTICE_FN, ctypes.c_void_p]

    def notice(kind, key, message, _user):
        try:
            text = (message or b"").decode("utf-8", "replace")
            if kind == NOTICE_FALLBACK:
                _diag.warn_once(("cc1d_torch", (key or b"").decode("utf-8", "replace")), text)
            else:
                _dispatch.record_choice(json.loads(text))
        except Exception as e:  # never raise into C++
            logger.debug("cc1d_torch notice failed: %s", e)

    fn = NOTICE_FN(notice)
    _hooks.append((dll, fn))
    setter(fn, None)


def _load() -> dict:
    status = {"path": find(), "loaded": False, "reason": None, "record": None}
    if status["path"] is None:
        status["reason"] = ("disabled (CAUSAL_CONV1D_TORCH_LIBRARY=off)" if os.environ.get(
            "CAUSAL_CONV1D_TORCH_LIBRARY", "").strip() else "not installed (optional: see README, 'C++ and libtorch')")
        return status
    path = status["path"]
    lib = _lib.library()
    try:
        if not os.path.exists(path):
            raise ValueError(f"{path} does not exist")
        status["record"] = record = read_record(path)
        why = facts_mismatch(record, _lib.torch_facts(), lib and lib.version) or \
            symbols_mismatch(path, _torch_lib_dir(), lib.path)
        if why:
            raise ValueError(why)
        import torch

        torch.ops.load_library(path)
        _install_hooks(path)
    except Exception as e:
        status["reason"] = f"{path} not loaded: {e}"
        logger.debug("cc1d_torch: %s; the ctypes path serves", status["reason"])
        return status
    status["loaded"] = True
    logger.debug("cc1d_torch %s loaded (built for torch %s, %s ABI)", path, record["torch_version"], record["abi"])
    return status


def status() -> dict:
    """{path, loaded, reason, record}; the first call decides (and loads when it may)."""
    global _status
    if _status is None:
        with _lock:
            if _status is None:
                _status = _load()
    return dict(_status)


def serves(op: str) -> bool:
    """Whether cc1d_torch is loaded and registers `op` (so Python must not define it)."""
    s = status()
    return s["loaded"] and op in (s["record"] or {}).get("ops", [])
