"""`causal-conv1d doctor`: the diagnosis as data. `diagnose()` returns one JSON-ready dict;
_cmd_doctor.py prints it as text or JSON. Nothing here raises for a broken environment: every
failure becomes a field with its reason.

The JSON schema (SCHEMA below, checked by validate(); README "causal-conv1d doctor"):
  schema            1
  ok                true when every device has a working backend and nothing failed
  exit_status       0 (ok), 1 (a device without a working backend, a failed self-test, a forced
                    or strict backend that cannot work)
  environment       python {version, executable, abi_tag}, torch {version, cuda, cxx11_abi,
                    cuda_available, device_count, error}, package {version, api_version, path},
                    libcc1d {path, version, abi_version, error},
                    cc1d_torch {path, loaded, reason, record}
  hardware          driver {available, path, cuda_version, reason}, devices [{index, name, sm,
                    sm_count, memory_bytes}]
  nvrtc             candidates [{path, origin, version, archs, error}], not_found [str],
                    ptx_tier {kernels, archs, nvrtc, bytes} (null: not compiled in),
                    devices [{index, usable, mode, target, nvrtc, nvrtc_version, reason, ptx_tier,
                    precompiled [{tier, target, compiler, min_driver, use}]}]
                    (ptx_tier: "serves", or why the shipped PTX tier does not; precompiled: the
                    targets CAUSAL_CONV1D_CACHE_PATH's tiers list for its arch, and whether their
                    kernels load by its own keys, stand in for compiles, or why not)
  cache             {dir, mode, writable, entries, bytes, reason, tiers [{dir, problem}]}
  dispatch          [{device, requested, source, backend, serves, fallback, strict_fallback,
                    rejected [{backend, reason}]}]: backend null when nothing can serve the device
  gpu_backend       {available, reason}: why there is (or is not) a GPU backend here
  self_test         [{device, backend, passed, max_abs_error, tolerance, first_ms, median_ms, error}]
  checks            [{name, status (ok|warn|fail|skip), message, fix}]
  extensions        only with --scan-extensions: see _extscan.scan()
Every string is valid UTF-8 (undecodable bytes become U+FFFD) and every number is finite
(a NaN error becomes null), so strict JSON parsers accept the output.
"""

from __future__ import annotations

import math
import os
import platform
import sys
import sysconfig
from pathlib import Path

from . import _doctor_checks, _lib

_ANY = object()
SCHEMA = {
    "schema": int, "ok": bool, "exit_status": int,
    "environment": {
        "python": {"version": str, "executable": str, "abi_tag": _ANY},
        "torch": {"version": _ANY, "cuda": _ANY, "cxx11_abi": _ANY, "cuda_available": bool, "device_count": int,
                  "error": _ANY},
        "package": {"version": str, "api_version": str, "path": str},
        "libcc1d": {"path": _ANY, "version": _ANY, "abi_version": _ANY, "error": _ANY},
        "cc1d_torch": {"path": _ANY, "loaded": bool, "reason": _ANY, "record": _ANY},
    },
    "hardware": {"driver": {"available": bool, "path": _ANY, "cuda_version": _ANY, "reason": _ANY},
                 "devices": [{"index": int, "name": str, "sm": int, "sm_count": int, "memory_bytes": int}]},
    "nvrtc": {"candidates": [{"path": str, "origin": str, "version": _ANY, "archs": list, "error": _ANY}],
              "not_found": list,
              "ptx_tier": _ANY,
              "devices": [{"index": int, "usable": bool, "mode": _ANY, "target": _ANY, "nvrtc": _ANY,
                           "nvrtc_version": _ANY, "reason": str, "ptx_tier": _ANY,
                           "precompiled": [{"tier": str, "target": str, "compiler": str, "min_driver": str,
                                            "use": str}]}]},
    "cache": {"dir": _ANY, "mode": _ANY, "writable": bool, "entries": int, "bytes": int, "reason": _ANY,
              "tiers": [{"dir": str, "problem": _ANY}]},
    "dispatch": [{"device": str, "requested": _ANY, "source": _ANY, "backend": _ANY, "serves": _ANY,
                  "fallback": bool, "strict_fallback": bool, "rejected": [{"backend": str, "reason": str}]}],
    "gpu_backend": {"available": bool, "reason": str},
    "self_test": [{"device": str, "backend": _ANY, "passed": bool, "max_abs_error": _ANY, "tolerance": _ANY,
                   "first_ms": _ANY, "median_ms": _ANY, "error": _ANY}],
    "checks": [{"name": str, "status": str, "message": str, "fix": _ANY}],
}
CHECK_STATUSES = ("ok", "warn", "fail", "skip")


