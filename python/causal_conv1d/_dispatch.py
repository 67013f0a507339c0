"""Running an op: which backend serves the call, and why.

The policy (which backends to try, in which order, CAUSAL_CONV1D_BACKEND and
CAUSAL_CONV1D_STRICT) lives in libcc1d; this module asks it (cc1d_plan_dispatch) and walks the
answer. It adds only what a host framework must: the per-call `backend=` argument and
`use_backend(...)` (a context variable, so per thread and per asyncio task), the "aten" backend
(torch ops), host copies for backends that read host memory, and the warning (or, in strict
mode, the error) that every fallback gets.

Precedence: the per-call `backend=` argument > `use_backend(...)` > CAUSAL_CONV1D_BACKEND > auto.

route() is the common case made cheap: when the plan's first backend is a libcc1d one that serves
the tensors where they are, an op calls it directly (its fast path, after_direct) and run()'s walk
is only for what that cannot do: fallbacks, host copies, the aten backend, failures.

Without a loadable libcc1d the plan is "aten only": the import already warned (or, in strict
mode, failed), and a lib backend asked for by name raises BackendUnavailableError.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import threading
from typing import Callable, NamedTuple, Optional

import torch

from . import _lib, _validate
from ._diag import StrictModeError, logger, strict_mode, warn_once

BACKENDS = tuple(_lib.BACKEND_IDS)  # auto, cpu, nvrtc, emulate, aten
_LOAD_KEY = "libcc1d-load"

_context_backend: contextvars.ContextVar = contextvars.ContextVar("causal_conv1d_backend", default=None)


def check_backend_name(name, what: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in BACKENDS:
        raise ValueError(f"{what} must be one of {', '.join(BACKENDS)}; got {name!r}")
    return name.strip().lower()


@contextlib.contextmanager
def use_backend(name: str, *, source: str = "use_backend()"):
    """Within this block (this thread / asyncio task only), calls without a `backend=` argument
    use backend `name` ("auto", "cpu", "aten", "nvrtc" or "emulate"). `source` names where the
    choice came from in last_backend() and in errors (a CLI says "--backend")."""
    token = _context_backend.set((check_backend_name(name, "use_backend(name)"), source))
    try:
        yield
    finally:
        _context_backend.reset(token)


@dataclasses.dataclass(frozen=True)
class BackendChoice:
    """Which backend served a call, and why (see last_backend())."""

    backend: str  # cpu | aten | nvrtc | emulate
    requested: str  # auto | cpu | aten | nvrtc | emulate
    source: str  # argument backend= | use_backend() (or its source=) | CAUSAL_CONV1D_BACKEND | default
    device: str  # the tensors' device, e.g. "cpu", "cuda:0"
    reason: str  # a sentence
    fallback_from: tuple = ()  # ((backend, why it could not serve), ...)
    host_copies: bool = False  # tensors were copied to host memory and back
    op: str = "fwd"

    def __str__(self) -> str:
        return f"{self.backend} ({self.reason})"


class _ThreadState(threading.local):
    """Per thread: `slot`, a one-element list holding last_backend() (a list, so that a backward
    on torch's own thread can write into the forward's thread's: for_forward_of), and `also`,
    the forward's slot while such a backward runs. Class defaults instead of missing attributes:
    getattr of a missing attribute on a threading.local costs over a microsecond a call."""

    slot: Optional[list] = None
    also: Optional[list] = None


_tls = _ThreadState()


def _slot() -> list:
    slot = _tls.slot
    if slot is None:
        slot = _tls.slot = [None]
    return slot


def _record(choice: BackendChoice) -> None:
    """Sets last_backend() on this thread, and on the forward's thread when this is a backward
    that torch's autograd engine runs on a thread of its own (for_forward_of)."""
    tls = _tls
    if tls.slot is None:
        tls.slot = [choice]
    else:
        tls.slot[0] = choice
    if tls.also is not None:
        tls.also[0] = choice


def record_choice(c: dict) -> None:
    """Sets last_backend() from a choice the libtorch op library (cc1d_torch) made."""
    _record(BackendChoice(backend=c["backend"], requested=c["requested"], source=c["source"], device=c["device"],
                          reason=c["reason"], fallback_from=tuple(tuple(f) for f in c["fallback_from"]),
                          host_copies=bool(c["host_copies"]), op=c["op"]))


def last_backend() -> Optional[BackendChoice]:
    """The BackendChoice of the last op call on this thread (None before the first); a backward
    counts for the thread that ran its forward."""
    return _slot()[0]


def forward_caller() -> tuple:
    """What a forward saves for its backward (for_forward_of): this thread, its last_backend()
    record and its use_backend() block."""
    return threading.get_ident(), _slot(), _context_backend.get()


class _ForForwardOf:
    """for_forward_of's context on torch's own thread."""

    def __init__(self, slot: list, context) -> None:
        self.slot, self.context = slot, context

    def __enter__(self) -> None:
        self.prev, _tls.also = _tls.also, self.slot
        self.token = _context_backend.set(self.context)

    def __exit__(self, *exc) -> None:
        _context_backend.reset(self.token)
        _tls.also = self.prev


_SAME_THREAD = contextlib.nullcontext()


def for_forward_of(caller: tuple):
    """The context to run a backward in. On CUDA tensors torch's autograd engine runs it on a
    device thread of its own, which neither the caller's use_backend() block nor its
    last_backend() reach: there the backward follows the forward's block and records into the
    forward's thread. On the forward's own thread (host tensors) nothing changes: the block
    around backward() applies."""
    ident, slot, context = caller
    return _SAME_THREAD if ident == threading.get_ident() else _ForForwardOf(slot, context)


class OpCall(NamedTuple):
    """One call of an op, as the dispatcher runs it (a NamedTuple: built on every call).

    tensors: every tensor argument by its C struct field name (None for absent ones);
    written: the names among them that the op writes (outputs and in-out state);
    run_lib(tensors, backend_id, stream): calls libcc1d's entry point on these tensors;
    run_aten(): the torch-ops implementation, writing the same tensors."""

    op: str
    device: torch.device
    tensors: dict
    written: tuple
    run_lib: Callable
    run_aten: Callable


# ---- the eager fast path --------------------------------------------------------------------


def _probe(name: str):
    """A torch function this check needs, or None when this torch lacks it."""
    obj = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


_is_compiling = _validate._is_compiling
_is_tracing = _probe("_C._is_tracing")  # what torch.jit.is_tracing() returns in eager mode, without its wrapper
_dispatch_modes = _probe("_C._len_torch_dispatch_stack")
_function_modes = _probe("_C._is_torch_function_mode_enabled")
_functorch_level = _probe("_C._functorch.peek_interpreter_stack")
_EAGER_PROBES = None not in (_is_compiling, _is_tracing, _dispatch_modes, _function_modes, _functorch_level)
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def eager_ok(*tensors, autograd: bool = False) -> bool:
    """Whether an op may call its implementation directly instead of through its torch operator:
    plain tensors, nothing for autograd to record, no torch.compile/jit tracing, no dispatch or
    function mode, no functorch transform. Then torch.ops would run the very same
    implementation, only some tens of microseconds later; anything else goes through it.
    autograd=True allows tensors that require grad: the caller records autograd itself."""
    if (not _EAGER_PROBES or _is_compiling() or _is_tracing() or _dispatch_modes() or _function_modes()
            or _functorch_level() is not None):
        return False
    grad = not autograd and torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN or (grad and t.requires_grad)):
            return False
    return True


