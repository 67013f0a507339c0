"""Backend selection: which implementation serves a call, and why.

Backends
  cpu      libcc1d's native CPU kernels (host memory; CUDA tensors are copied to host and back
           when this backend is asked for explicitly, or as auto's last resort).
  aten     torch ops on the tensor's own device (causal_conv1d_ref: fp32 compute, then cast).
  nvrtc    libcc1d's kernels JIT-compiled by NVRTC, for CUDA tensors.
  emulate  libcc1d's kernels compiled for the host and run by its emulator (host memory; debug).
  auto     CPU tensors -> cpu; CUDA tensors -> nvrtc, else aten on the device, else cpu with
           copies; other devices -> aten.

Precedence: the per-call `backend=` argument > `use_backend(...)` (a context variable, so it is
per thread and per asyncio task) > the CAUSAL_CONV1D_BACKEND environment variable > auto.

A fallback (auto could not use its first choice) is reported once per process and reason as a
CausalConv1dWarning naming what was tried, why it failed and which backend serves;
CAUSAL_CONV1D_STRICT=1 turns it into a StrictModeError. A backend that was asked for explicitly
and cannot serve raises BackendUnavailableError with the reason.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
from typing import Optional

import torch

from . import _lib
from ._diag import StrictModeError, logger, strict_mode, warn_once
from ._ref import ref_forward

BACKENDS = ("auto", "cpu", "aten", "nvrtc", "emulate")
_LIB_BACKENDS = {"cpu": _lib.BACKEND_CPU, "nvrtc": _lib.BACKEND_NVRTC, "emulate": _lib.BACKEND_EMULATE}
_LOAD_KEY = "libcc1d-load"

_context_backend: contextvars.ContextVar = contextvars.ContextVar("causal_conv1d_backend", default=None)


def check_backend_name(name, what: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise ValueError(f"{what} must be one of {', '.join(BACKENDS)}; got {name!r}")
    return name.strip().lower()


@contextlib.contextmanager
def use_backend(name: str):
    """Within this block (this thread / asyncio task only), calls without a `backend=` argument
    use backend `name` ("auto", "cpu", "aten", "nvrtc" or "emulate")."""
    token = _context_backend.set(check_backend_name(name, "use_backend(name)"))
    try:
        yield
    finally:
        _context_backend.reset(token)


def requested_backend(per_call: Optional[str] = None) -> tuple:
    """(name, source): what the caller asked for and where that came from."""
    if per_call:
        return check_backend_name(per_call, "argument 'backend'"), "argument backend="
    ctx = _context_backend.get()
    if ctx is not None:
        return ctx, "use_backend()"
    env = os.environ.get("CAUSAL_CONV1D_BACKEND", "").strip()
    if env:
        return check_backend_name(env, "environment variable CAUSAL_CONV1D_BACKEND"), "CAUSAL_CONV1D_BACKEND"
    return "auto", "default"


@dataclasses.dataclass(frozen=True)
class BackendChoice:
    """Which backend served a call, and why (see last_backend())."""

    backend: str  # cpu | aten | nvrtc | emulate
    requested: str  # auto | cpu | aten | nvrtc | emulate
    source: str  # argument backend= | use_backend() | CAUSAL_CONV1D_BACKEND | default
    device: str  # the tensors' device, e.g. "cpu", "cuda:0"
    reason: str  # a sentence
    fallback_from: tuple = ()  # ((backend, why it could not serve), ...)
    host_copies: bool = False  # tensors were copied to host memory and back

    def __str__(self) -> str:
        return f"{self.backend} ({self.reason})"


_tls = threading.local()


def last_backend() -> Optional[BackendChoice]:
    """The BackendChoice of the last forward on this thread (None before the first)."""
    return getattr(_tls, "last", None)


def _record(choice: BackendChoice) -> None:
    _tls.last = choice


# ---- availability ---------------------------------------------------------------------------

_avail_cache: dict = {}
_avail_lock = threading.Lock()


def _clear_caches() -> None:
    """Testing aid."""
    with _avail_lock:
        _avail_cache.clear()


def _device_str(device: torch.device) -> str:
    if device.type == "cuda" and device.index is None:
        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda"
    return str(device)


def _lib_available(name: str, device_type: int, device_index: int) -> tuple:
    key = (name, device_type, device_index)
    with _avail_lock:
        hit = _avail_cache.get(key)
    if hit is not None:
        return hit
    lib = _lib.library()
    if lib is None:
        return False, _lib.load_error(), _LOAD_KEY
    try:
        ok, why = lib.backend_available(_LIB_BACKENDS[name], device_type, device_index)
    except _lib.LibraryError as e:
        ok, why = False, f"cc1d_backend_available failed: {e}"
    result = (ok, why, (name, why))
    with _avail_lock:
        _avail_cache[key] = result
    return result


def _mark_unavailable(name: str, device_type: int, device_index: int, why: str) -> None:
    with _avail_lock:
        _avail_cache[(name, device_type, device_index)] = (False, why, (name, why))


def availability(name: str, device: torch.device) -> tuple:
    """(ok, reason, key) for backend `name` serving tensors on `device`."""
    if name == "aten":
        return True, "", None
    if name == "nvrtc":
        if device.type != "cuda":
            return False, f"the nvrtc backend runs on CUDA tensors; the tensors are on {device}", ("nvrtc", device.type)
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _lib_available("nvrtc", _lib.DEVICE_CUDA, index)
    # cpu / emulate run in host memory, whatever the tensors' device (copies otherwise)
    return _lib_available(name, _lib.DEVICE_CPU, 0)


def auto_candidates(device: torch.device) -> list:
    if device.type == "cpu":
        return ["cpu", "aten"]
    if device.type == "cuda":
        return ["nvrtc", "aten", "cpu"]
    return ["aten"]


def _describe(name: str, device: torch.device) -> str:
    d = _device_str(device)
    if name == "aten":
        return f"torch ops on {d}"
    if name == "nvrtc":
        return f"libcc1d NVRTC kernels on {d}"
    where = "" if device.type == "cpu" else f", copying the {d} tensors to host memory and back"
    return ("libcc1d CPU kernels" if name == "cpu" else "libcc1d emulator") + where


def _fallback_message(failures: list, served: str, device: torch.device) -> str:
    tried = "; ".join(f"backend '{n}' cannot serve {_device_str(device)}: {why}" for n, why, _ in failures)
    return (f"causal_conv1d: {tried}. Falling back to '{served}' ({_describe(served, device)}). "
            f"Set CAUSAL_CONV1D_STRICT=1 to make this an error, or pick a backend with backend=, "
            f"causal_conv1d.use_backend() or CAUSAL_CONV1D_BACKEND.")


def _announce_fallback(failures: list, served: str, device: torch.device) -> None:
    message = _fallback_message(failures, served, device)
    if strict_mode():
        raise StrictModeError(message + " (CAUSAL_CONV1D_STRICT=1 forbids the fallback.)")
    keys = tuple(k for _, _, k in failures)
    key = _LOAD_KEY if keys and all(k == _LOAD_KEY for k in keys) else ("fallback", keys, served, device.type)
    warn_once(key, message)


def library_load_notice() -> Optional[str]:
    """The import-time message when libcc1d is missing (None when it loaded)."""
    err = _lib.load_error()
    if err is None:
        return None
    return (f"causal_conv1d: {err} Until then the 'aten' backend (torch ops on the tensors' device) "
            f"serves every call. Set CAUSAL_CONV1D_STRICT=1 to make this an import error.")


def on_import() -> None:
    """Loads libcc1d; a failure is one warning, or an import error in strict mode."""
    _lib.load()
    notice = library_load_notice()
    if notice is None:
        return
    if strict_mode():
        raise _lib.LibraryLoadError(notice.replace("Set CAUSAL_CONV1D_STRICT=1 to make this an import error.",
                                                   "CAUSAL_CONV1D_STRICT=1 forbids that."))
    warn_once(_LOAD_KEY, notice)


# ---- execution ------------------------------------------------------------------------------


def _run_aten(x, weight, bias, seq_idx, initial_states, out, final_states, silu):
    res, fs = ref_forward(x, weight, bias, seq_idx, initial_states, silu, final_states is not None)
    out.copy_(res)
    if final_states is not None:
        final_states.copy_(fs)


def _run_lib(name, x, weight, bias, seq_idx, initial_states, out, final_states, silu) -> bool:
    """Runs a libcc1d backend; returns whether host copies were made."""
    lib = _lib.library()
    backend_id = _LIB_BACKENDS[name]
    if name == "nvrtc":
        stream = torch.cuda.current_stream(x.device).cuda_stream
        lib.fwd(x, weight, bias, seq_idx, initial_states, out, final_states, silu=silu,
                backend=backend_id, stream=stream)
        return False
    if x.device.type == "cpu":
        lib.fwd(x, weight, bias, seq_idx, initial_states, out, final_states, silu=silu, backend=backend_id)
        return False
    host = [None if t is None else t.cpu() for t in (x, weight, bias, seq_idx, initial_states)]
    out_h = torch.empty_like(out, device="cpu")
    fs_h = None if final_states is None else torch.empty_like(final_states, device="cpu")
    lib.fwd(*host, out_h, fs_h, silu=silu, backend=backend_id)
    out.copy_(out_h)
    if final_states is not None:
        final_states.copy_(fs_h)
    return True


def run_fwd(x, weight, bias, seq_idx, initial_states, out, final_states, silu: bool,
            backend: Optional[str] = None) -> BackendChoice:
    """Writes out (and final_states when not None) with the selected backend."""
    requested, source = requested_backend(backend)
    device = x.device
    dstr = _device_str(device)
    candidates = auto_candidates(device) if requested == "auto" else [requested]
    failures = []
    for i, name in enumerate(candidates):
        ok, why, key = availability(name, device)
        if not ok:
            failures.append((name, why, key))
            continue
        if failures and requested == "auto":
            _announce_fallback(failures, name, device)
        try:
            if name == "aten":
                _run_aten(x, weight, bias, seq_idx, initial_states, out, final_states, silu)
                copies = False
            else:
                copies = _run_lib(name, x, weight, bias, seq_idx, initial_states, out, final_states, silu)
        except _lib.LibraryRuntimeError as e:
            retryable = e.status in (_lib.ERR_UNSUPPORTED, _lib.ERR_BACKEND_UNAVAILABLE, _lib.ERR_COMPILE)
            # Remember the failure so later calls neither retry a broken compile nor warn again.
            if e.status in (_lib.ERR_BACKEND_UNAVAILABLE, _lib.ERR_COMPILE):
                if name == "nvrtc":
                    _mark_unavailable(name, _lib.DEVICE_CUDA, x.device.index or 0, str(e))
                else:
                    _mark_unavailable(name, _lib.DEVICE_CPU, 0, str(e))
            if requested == "auto" and retryable and i + 1 < len(candidates):
                failures.append((name, str(e), (name, str(e))))  # same key as the cached unavailability
                continue
            if e.status == _lib.ERR_BACKEND_UNAVAILABLE:
                raise _lib.BackendUnavailableError(
                    f"causal_conv1d: backend '{name}' (requested by {source}) cannot serve {dstr}: {e}",
                    e.status) from e
            raise
        if requested == "auto":
            if failures:
                reason = (f"auto: fell back to {_describe(name, device)}; " +
                          "; ".join(f"'{n}' unavailable ({w})" for n, w, _ in failures))
            else:
                reason = f"auto: {device.type} tensors are served by {_describe(name, device)}"
        else:
            reason = f"requested by {source}: {_describe(name, device)}"
        choice = BackendChoice(backend=name, requested=requested, source=source, device=dstr, reason=reason,
                               fallback_from=tuple((n, w) for n, w, _ in failures), host_copies=copies)
        _record(choice)
        logger.debug("forward served by %s", choice)
        return choice
    if requested != "auto":
        name, why, _ = failures[0]
        raise _lib.BackendUnavailableError(
            f"causal_conv1d: backend '{name}' (requested by {source}) cannot serve {dstr}: {why}")
    raise _lib.BackendUnavailableError(
        "causal_conv1d: no backend can serve " + dstr + ": " + "; ".join(f"'{n}': {w}" for n, w, _ in failures))


def explain(device, backend: Optional[str] = None) -> dict:
    """What a call on `device` would use now, and why — without running or warning."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    requested, source = requested_backend(backend)
    candidates = auto_candidates(device) if requested == "auto" else [requested]
    tried = []
    for name in candidates:
        if device.type == "cuda" and name == "aten" and not torch.cuda.is_available():
            ok, why = False, "torch.cuda.is_available() is False (no CUDA device, or a CPU-only torch)"
        else:
            ok, why, _ = availability(name, device)
        if ok:
            return {"requested": requested, "source": source, "backend": name,
                    "serves": _describe(name, device), "fallback": bool(tried),
                    "rejected": [{"backend": n, "reason": w} for n, w in tried],
                    "strict_mode": strict_mode()}
        tried.append((name, why))
    return {"requested": requested, "source": source, "backend": None, "serves": None, "fallback": False,
            "rejected": [{"backend": n, "reason": w} for n, w in tried]}
