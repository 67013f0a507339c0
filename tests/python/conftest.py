"""pytest setup for the causal_conv1d package tests.

Run against an installed package (`pip install .`), or against the source tree with
    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=<build>/libcc1d.so pytest
The header line printed by pytest says which package and which libcc1d were loaded.
"""

import os
import random
import zlib
from pathlib import Path

import pytest
import torch

import causal_conv1d
from causal_conv1d import _diag, _dispatch, _lib, _ops, _torch_lib
from helpers import build_artifact


# This run's seed: CC1D_TEST_SEED when set (to replay a failure, as the C++ tests do), else fresh.
SEED = int(os.environ.get("CC1D_TEST_SEED") or random.SystemRandom().randrange(1 << 32))


def pytest_report_header(config):
    lib = _lib.library()
    where = lib.path if lib is not None else f"NOT LOADED ({_lib.load_error()})"
    return [
        f"random seed {SEED} (replay with CC1D_TEST_SEED={SEED})",
        f"causal_conv1d {causal_conv1d.package_version} (API {causal_conv1d.__version__}) from {causal_conv1d.__file__}",
        f"libcc1d: {where}",
        f"torch {torch.__version__} (cuda {torch.version.cuda}, available: {torch.cuda.is_available()}); "
        f"ops: {_ops.mode('fwd')}",
    ]


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"random seed {SEED} (replay with CC1D_TEST_SEED={SEED})")  # shown under -q too


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
    """A torch.Generator seeded from the run's seed and the test's id: fresh inputs per test and
    per run, reproducible with CC1D_TEST_SEED."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()) ^ SEED)


@pytest.fixture
def lib():
    """The loaded libcc1d; a test that needs it fails (not skips) when it is missing."""
    lib = _lib.library()
    if lib is None:
        pytest.fail(f"libcc1d is not loaded: {_lib.load_error()}")
    return lib


@pytest.fixture
def nvrtc(lib):
    """An NVRTC libcc1d can load; what needs one (precompile) is skipped, and says so, without one."""
    cands = lib.report()["backends"]["nvrtc"]["nvrtc_candidates"]
    if not any(c["version"] for c in cands):
        pytest.skip(f"no loadable NVRTC here (candidates: {cands}): precompile cannot run")


@pytest.fixture
def python_dispatch():
    """The test simulates a failure inside Python's dispatch (_dispatch.run, Library.call),
    which the ops of cc1d_torch (CAUSAL_CONV1D_TORCH_LIBRARY) do in C++ instead."""
    if _torch_lib.status()["loaded"]:
        pytest.skip("simulates a failure inside Python's _dispatch; cc1d_torch's ops dispatch in C++")


@pytest.fixture
def fresh_dispatch():
    """Forget cached availability and emitted warnings, before and after the test."""
    _dispatch._clear_caches()
    _diag._reset_warnings()
    yield
    _dispatch._clear_caches()
    _diag._reset_warnings()


@pytest.fixture
def cpu_unavailable(lib, monkeypatch, fresh_dispatch, python_dispatch):
    """libcc1d's plans report the cpu backend unavailable, for every op, with the reason in the
    returned dict (a test may change it): the fallback path on this GPU-less machine."""
    reasons = {"cpu": "simulated: cpu switched off"}
    real = lib.plan

    def fake(op, backend, device_type, device_index):
        p = real(op, backend, device_type, device_index)
        return p._replace(candidates=tuple(c._replace(available=False, reason=reasons["cpu"])
                                           if c.backend == "cpu" else c for c in p.candidates))

    monkeypatch.setattr(lib, "plan", fake)
    return reasons


@pytest.fixture
def fake_driver():
    """The test-only fake libcuda (tests/fake_driver/) of the CMake build."""
    path = build_artifact("fake_driver/libcuda.so.1")
    if path is None:
        pytest.skip("the fake libcuda is not built (cmake --build build/cmake builds fake_driver/libcuda.so.1)")
    return path


@pytest.fixture
def cc1d_torch_path():
    """The libtorch op library of the CMake build (CAUSAL_CONV1D_TORCH_LIBRARY when set)."""
    env = os.environ.get("CAUSAL_CONV1D_TORCH_LIBRARY", "").strip()
    path = Path(env) if env and env.lower() not in ("0", "off") else build_artifact("libcc1d_torch.so")
    if path is None or not path.exists():
        pytest.skip("cc1d_torch is not built (configure CMake with -DCC1D_TORCH_PYTHON=<python with torch>)")
    return path
