"""Diagnostics shared by the package: the logger, strict mode and once-per-process warnings.

A fallback from one backend to another is never silent: it is reported with one
``CausalConv1dWarning`` per process and reason (whatever the ``warnings`` filters say about
repeats), or turned into an error when ``CAUSAL_CONV1D_STRICT=1``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import Optional
import warnings

logger = logging.getLogger("causal_conv1d")

TRUE_WORDS = {"1", "true", "yes", "on"}  # how libcc1d reads an environment switch
FALSE_WORDS = {"", "0", "false", "no", "off"}


class CausalConv1dWarning(UserWarning):
    """A backend fallback, or a library that could not be loaded."""


class StrictModeError(RuntimeError):
    """Raised instead of a fallback warning when CAUSAL_CONV1D_STRICT=1."""


def strict_mode() -> bool:
    """Whether CAUSAL_CONV1D_STRICT asks for fallbacks to be errors (read at every call).

    libcc1d decides this for every call it plans (cc1d_plan.strict); this copy of its rule serves
    only where there is no library to ask (the import-time check, and plans without libcc1d).
    tests/python/test_dispatch.py proves the two agree on every value."""
    value = os.environ.get("CAUSAL_CONV1D_STRICT", "").strip().lower()
    if value in TRUE_WORDS:
        return True
    if value not in FALSE_WORDS:
        warn_once(("strict-value", value), f"causal_conv1d: CAUSAL_CONV1D_STRICT={value!r} is not one of "
                                           f"1/0/true/false/yes/no/on/off; treating it as 1 (strict)")
        return True
    return False


_warned_lock = threading.Lock()
_warned: set = set()


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def _user_stacklevel() -> int:
    """stacklevel (for a warnings.warn in warn_once) of the first frame outside this package,
    torch and importlib: the user's call or import line."""
    skip = [_PKG_DIR + os.sep]
    try:
        import torch

        skip.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    except Exception:  # pragma: no cover
        pass
    frame = sys._getframe(1)  # warn_once
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name  # warnings.warn skips these itself
        if not internal and not any(name.startswith(p) for p in skip):
            return level
        frame = frame.f_back
        if not internal:
            level += 1
    return 1


def warn_once(key, message: str, stacklevel: Optional[int] = None) -> bool:
    """Emits `message` as a CausalConv1dWarning the first time `key` is seen in this process,
    attributed to the user's frame (or `stacklevel` frames above the caller when given).

    Returns True when the warning was emitted now."""
    with _warned_lock:
        if key in _warned:
            logger.debug("(repeated, not re-emitted) %s", message)
            return False
        _warned.add(key)
    # The user's warnings filters still apply (e.g. "error" or "ignore" for this category).
    logger.debug("warning: %s", message)
    level = _user_stacklevel() if stacklevel is None else stacklevel + 1
    warnings.warn(message, CausalConv1dWarning, stacklevel=level)
    return True


def index_check_wanted(x, fn: str) -> bool:
    """Whether CAUSAL_CONV1D_CHECK_INDICES asks `fn` to check its index tensors on the host before a
    call on CUDA tensor `x`, and that check can run. Inside CUDA-graph capture it cannot: its
    device-to-host copy and synchronisation would invalidate the user's capture. There the call runs
    unchecked, as without the variable, and a warning says so once."""
    if not x.is_cuda or os.environ.get("CAUSAL_CONV1D_CHECK_INDICES", "").strip() in ("", "0"):
        return False
    import torch

    if torch.cuda.is_current_stream_capturing():
        warn_once(("check-indices-in-capture", fn),
                  f"{fn}: CAUSAL_CONV1D_CHECK_INDICES is skipped inside CUDA-graph capture (its device-to-host "
                  f"copy cannot be captured); the captured call runs unchecked, as without the variable. "
                  f"Check the indices in an eager call before capturing")
        return False
    return True


def already_warned(key) -> bool:
    with _warned_lock:
        return key in _warned


def _reset_warnings() -> None:
    """Testing aid: forget which warnings were emitted."""
    with _warned_lock:
        _warned.clear()