# ---- plans ----------------------------------------------------------------------------------

_plan_cache: dict = {}
_broken: dict = {}  # (backend, device_type, index) -> why it failed at run time
_cache_lock = threading.Lock()


def _clear_caches() -> None:
    """Testing aid."""
    with _cache_lock:
        _plan_cache.clear()
        _broken.clear()
        _routes.clear()


def _device_str(device: torch.device) -> str:
    if device.type == "cuda" and device.index is None:
        return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda"
    return str(device)


def _device_codes(device: torch.device) -> tuple:
    if device.type == "cuda":
        return _lib.DEVICE_CUDA, device.index if device.index is not None else torch.cuda.current_device()
    if device.type == "cpu":
        return _lib.DEVICE_CPU, 0
    return None  # meta and other devices: only aten


def context_choice() -> str:
    """The innermost use_backend() block on this thread or task as "name|source", or "" (how
    cc1d_torch's ops take it: the per-call backend, and where it came from)."""
    ctx = _context_backend.get()
    return "" if ctx is None else f"{ctx[0]}|{ctx[1]}"


def _requested(per_call: Optional[str]) -> tuple:
    """(name or None for 'defer to the environment', source) from the argument or the context."""
    if per_call:
        return check_backend_name(per_call, "argument 'backend'"), "argument backend="
    ctx = _context_backend.get()
    if ctx is not None:
        return ctx
    return None, None


