"""`import causal_conv1d` never fails because of the binary (one warning, aten serves), unless
CAUSAL_CONV1D_STRICT=1. Each case runs in a fresh interpreter."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import causal_conv1d

PKG_DIR = Path(causal_conv1d.__file__).resolve().parent

PROBE = r"""
import json, warnings
with warnings.catch_warnings(record=True) as rec:
    warnings.simplefilter("always")
    import causal_conv1d, torch
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 8, 20, generator=g); w = torch.randn(8, 4, generator=g)
    out = causal_conv1d.causal_conv1d_fn(x, w, activation="silu")
    first = causal_conv1d.last_backend()
    causal_conv1d.causal_conv1d_fn(x, w)
    ref = causal_conv1d.causal_conv1d_ref(x.double(), w.double(), activation="silu")
print(json.dumps({
    "file": causal_conv1d.__file__,
    "warnings": [str(r.message) for r in rec if r.category.__name__ == "CausalConv1dWarning"],
    "backend": first.backend, "reason": first.reason,
    "err": float((out.double() - ref).abs().max()),
    "library_path": causal_conv1d.library_path(),
    "library_error": causal_conv1d.library_error(),
}))
"""


def _env(**changes):
    env = dict(os.environ)
    env.pop("CAUSAL_CONV1D_STRICT", None)
    env.pop("CAUSAL_CONV1D_BACKEND", None)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _run(code, env, cwd=None):
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _probe(env, cwd=None):
    r = _run(PROBE, env, cwd)
    assert r.returncode == 0, f"import/call failed:\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check_served_by_aten(res, path_fragment, error_fragment):
    assert res["library_path"] is None
    assert len(res["warnings"]) == 1, f"expected exactly one warning, got {res['warnings']}"
    w = res["warnings"][0]
    assert path_fragment in w, f"the warning must name the path tried: {w}"
    assert error_fragment in w, f"the warning must carry the loader's error: {w}"
    assert "To fix" in w and "'aten'" in w
    assert res["backend"] == "aten"
    assert res["err"] < 1e-5


def test_missing_library_via_env(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcc1d.so")
    res = _probe(_env(CAUSAL_CONV1D_LIBRARY=missing))
    _check_served_by_aten(res, missing, "No such file")
    assert "CAUSAL_CONV1D_LIBRARY is set" in res["warnings"][0]


def test_library_that_is_not_a_shared_object(tmp_path):
    bogus = tmp_path / "libcc1d.so"
    bogus.write_text("this is not an ELF file\n" * 20)
    res = _probe(_env(CAUSAL_CONV1D_LIBRARY=str(bogus)))
    _check_served_by_aten(res, str(bogus), "invalid ELF header")


def test_package_copied_without_lib(tmp_path):
    dst = tmp_path / "site" / "causal_conv1d"
    shutil.copytree(PKG_DIR, dst, ignore=shutil.ignore_patterns("lib", "__pycache__", "*.so*"))
    assert not (dst / "lib").exists()
    pythonpath = os.pathsep.join([str(tmp_path / "site")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    res = _probe(_env(CAUSAL_CONV1D_LIBRARY=None, PYTHONPATH=pythonpath), cwd=str(tmp_path))
    assert Path(res["file"]).resolve().parent == dst.resolve(), res["file"]
    _check_served_by_aten(res, str(dst / "lib" / "libcc1d.so"), "no such file")


def test_strict_mode_makes_a_missing_library_an_import_error(tmp_path):
    missing = str(tmp_path / "libcc1d.so")
    r = _run("import causal_conv1d", _env(CAUSAL_CONV1D_LIBRARY=missing, CAUSAL_CONV1D_STRICT="1"))
    assert r.returncode != 0
    assert "LibraryLoadError" in r.stderr and missing in r.stderr and "CAUSAL_CONV1D_STRICT=1" in r.stderr


def test_strict_mode_with_the_library_imports_fine():
    if causal_conv1d.library_path() is None:
        pytest.fail(f"libcc1d is not loaded: {causal_conv1d.library_error()}")
    r = _run("import causal_conv1d; print(causal_conv1d.library_path())", _env(CAUSAL_CONV1D_STRICT="1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == causal_conv1d.library_path()


def test_abi_version_mismatch_is_refused(monkeypatch):
    """A library with another ABI version is not used (checked in-process, on the loader)."""
    from causal_conv1d import _lib

    lib = _lib.library()
    if lib is None:
        pytest.fail(f"libcc1d is not loaded: {_lib.load_error()}")
    monkeypatch.setattr(_lib, "ABI_VERSION", 2)
    loaded, err, _ = _lib._try_load()
    assert loaded is None and "cc1d_abi_version() is 1, this package needs 2" in err


def test_torch_site_packages_is_an_nvrtc_search_root(lib):
    """libcc1d can find the NVRTC wheel torch depends on even when it was loaded from a build
    tree: the package adds torch's site-packages to CAUSAL_CONV1D_NVRTC_SEARCH_PATH."""
    import os
    from pathlib import Path

    import torch

    site = str(Path(torch.__file__).resolve().parent.parent)
    assert site in os.environ.get("CAUSAL_CONV1D_NVRTC_SEARCH_PATH", "").split(":")


# What importing the package drags in: torch._dynamo (with sympy) took 1.1 s of `import
# causal_conv1d` under torch 2.15, for a decorator that only torch before 2.4 needs (_op_bwd.py).
IMPORTS = r"""
import json, sys
import torch
before = set(sys.modules)
import causal_conv1d, causal_conv1d.causal_conv1d_interface, causal_conv1d.causal_conv1d_varlen, causal_conv1d_cuda
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith("torch"))))
"""


@pytest.mark.skipif(not hasattr(torch.library, "custom_op"), reason="torch before 2.4 needs torch._dynamo's "
                    "assume_constant_result to read CAUSAL_CONV1D_DETERMINISTIC under torch.compile")
def test_import_leaves_torch_compile_unloaded():
    r = _run(IMPORTS, _env())
    assert r.returncode == 0, r.stderr
    added = json.loads(r.stdout.strip().splitlines()[-1])
    assert not [m for m in added if m.startswith(("torch._dynamo", "torch._inductor"))], added