def validate(report: dict, schema=SCHEMA, where: str = "doctor") -> None:
    """Raises ValueError naming the first field of `report` that does not follow the schema."""
    if schema is _ANY:
        return
    if isinstance(schema, dict):
        if not isinstance(report, dict):
            raise ValueError(f"{where}: expected an object, got {type(report).__name__}")
        for key, sub in schema.items():
            if key not in report:
                raise ValueError(f"{where}: missing field '{key}'")
            validate(report[key], sub, f"{where}.{key}")
    elif isinstance(schema, list):
        if not isinstance(report, list):
            raise ValueError(f"{where}: expected a list, got {type(report).__name__}")
        for i, item in enumerate(report):
            validate(item, schema[0] if schema else _ANY, f"{where}[{i}]")
    elif schema is int and isinstance(report, bool) or not isinstance(report, schema):
        raise ValueError(f"{where}: expected {schema.__name__}, got {report!r}")


def clean(value):
    """A copy of `value` that strict JSON accepts: strings valid UTF-8, NaN/inf as None."""
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---- sections ---------------------------------------------------------------------------------


def _environment(torch_mod, torch_error) -> dict:
    import causal_conv1d
    from . import _torch_lib

    lib = _lib.library()
    torch = {"version": None, "cuda": None, "cxx11_abi": None, "cuda_available": False, "device_count": 0,
             "error": torch_error}
    if torch_mod is not None:
        version, cuda, abi = _lib.torch_facts()
        available = bool(torch_mod.cuda.is_available())
        torch.update(version=version, cuda=cuda, cxx11_abi=None if abi < 0 else bool(abi), cuda_available=available,
                     device_count=torch_mod.cuda.device_count() if available else 0)
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable,
                   "abi_tag": sysconfig.get_config_var("SOABI")},
        "torch": torch,
        "package": {"version": causal_conv1d.package_version, "api_version": causal_conv1d.__version__,
                    "path": str(Path(causal_conv1d.__file__).parent)},
        "libcc1d": {"path": lib and lib.path, "version": lib and lib.version, "abi_version": lib and lib.abi_version,
                    "error": _lib.load_error()},
        "cc1d_torch": _torch_lib.status(),
    }


def _library_report() -> dict:
    lib = _lib.library()
    if lib is None:
        return {}
    try:
        return lib.report()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _hardware(nvrtc: dict) -> dict:
    d = nvrtc.get("driver") or {}
    return {"driver": {"available": bool(d.get("available")), "path": d.get("path") or None,
                       "cuda_version": d.get("cuda_version") or None,
                       "reason": d.get("reason") or ("libcc1d is not loaded" if not d else None)},
            "devices": [_pick(dev, ("index", "name", "sm", "sm_count", "memory_bytes")) for dev in d.get("devices", [])]}


def _pick(d: dict, keys, optional=()) -> dict:
    """d's `keys`; those in `optional` become None when empty (libcc1d writes "" for none)."""
    return {k: (d.get(k) or None) if k in optional else d.get(k) for k in keys}


def _nvrtc(nvrtc: dict) -> dict:
    return {"candidates": [_pick(c, ("path", "origin", "version", "archs", "error"), ("version", "error"))
                           for c in nvrtc.get("nvrtc_candidates", [])],
            "not_found": list(nvrtc.get("nvrtc_not_found", [])),
            "ptx_tier": nvrtc.get("ptx_tier"),
            "devices": [dict(_pick(d, ("index", "usable", "mode", "target", "nvrtc", "nvrtc_version", "reason",
                                       "ptx_tier"), ("mode", "target", "nvrtc", "nvrtc_version", "ptx_tier")),
                             precompiled=list(d.get("precompiled", [])))
                        for d in nvrtc.get("devices", [])]}


def _cache(lib) -> dict:
    """The local kernel cache as libcc1d sees it (cc1d_cache_command "stats"): never created or
    probed here, so the cache's own rules (mode 0700, trust) stay the only ones."""
    out = {"dir": None, "mode": None, "writable": False, "entries": 0, "bytes": 0, "reason": None, "tiers": []}
    if lib is None:
        out["reason"] = "libcc1d is not loaded"
        return out
    stats = lib.cache_command("stats")
    local = stats["local"]
    out["tiers"] = [{"dir": t["dir"], "problem": t["problem"] or None} for t in stats.get("tiers", [])]
    out.update(dir=local["dir"] or None, mode=local["state"], writable=local["state"] == "read-write",
               entries=int(local.get("entries", 0)), bytes=int(local.get("bytes", 0)))
    if local["state"] == "off":
        out["reason"] = "the disk cache is off (CAUSAL_CONV1D_CACHE_DIR=off)"
    elif not out["writable"]:
        out["reason"] = f"{local['dir']} is {local['state']}" + (f": {local['problem']}" if local.get("problem") else "")
    return out


def _devices(torch_mod, hardware: dict) -> list:
    """Every device a call could use: "cpu", then each CUDA device libcc1d or torch sees."""
    n = len(hardware["devices"])
    if torch_mod is not None and torch_mod.cuda.is_available():
        n = max(n, torch_mod.cuda.device_count())
    return ["cpu"] + [f"cuda:{i}" for i in range(n)]