# os.environ's own bytes mapping (POSIX CPython) is read without encoding the key on every call;
# os.environ.get where it is absent.
_environ_bytes = getattr(os.environ, "_data", None)
if isinstance(_environ_bytes, dict):
    def _getenv(name: bytes):
        return _environ_bytes.get(name)
else:
    def _getenv(name: bytes):
        return os.environ.get(name.decode())


def plan(op: str, device: torch.device, backend: Optional[str] = None) -> _lib.Plan:
    """libcc1d's dispatch plan for `op` on `device` (cached; the environment is part of the key),
    with backends that failed at run time marked unavailable."""
    asked, source = _requested(backend)
    codes = _device_codes(device)
    env = (_getenv(b"CAUSAL_CONV1D_BACKEND"), _getenv(b"CAUSAL_CONV1D_STRICT"))
    key = (op, asked, codes, env)
    p = _plan_cache.get(key)  # a dict read is atomic; writes take the lock
    if p is None:
        p = _make_plan(op, asked, codes)
        with _cache_lock:
            _plan_cache[key] = p
    if source is not None:  # not part of the key: one plan serves every way of asking
        p = p._replace(source=source)
    if _broken and codes is not None:
        cands = []
        for c in p.candidates:
            why = _broken.get((c.backend,) + (codes if not c.host_copies else (_lib.DEVICE_CPU, 0)))
            cands.append(c._replace(available=False, reason=why) if why and c.available else c)
        p = p._replace(candidates=tuple(cands))
    return p


def _aten_candidate() -> _lib.Candidate:
    return _lib.Candidate("aten", True, False, True, "aten: torch ops on the tensors' device")


def _make_plan(op: str, asked: Optional[str], codes) -> _lib.Plan:
    lib = _lib.library()
    if codes is not None and lib is not None:
        return lib.plan(op, asked or "auto", *codes)
    # No libcc1d, or a device it does not serve (meta, ...): torch ops only.
    name = asked or "auto"
    if name in ("auto", "aten"):
        return _lib.Plan(name, "default", strict_mode(), (_aten_candidate(),))
    why = _lib.load_error() if lib is None else "libcc1d serves cpu and cuda tensors only"
    return _lib.Plan(name, "argument", strict_mode(), (_lib.Candidate(name, False, False, False, why),))


def _mark_broken(backend: str, device_type: int, index: int, why: str) -> None:
    with _cache_lock:
        _broken[(backend, device_type, index)] = why
        _routes.clear()


# ---- the direct route -------------------------------------------------------------------------


class Route(NamedTuple):
    """A libcc1d backend that serves a call on the tensors where they are, and the answer
    last_backend() gives for it."""

    backend_id: int
    choice: BackendChoice


_routes: dict = {}
_NOT_CACHED = object()
# Statuses of a call libcc1d refused before choosing a backend: its arguments are wrong.
INVALID_CALL = (_lib.ERR_INVALID_ARGUMENT, _lib.ERR_INVALID_TYPE, _lib.ERR_NULL_POINTER)


