"""causal_conv1d: the depthwise causal 1-D convolution of Mamba-style models.

A drop-in replacement for the Dao-AILab `causal_conv1d` package, backed by libcc1d (a C
library called through ctypes; no libtorch linkage, one wheel for every Python, torch and
CUDA version).

    from causal_conv1d import causal_conv1d_fn
    out = causal_conv1d_fn(x, weight, bias, activation="silu")

Backends: "cpu", "aten", "nvrtc", "emulate" or "auto"; choose with the `backend=` argument,
`with causal_conv1d.use_backend("aten"):` or CAUSAL_CONV1D_BACKEND. `last_backend()` says which
one served the last call on this thread, and why. `python -m causal_conv1d report` describes the
installation.

Importing never fails because of the binary: without a loadable libcc1d one warning says why and
the "aten" backend (torch ops) serves; CAUSAL_CONV1D_STRICT=1 makes that an ImportError instead.

Versions: `causal_conv1d.__version__` is the upstream API level this package implements
("1.6.1"), because clients compare it with upstream releases; this package's own version is
`causal_conv1d.package_version` (also importlib.metadata.version("causal-conv1d") when
installed, and `causal-conv1d --version`).
"""

from ._version import __version__ as package_version, upstream_api_version as __version__
from . import _dispatch

_dispatch.on_import()

from ._diag import CausalConv1dWarning, StrictModeError  # noqa: E402
from ._dispatch import BACKENDS, BackendChoice, explain as explain_backend, last_backend, use_backend  # noqa: E402
from ._lib import BackendUnavailableError, LibraryError, LibraryLoadError  # noqa: E402
from . import causal_conv1d_varlen  # noqa: E402,F401  (defines causal_conv1d::varlen_states)
from .causal_conv1d_interface import (  # noqa: E402
    causal_conv1d_fn,
    causal_conv1d_ref,
    causal_conv1d_update,
    causal_conv1d_update_ref,
)


def library_path():
    """Path of the loaded libcc1d, or None when it could not be loaded (see library_error())."""
    from . import _lib

    lib = _lib.library()
    return None if lib is None else lib.path


def library_error():
    """Why libcc1d could not be loaded, or None."""
    from . import _lib

    return _lib.load_error()


__all__ = [
    "__version__",
    "package_version",
    "BACKENDS",
    "BackendChoice",
    "BackendUnavailableError",
    "CausalConv1dWarning",
    "LibraryError",
    "LibraryLoadError",
    "StrictModeError",
    "causal_conv1d_fn",
    "causal_conv1d_ref",
    "causal_conv1d_update",
    "causal_conv1d_update_ref",
    "explain_backend",
    "last_backend",
    "library_error",
    "library_path",
    "use_backend",
]
