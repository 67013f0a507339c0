"""The doctor's checks: the torch / CUDA / Python / driver version matrix and the state of the
installation, each a dict {name, status (ok|warn|fail|skip), message, fix}.

Each check is a pure function of facts (versions, paths, the doctor's sections), so every rule
is unit-tested with made-up facts; run_all() gathers the facts of this process. Versions of
torchvision and torchaudio are read from their package metadata, without importing them.
"""

from __future__ import annotations

import re
import sys
from typing import Optional

# The oldest driver (Linux) that runs binaries of each CUDA major (prior-art §2).
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# torchvision 0.(N+15) and torchaudio 2.N belong to torch 2.N.
TORCHVISION_OFFSET = 15


def check(name: str, status: str, message: str, fix: Optional[str] = None) -> dict:
    return {"name": name, "status": status, "message": message, "fix": fix}


def major_minor(version: Optional[str]) -> Optional[tuple]:
    """(2, 6) from "2.6.0+cu124", (12, 4) from "12.4"; None when absent or unparsable."""
    m = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(m[1]), int(m[2])) if m else None


# ---- the version matrix ---------------------------------------------------------------------------


def torch_cuda_vs_driver(torch_cuda: Optional[str], driver_cuda: Optional[str], driver_reason: Optional[str]) -> dict:
    name = "torch CUDA vs driver"
    if driver_cuda is None:
        return check(name, "skip", f"no CUDA driver ({driver_reason or 'not found'})")
    if torch_cuda is None:
        return check(name, "warn", f"torch is a CPU-only build but a CUDA {driver_cuda} driver is present",
                     "install a CUDA build of torch (pip install torch; see https://pytorch.org/get-started)")
    t, d = major_minor(torch_cuda), major_minor(driver_cuda)
    if t is None or d is None:
        return check(name, "warn", f"cannot compare torch's CUDA {torch_cuda!r} with the driver's {driver_cuda!r}")
    if d[0] < t[0]:
        return check(name, "fail", f"torch is built for CUDA {torch_cuda} but the driver supports CUDA {driver_cuda}",
                     f"update the NVIDIA driver to >= {MIN_DRIVER.get(t[0], 'one for CUDA ' + str(t[0]))}, or "
                     f"install a torch built for CUDA {d[0]}.x (pip install torch --index-url "
                     f"https://download.pytorch.org/whl/cu{d[0]}{d[1]})")
    if d < t:
        return check(name, "ok", f"torch CUDA {torch_cuda} on a CUDA {driver_cuda} driver (same major: minor-version "
                                 f"compatibility; code that needs a newer driver feature fails)")
    return check(name, "ok", f"torch CUDA {torch_cuda}, driver CUDA {driver_cuda}")


def companion(package: str, installed: Optional[str], requires: list, torch_version: Optional[str]) -> dict:
    """torchvision / torchaudio against the running torch: their pinned `torch==` requirement when
    the metadata has one, else the release pairing (torchvision 0.(N+15), torchaudio 2.N)."""
    name = f"{package} vs torch"
    if installed is None:
        return check(name, "skip", f"{package} is not installed")
    t = major_minor(torch_version)
    if t is None:
        return check(name, "skip", f"{package} {installed} installed; torch's version is unknown")
    pin = next((m[1] for r in requires for m in [re.match(r"torch\s*==\s*([\w.+]+)", r)] if m), None)
    if pin is not None:
        wanted_torch = major_minor(pin)
    else:
        v = major_minor(installed)
        wanted_torch = None if v is None else (v[0] + 2, v[1] - TORCHVISION_OFFSET) if package == "torchvision" else v
    matching = f"0.{t[1] + TORCHVISION_OFFSET}" if package == "torchvision" else f"{t[0]}.{t[1]}"
    if wanted_torch is not None and wanted_torch != t:
        built = f"{wanted_torch[0]}.{wanted_torch[1]}"
        return check(name, "fail", f"{package} {installed} was built for torch {built}; torch {torch_version} is "
                                   f"running (its C++ extension will fail with undefined symbols)",
                     f"install {package}=={matching}.* for torch {t[0]}.{t[1]} (pip install '{package}=={matching}.*')")
    return check(name, "ok", f"{package} {installed} matches torch {torch_version}")