def route(op: str, t: torch.Tensor, backend: Optional[str]) -> Optional[Route]:
    """Where a call of `op` on t's device goes when it needs none of run()'s machinery: the
    plan's first candidate is a libcc1d backend that runs on the tensors where they are (no host
    copies, no fallback to announce, nothing broken). None otherwise: run() decides. Cached
    under plan()'s key."""
    if t.is_cuda:
        index = t.get_device()
    elif t.is_cpu:
        index = -1
    else:
        return None
    key = (op, backend, _context_backend.get(), index, _getenv(b"CAUSAL_CONV1D_BACKEND"),
           _getenv(b"CAUSAL_CONV1D_STRICT"))
    r = _routes.get(key, _NOT_CACHED)
    if r is _NOT_CACHED:
        device = t.device
        p = plan(op, device, backend)
        c = p.candidates[0] if p.candidates else None
        r = None
        if c is not None and c.available and not c.host_copies and not c.runs_in_host:
            r = Route(_lib.BACKEND_IDS[c.backend], _choice(p, c, device, [], op))
        with _cache_lock:
            _routes[key] = r
    return r


def served(r: Route) -> None:
    """Records a call that went by route() (last_backend(), the debug log)."""
    _record(r.choice)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s served by %s", r.choice.op, r.choice)


def after_direct(r: Route, entry: str, status: int, op_call: Callable[[], OpCall], backend: str) -> bool:
    """An op's fast path, after it called libcc1d's `entry` (_pack.ArgPacker.call) for a call
    that went by route r and got `status`. False when libcc1d refused the arguments (it wrote
    nothing; the caller validates in Python to word the error as every backend does). Any other
    failure is run()'s to handle, with the OpCall that op_call() builds for the same tensors."""
    if status == _lib.OK:
        served(r)
        return True
    if status in INVALID_CALL:
        return False
    run(op_call(), backend or None, error=_lib.library().error_for(status, entry))
    return True


# The current stream's handle without building a torch.cuda.Stream object each call (what
# torch.compile's generated code calls); the public API where this torch lacks it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def stream_of(t: torch.Tensor) -> int:
    """The current CUDA stream of t's device (0 for host tensors): where libcc1d launches."""
    if not t.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(t.get_device())
    return torch.cuda.current_stream(t.device).cuda_stream


# ---- announcing fallbacks -----------------------------------------------------------------


def _describe(name: str, device: torch.device, host_copies: bool) -> str:
    d = _device_str(device)
    if name == "aten":
        return f"torch ops on {d}"
    if name == "nvrtc":
        return f"libcc1d NVRTC kernels on {d}"
    what = "libcc1d CPU kernels" if name == "cpu" else "libcc1d emulator"
    return what + (f", copying the {d} tensors to host memory and back" if host_copies else "")


def _announce_fallback(failures: list, served: str, device: torch.device, host_copies: bool, strict: bool) -> None:
    tried = "; ".join(f"backend '{n}' cannot serve {_device_str(device)}: {why}" for n, why in failures)
    message = (f"causal_conv1d: {tried}. Falling back to '{served}' ({_describe(served, device, host_copies)}). "
               f"Set CAUSAL_CONV1D_STRICT=1 to make this an error, or pick a backend with backend=, "
               f"causal_conv1d.use_backend() or CAUSAL_CONV1D_BACKEND.")
    if strict:
        raise StrictModeError(message + " (CAUSAL_CONV1D_STRICT=1 forbids the fallback.)")
    if _lib.library() is None and all(n != "aten" for n, _ in failures):
        key = _LOAD_KEY  # the import already said it once
    else:
        key = ("fallback", tuple(failures), served, device.type)
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


def _run_with_host_copies(call: OpCall, backend_id: int) -> None:
    host = {k: (None if t is None else t.cpu()) for k, t in call.tensors.items()}
    call.run_lib(host, backend_id, None)
    for name in call.written:
        if call.tensors[name] is not None:
            call.tensors[name].copy_(host[name])


def _choice(p: _lib.Plan, c: _lib.Candidate, device: torch.device, failures: list, op: str) -> BackendChoice:
    dstr = _device_str(device)
    if p.requested == "auto":
        if failures:
            reason = (f"auto: fell back to {_describe(c.backend, device, c.host_copies)}; " +
                      "; ".join(f"'{n}' unavailable ({w})" for n, w in failures))
        else:
            reason = f"auto: {device.type} tensors are served by {_describe(c.backend, device, c.host_copies)}"
    else:
        reason = f"requested by {p.source}: {_describe(c.backend, device, c.host_copies)}"
    return BackendChoice(backend=c.backend, requested=p.requested, source=p.source, device=dstr, reason=reason,
                         fallback_from=tuple(failures), host_copies=c.host_copies, op=op)