def _dispatch(devices: list, torch_mod) -> list:
    """What `auto` (or CAUSAL_CONV1D_BACKEND) picks per device. `strict_fallback` marks a device
    whose backend is a fallback that CAUSAL_CONV1D_STRICT=1 forbids."""
    out = []
    for device in devices:
        entry = {"device": device, "requested": None, "source": None, "backend": None, "serves": None,
                 "fallback": False, "rejected": []}
        if torch_mod is None:
            entry["rejected"] = [{"backend": "auto", "reason": "torch cannot be imported"}]
        else:
            from . import _dispatch as dispatch

            try:
                entry.update(dispatch.explain(device))
            except Exception as e:  # a bad CAUSAL_CONV1D_BACKEND, say
                entry["rejected"] = [{"backend": os.environ.get("CAUSAL_CONV1D_BACKEND", "auto"),
                                      "reason": " ".join(str(e).split())}]
        entry["strict_fallback"] = bool(entry.pop("strict_mode", False) and entry["fallback"])
        out.append(entry)
    return out


def _gpu_backend(nvrtc_report: dict, hardware: dict) -> dict:
    if _lib.library() is None:
        return {"available": False, "reason": f"libcc1d is not loaded: {_lib.load_error()}"}
    if nvrtc_report.get("available"):
        n = len(hardware["devices"])
        return {"available": True, "reason": f"the nvrtc backend serves {n} CUDA device(s)"}
    return {"available": False, "reason": nvrtc_report.get("reason") or "the nvrtc backend is not compiled in"}


def _aten_self_test(device: str) -> dict:
    """The 'aten' backend (torch ops) on `device`, against the float64 reference."""
    import statistics
    import time

    import torch

    from causal_conv1d import causal_conv1d_fn, causal_conv1d_ref

    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g).to(device) for s in ((2, 96, 300), (96, 4), (96,)))

    def call():
        t0 = time.perf_counter()
        y = causal_conv1d_fn(x, w, b, activation="silu", backend="aten")
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        return y, (time.perf_counter() - t0) * 1e3

    y, first = call()
    times = sorted(call()[1] for _ in range(5))
    ref = causal_conv1d_ref(x.double(), w.double(), b.double(), activation="silu")
    err = (y.double() - ref).abs()
    tol = 1e-4
    bad = int((~(err <= tol * (ref.abs() + 1))).sum())
    return {"backend": "aten", "passed": bad == 0, "max_abs_error": float(err.max()), "tolerance": tol,
            "first_ms": first, "median_ms": statistics.median(times), "error": None}


def _self_test(dispatch: list) -> list:
    out = []
    lib = _lib.library()
    for entry in dispatch:
        device, backend = entry["device"], entry["backend"]
        result = {"device": device, "backend": backend, "passed": False, "max_abs_error": None, "tolerance": None,
                  "first_ms": None, "median_ms": None, "error": None}
        try:
            if backend is None:
                raise RuntimeError("no backend can serve this device")
            if backend == "aten":
                result.update(_aten_self_test(device))
            else:
                if lib is None:
                    raise RuntimeError(_lib.load_error())
                on_host = backend in ("cpu", "emulate")  # host memory, for any device (host copies)
                dtype, index = (_lib.DEVICE_CPU, 0) if on_host else (_lib.DEVICE_CUDA, int(device.split(":")[1]))
                r = lib.self_test(backend, dtype, index)
                result.update({k: r[k] for k in ("backend", "passed", "max_abs_error", "tolerance", "first_ms",
                                                 "median_ms")})
        except Exception as e:
            result["error"] = " ".join(str(e).split())
        out.append(result)
    return out


def diagnose(self_test: bool = True, scan_extensions: bool = False) -> dict:
    try:
        import torch as torch_mod

        torch_error = None
    except Exception as e:  # doctor still reports everything else
        torch_mod, torch_error = None, f"{type(e).__name__}: {e}"
    library = _library_report()
    nvrtc_report = (library.get("backends") or {}).get("nvrtc") or {}
    hardware = _hardware(nvrtc_report)
    report = {
        "schema": 1,
        "ok": True,
        "exit_status": 0,
        "environment": _environment(torch_mod, torch_error),
        "hardware": hardware,
        "nvrtc": _nvrtc(nvrtc_report),
        "gpu_backend": _gpu_backend(nvrtc_report, hardware),
    }
    report["dispatch"] = _dispatch(_devices(torch_mod, hardware), torch_mod)
    report["self_test"] = _self_test(report["dispatch"]) if self_test else []
    report["cache"] = _cache(_lib.library())  # after the self-test, which may have filled it
    report["checks"] = _doctor_checks.run_all(report)
    if scan_extensions:
        from . import _extscan

        report["extensions"] = _extscan.scan()
        report["checks"] += _extscan.checks(report["extensions"])
    failed = (any(d["backend"] is None or d["strict_fallback"] for d in report["dispatch"])
              or any(not t["passed"] for t in report["self_test"])
              or any(c["status"] == "fail" for c in report["checks"]))
    report["ok"], report["exit_status"] = not failed, 1 if failed else 0
    return clean(report)