def python_vs_torch(wheel_tags: list, python: tuple, torch_error: Optional[str]) -> dict:
    """The CPython tags of torch's wheel (from its WHEEL file) against this interpreter."""
    name = "Python vs torch build"
    here = f"cp{python[0]}{python[1]}"
    interpreters = sorted({t.split("-")[0] for t in wheel_tags if t.startswith("cp")})
    if not wheel_tags:
        return check(name, "skip" if torch_error is None else "fail",
                     "torch's wheel tags are unknown" + ("" if torch_error is None else f"; torch fails: {torch_error}"),
                     None if torch_error is None else "reinstall torch for this Python (python -m pip install "
                                                      "--force-reinstall torch)")
    if interpreters and here not in interpreters:
        return check(name, "fail", f"torch's wheel is built for {', '.join(interpreters)}; this is Python "
                                   f"{python[0]}.{python[1]} ({here})",
                     f"reinstall torch with this interpreter: {sys.executable} -m pip install --force-reinstall torch")
    return check(name, "ok", f"torch's wheel ({', '.join(interpreters) or wheel_tags[0]}) matches Python "
                             f"{python[0]}.{python[1]}")


def nvrtc_wheel(major: int) -> str:
    """NVRTC's PyPI package for a CUDA major (libcc1d's nvrtc_wheel): from CUDA 13 on it has no
    -cuXX suffix (nvidia-cuda-nvrtc-cu13 is an empty placeholder)."""
    return "nvidia-cuda-nvrtc" if major >= 13 else f"nvidia-cuda-nvrtc-cu{major}"


def nvrtc_vs_driver(candidates: list, driver_cuda: Optional[str], devices: tuple = ()) -> list:
    """An NVRTC of a newer CUDA major than the driver makes code the driver cannot load.
    `devices`: the report's nvrtc devices; those usable without NVRTC (prebuilt kernels only) are
    named when none is found."""
    name = "NVRTC vs driver"
    d = major_minor(driver_cuda)
    if d is None:
        return [check(name, "skip", "no CUDA driver")]
    usable = [c for c in candidates if c.get("version") and not c.get("error")]
    if not usable:
        prebuilt = [f"device {v['index']} ({v['mode']})" for v in devices if v.get("usable") and not v.get("nvrtc")]
        meanwhile = (f"; {', '.join(prebuilt)} run(s) prebuilt kernels meanwhile, and a call needing another falls "
                     f"back" if prebuilt else "")
        return [check(name, "warn", "no NVRTC found" + meanwhile,
                      f"pip install {nvrtc_wheel(d[0])} (or install the CUDA toolkit, or set CAUSAL_CONV1D_NVRTC)")]
    out = []
    for c in usable:
        v = major_minor(c["version"])
        if v is not None and v[0] > d[0]:
            out.append(check(name, "warn", f"NVRTC {c['version']} ({c['path']}) is newer than the driver (CUDA "
                                           f"{driver_cuda}): its code cannot load here, so it is not used",
                             f"update the NVIDIA driver to >= {MIN_DRIVER.get(v[0], 'CUDA ' + str(v[0]))}, or pip "
                             f"install nvidia-cuda-nvrtc-cu{d[0]} for an NVRTC this driver runs"))
    if len(out) == len(usable):
        out = [dict(c, status="fail") for c in out]
    return out or [check(name, "ok", f"{len(usable)} NVRTC(s), none newer than the driver (CUDA {driver_cuda})")]