def run(call: OpCall, backend: Optional[str] = None, error: Optional[Exception] = None) -> BackendChoice:
    """Runs `call` with the first backend of the plan that can serve it; returns the choice.
    The common case goes by route(); anything else (another backend, a fallback, a failure, after
    which libcc1d has written nothing) walks the plan. `error`: what the call by route() already
    raised (an op's fast path), taken as the first backend's answer instead of calling again."""
    device = call.device
    x = next(iter(call.tensors.values()))  # the first tensor; every tensor of a call is on its device
    r = route(call.op, x, backend) if error is None else None
    if r is not None:
        try:
            call.run_lib(call.tensors, r.backend_id, stream_of(x))
        except _lib.LibraryError as e:
            error = e  # the walk below retries, falls back or raises
        else:
            served(r)
            return r.choice
    p = plan(call.op, device, backend)
    failures = []
    for i, c in enumerate(p.candidates):
        if not c.available:
            failures.append((c.backend, c.reason))
            continue
        if failures:
            _announce_fallback(failures, c.backend, device, c.host_copies, p.strict)
        try:
            if error is not None:  # the first available candidate is the route's backend
                pending, error = error, None
                raise pending
            if c.runs_in_host:
                call.run_aten()
            elif c.host_copies:
                _run_with_host_copies(call, _lib.BACKEND_IDS[c.backend])
            else:
                call.run_lib(call.tensors, _lib.BACKEND_IDS[c.backend], stream_of(x))
        except _lib.LibraryRuntimeError as e:
            retryable = e.status in (_lib.ERR_UNSUPPORTED, _lib.ERR_BACKEND_UNAVAILABLE, _lib.ERR_COMPILE)
            # Remember a backend that cannot work here, so later calls neither retry nor warn again.
            if e.status in (_lib.ERR_BACKEND_UNAVAILABLE, _lib.ERR_COMPILE):
                codes = (_lib.DEVICE_CPU, 0) if c.host_copies else _device_codes(device)
                _mark_broken(c.backend, *codes, str(e))
            if p.requested == "auto" and retryable and i + 1 < len(p.candidates):
                failures.append((c.backend, str(e)))
                continue
            if e.status == _lib.ERR_BACKEND_UNAVAILABLE:
                raise _lib.BackendUnavailableError(
                    f"causal_conv1d: backend '{c.backend}' (requested by {p.source}) cannot serve "
                    f"{_device_str(device)}: {e}", e.status) from e
            raise
        choice = _choice(p, c, device, failures, call.op)
        _record(choice)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s served by %s", call.op, choice)
        return choice
    name, why = failures[0]
    dstr = _device_str(device)
    if p.requested != "auto":
        raise _lib.BackendUnavailableError(
            f"causal_conv1d: backend '{name}' (requested by {p.source}) cannot serve {dstr}: {why}")
    raise _lib.BackendUnavailableError(
        "causal_conv1d: no backend can serve " + dstr + ": " + "; ".join(f"'{n}': {w}" for n, w in failures))


def explain(device, backend: Optional[str] = None, op: str = "fwd") -> dict:
    """What a call on `device` would use now, and why — without running or warning."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_available() else 0)
    p = plan(op, device, backend)
    tried = []
    for c in p.candidates:
        ok, why = c.available, c.reason
        if ok and device.type == "cuda" and c.backend == "aten" and not torch.cuda.is_available():
            ok, why = False, "torch.cuda.is_available() is False (no CUDA device, or a CPU-only torch)"
        if ok:
            return {"requested": p.requested, "source": p.source, "backend": c.backend,
                    "serves": _describe(c.backend, device, c.host_copies), "fallback": bool(tried),
                    "rejected": [{"backend": n, "reason": w} for n, w in tried], "strict_mode": p.strict}
        tried.append((c.backend, why))
    return {"requested": p.requested, "source": p.source, "backend": None, "serves": None, "fallback": False,
            "rejected": [{"backend": n, "reason": w} for n, w in tried]}
