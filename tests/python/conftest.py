"""pytest setup for the causal_conv1d package tests.

Run against an installed package (`pip install .`), or against the source tree with
    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=<build>/libcc1d.so pytest
The header line printed by pytest says which package and which libcc1d were loaded.
"""

import zlib

import pytest
import torch

import causal_conv1d
from causal_conv1d import _diag, _dispatch, _lib, _ops


def pytest_report_header(config):
    lib = _lib.library()
    where = lib.path if lib is not None else f"NOT LOADED ({_lib.load_error()})"
    return [
        f"causal_conv1d {causal_conv1d.__version__} from {causal_conv1d.__file__}",
        f"libcc1d: {where}",
        f"torch {torch.__version__} (cuda {torch.version.cuda}, available: {torch.cuda.is_available()}); "
        f"custom op: {_ops.USE_CUSTOM_OP}",
    ]


@pytest.fixture(autouse=True)
def _isolate(monkeypatch):
    """Every test: outputs poisoned with NaN before a backend writes them; no backend/strict
    environment leaking in from the shell or another test."""
    monkeypatch.setattr(_ops, "poison_outputs", True)
    monkeypatch.delenv("CAUSAL_CONV1D_BACKEND", raising=False)
    monkeypatch.delenv("CAUSAL_CONV1D_STRICT", raising=False)
    _dispatch._tls.last = None  # last_backend() reports only this test's calls
    yield


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the test's id: fresh inputs per test, reproducible."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def lib():
    """The loaded libcc1d; a test that needs it fails (not skips) when it is missing."""
    lib = _lib.library()
    if lib is None:
        pytest.fail(f"libcc1d is not loaded: {_lib.load_error()}")
    return lib


@pytest.fixture
def fresh_dispatch():
    """Forget cached availability and emitted warnings, before and after the test."""
    _dispatch._clear_caches()
    _diag._reset_warnings()
    yield
    _dispatch._clear_caches()
    _diag._reset_warnings()