def precompiled_tiers(tiers: list, devices: list) -> list:
    """Whether CAUSAL_CONV1D_CACHE_PATH's precompiled tiers serve each usable GPU device (the
    report's nvrtc devices): by its own keys, or with another NVRTC's kernels standing in for
    compiles; and which tiers are skipped. Nothing when no tier is set."""
    name = "precompiled tiers"
    out = [check(name, "warn", f"the tier {t['dir']} is skipped: {t['problem']}",
                 "make it with `causal-conv1d precompile --out DIR` (owned by root or by you, writable by no one "
                 "else), or take it out of CAUSAL_CONV1D_CACHE_PATH") for t in tiers if t.get("problem")]
    if not tiers:
        return out
    for d in devices:
        if not d["usable"]:
            continue
        where = f"device {d['index']} ({d['target']})"
        uses = d.get("precompiled") or []
        own = [u for u in uses if u["use"] == "own keys"]
        stand = [u for u in uses if u["use"] == "stands in"]
        if own:
            out.append(check(name, "ok", f"{where}: {own[0]['tier']} holds kernels by this node's own keys "
                                         f"({own[0]['compiler']}, {own[0]['target']})"))
        elif stand:
            mine = f"NVRTC {d['nvrtc_version']}" if d.get("nvrtc_version") else "no NVRTC"
            out.append(check(name, "ok", f"{where}: {stand[0]['tier']}'s {stand[0]['compiler']} kernels stand in for "
                                         f"compiles (this node chose {mine}); a kernel it lacks is compiled"))
        else:
            why = "; ".join(f"{u['tier']} ({u['compiler']}, {u['target']}): {u['use']}" for u in uses)
            first = "link the shipped PTX tier's kernels or compile" if d.get("ptx_tier") == "serves" else "compile"
            out.append(check(name, "warn", f"{where}: no precompiled kernel loads here, so first calls {first}: " +
                             (why or "no tier lists a target for its arch (or was made before targets-v1)"),
                             "run `causal-conv1d precompile --out DIR` for this node's arch and driver (--arch, "
                             "--driver-cuda) into a tier of CAUSAL_CONV1D_CACHE_PATH"))
    return out


# ---- the installation -----------------------------------------------------------------------------


def installation(report: dict) -> list:
    env = report["environment"]
    out = []
    if env["torch"]["error"]:
        out.append(check("torch", "fail", f"torch cannot be imported: {env['torch']['error']}",
                         "reinstall torch (python -m pip install --force-reinstall torch)"))
    lib = env["libcc1d"]
    if lib["error"]:
        out.append(check("libcc1d", "warn", f"libcc1d is not loaded: {lib['error']}; torch ops serve every call",
                         "reinstall causal-conv1d (pip install --force-reinstall causal-conv1d)"))
    else:
        out.append(check("libcc1d", "ok", f"libcc1d {lib['version']} (ABI {lib['abi_version']}) from {lib['path']}"))
    ct = env["cc1d_torch"]
    if ct["loaded"]:
        out.append(check("cc1d_torch", "ok", f"the libtorch op library {ct['path']} serves the ops"))
    elif ct["path"]:
        out.append(check("cc1d_torch", "warn", f"{ct['path']} is not used: {ct['reason']}; the ctypes path serves",
                         "rebuild cc1d_torch against this torch (cmake --build), or unset CAUSAL_CONV1D_TORCH_LIBRARY"))
    cache = report["cache"]
    if cache["dir"] and not cache["writable"]:
        out.append(check("cache", "warn", cache["reason"], "set CAUSAL_CONV1D_CACHE_DIR to a writable directory"))
    if report["hardware"]["devices"] and not env["torch"]["cuda_available"] and env["torch"]["error"] is None:
        t = env["torch"]
        why = "is a CPU-only build" if t["cuda"] is None else f"(CUDA {t['cuda']}) sees no CUDA device"
        out.append(check("torch sees the GPU", "warn",
                         f"libcc1d sees {len(report['hardware']['devices'])} GPU(s) but torch {t['version']} {why}",
                         "install a CUDA build of torch that matches the driver (pip install torch)"))
    return out


# ---- this process -----------------------------------------------------------------------------------


def _metadata(package: str) -> tuple:
    """(version, requirements, wheel tags) of an installed distribution, or (None, [], [])."""
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None, [], []
    tags = [line.split(":", 1)[1].strip() for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")]
    return dist.version, list(dist.requires or []), tags


def run_all(report: dict) -> list:
    env, hw = report["environment"], report["hardware"]
    torch = env["torch"]
    driver_cuda = hw["driver"]["cuda_version"]  # known once the library loads, even without a device
    out = installation(report)
    out.append(torch_cuda_vs_driver(torch["cuda"], driver_cuda, hw["driver"]["reason"]))
    for package in ("torchvision", "torchaudio"):
        version, requires, _ = _metadata(package)
        out.append(companion(package, version, requires, torch["version"]))
    _, _, tags = _metadata("torch")
    out.append(python_vs_torch(tags, sys.version_info[:2], torch["error"]))
    out += nvrtc_vs_driver(report["nvrtc"]["candidates"], driver_cuda, report["nvrtc"]["devices"])
    out += precompiled_tiers(report["cache"]["tiers"], report["nvrtc"]["devices"])
    return out
