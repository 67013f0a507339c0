"""`causal-conv1d doctor`: the exact reason there is no GPU backend here, a GPU and a passing
self-test on the fake libcuda, the exit status rules, the JSON schema and its strictness, the
version-matrix checks, and the extension scan on a planted mismatch."""

import json
import math
import shutil
import subprocess

import pytest

from causal_conv1d import _doctor, _doctor_checks, _extscan, _lib, _torch_lib
from helpers import run_python

NO_DRIVER = "/nonexistent/libcuda.so.1"


def doctor(*args, env=None):
    """(exit status, stdout, stderr) of `python -m causal_conv1d doctor ...`."""
    r = run_python(args=("-m", "causal_conv1d", "doctor", *args), env=env, timeout=600)
    return r.returncode, r.stdout, r.stderr


def strict_json(text: str) -> dict:
    """json.loads that refuses NaN/Infinity and invalid UTF-8, as strict parsers do."""
    def no_constants(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text.encode("utf-8").decode("utf-8", "strict"), parse_constant=no_constants)


def fake_env(fake_driver, tmp_path, **extra):
    env = {"CAUSAL_CONV1D_CUDA_DRIVER": fake_driver, "CAUSAL_CONV1D_CACHE_DIR": tmp_path / "cache",
           "CC1D_FAKE_DEVICES": "90"}
    env.update(extra)
    return env


@pytest.fixture
def nvrtc(lib):
    report = lib.report()["backends"]["nvrtc"]
    if not any(c["version"] and not c["error"] for c in report["nvrtc_candidates"]):
        pytest.skip("no usable NVRTC on this machine: the fake GPU cannot compile")


def test_no_gpu_backend_names_the_exact_reason(lib):
    rc, out, err = doctor(env={"CAUSAL_CONV1D_CUDA_DRIVER": NO_DRIVER})
    assert rc == 0, out + err  # the cpu backend works
    line = next(l for l in out.splitlines() if l.startswith("GPU backend"))
    assert f"NONE: CUDA driver library not found (tried {NO_DRIVER}" in line
    assert "install the NVIDIA driver" in line
    assert any(l.startswith("cpu") and "self-test passed" in l for l in out.splitlines())
    assert out.strip().splitlines()[-1].startswith("OK: every device has a working backend")
    rc, out, _ = doctor("--json", env={"CAUSAL_CONV1D_CUDA_DRIVER": NO_DRIVER})
    r = strict_json(out)
    assert rc == 0 and r["ok"] and r["exit_status"] == 0
    assert not r["gpu_backend"]["available"] and NO_DRIVER in r["gpu_backend"]["reason"]
    assert r["hardware"]["devices"] == [] and [d["device"] for d in r["dispatch"]] == ["cpu"]
    _doctor.validate(r)


def test_fake_gpu_is_reported_and_passes_its_self_test(fake_driver, nvrtc, tmp_path):
    env = fake_env(fake_driver, tmp_path, CC1D_FAKE_DEVICES="90,80", CC1D_FAKE_MEMORY_MIB="40960")
    rc, out, err = doctor("--json", env=env)
    r = strict_json(out)
    _doctor.validate(r)
    assert rc == 0 and r["ok"], out + err
    devs = r["hardware"]["devices"]
    assert [(d["index"], d["sm"], d["memory_bytes"]) for d in devs] == [(0, 90, 40 << 30), (1, 80, 40 << 30)]
    assert devs[0]["name"].startswith("cc1d fake GPU")
    assert r["hardware"]["driver"]["cuda_version"] == "13.0" and r["gpu_backend"]["available"]
    assert [d["target"] for d in r["nvrtc"]["devices"]] == ["sm_90", "sm_80"]
    # The shipped PTX tier (when this libcc1d embeds one) serves both: sm_80 to sm_90.
    if r["nvrtc"]["ptx_tier"]["kernels"]:
        assert [d["ptx_tier"] for d in r["nvrtc"]["devices"]] == ["serves", "serves"]
    else:
        assert all("built without it" in d["ptx_tier"] for d in r["nvrtc"]["devices"])
    tests = {t["device"]: t for t in r["self_test"]}
    for dev in ("cpu", "cuda:0", "cuda:1"):
        t = tests[dev]
        assert t["passed"] and t["error"] is None and 0 < t["max_abs_error"] <= t["tolerance"] * 10, t
    assert tests["cuda:0"]["backend"] == "nvrtc" and tests["cpu"]["backend"] == "cpu"
    assert r["cache"]["writable"] and r["cache"]["entries"] >= 2  # the self-test compiled for both SMs
    rc, out, _ = doctor(env=env)
    assert rc == 0
    assert any(l.startswith("GPU 1") and "sm_80" in l and "40 GiB" in l for l in out.splitlines())
    assert any(l.startswith("cuda:0") and "nvrtc; self-test passed" in l for l in out.splitlines())
    assert any(l.startswith("  device 1: ") and "shipped PTX tier" in l for l in out.splitlines())


def test_the_shipped_ptx_tier_alone_serves_a_gpu_without_nvrtc(fake_driver, lib, tmp_path):
    if not lib.report()["backends"]["nvrtc"]["ptx_tier"]["kernels"]:
        pytest.skip("this libcc1d was built without the shipped PTX tier")
    env = fake_env(fake_driver, tmp_path, CAUSAL_CONV1D_NVRTC="none")
    rc, out, err = doctor("--json", env=env)
    r = strict_json(out)
    _doctor.validate(r)
    assert rc == 0 and r["ok"], out + err
    assert r["nvrtc"]["candidates"] == []
    dev = r["nvrtc"]["devices"][0]
    assert dev["usable"] and dev["mode"] == "shipped PTX only" and dev["target"] == "sm_90" and not dev["nvrtc"]
    assert dev["reason"].startswith("kernels only from the shipped PTX tier: CAUSAL_CONV1D_NVRTC=none")
    c = next(c for c in r["checks"] if c["name"] == "NVRTC vs driver")
    assert c["status"] == "warn" and "device 0 (shipped PTX only) run(s) prebuilt kernels meanwhile" in c["message"]
    t = next(t for t in r["self_test"] if t["device"] == "cuda:0")
    assert t["backend"] == "nvrtc" and t["passed"] and 0 < t["max_abs_error"] <= t["tolerance"] * 10, t
    rc, out, _ = doctor(env=env)
    assert rc == 0
    assert any(l.startswith("  device 0: shipped PTX only sm_90 (kernels only from the shipped PTX tier: ")
               for l in out.splitlines()), out
    assert any(l.startswith("cuda:0") and "nvrtc; self-test passed" in l for l in out.splitlines()), out


def test_a_precompiled_tier_serves_a_gpu_without_nvrtc(fake_driver, nvrtc, tmp_path):
    """A fleet's tier made where NVRTC is, used by a node with none: the device takes the tier's
    keys (its targets-v1), the self-test's kernel loads from it, and nothing is compiled."""
    tier = tmp_path / "tier"
    r = run_python(args=("-m", "causal_conv1d", "precompile", "--out", str(tier), "--arch", "90", "--op", "fwd",
                         "--dtype", "fp32", "--width", "4", "--jobs", "2"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    env = fake_env(fake_driver, tmp_path, CAUSAL_CONV1D_NVRTC="none", CAUSAL_CONV1D_PTX_TIER="0",
                   CAUSAL_CONV1D_CACHE_PATH=tier)
    rc, out, err = doctor("--json", env=env)
    r = strict_json(out)
    _doctor.validate(r)
    assert rc == 0 and r["ok"], out + err
    dev = r["nvrtc"]["devices"][0]
    assert dev["usable"] and dev["mode"] == "precompiled" and dev["target"] == "sm_90" and not dev["nvrtc"]
    assert dev["reason"].startswith(f"kernels only from the precompiled tier {tier} (NVRTC ")
    t = next(t for t in r["self_test"] if t["device"] == "cuda:0")
    assert t["backend"] == "nvrtc" and t["passed"], t
    assert r["cache"]["tiers"] == [{"dir": str(tier), "problem": None}]
    assert [(u["tier"], u["target"], u["use"]) for u in dev["precompiled"]] == [(str(tier), "sm_90", "own keys")]
    c = next(c for c in r["checks"] if c["name"] == "precompiled tiers")
    assert c["status"] == "ok" and c["message"].startswith(f"device 0 (sm_90): {tier} holds kernels by this node's "
                                                           "own keys (NVRTC "), c


def test_precompiled_tiers_against_the_devices():
    def use(u, compiler="NVRTC 12.9"):
        return {"tier": "/t", "target": "sm_90", "compiler": compiler, "min_driver": "12.0", "use": u}

    def dev(*uses, usable=True):
        return {"index": 0, "usable": usable, "target": "sm_90", "nvrtc_version": "13.0", "precompiled": list(uses)}

    tier = [{"dir": "/t", "problem": None}]
    assert _doctor_checks.precompiled_tiers([], [dev()]) == []  # CAUSAL_CONV1D_CACHE_PATH unset
    [c] = _doctor_checks.precompiled_tiers(tier, [dev(use("stands in"), use("own keys", "NVRTC 13.0"))])
    assert c["status"] == "ok" and c["message"] == "device 0 (sm_90): /t holds kernels by this node's own keys " \
                                                   "(NVRTC 13.0, sm_90)"
    [c] = _doctor_checks.precompiled_tiers(tier, [dev(use("needs a CUDA 13.0 driver"), use("stands in"))])
    assert c["status"] == "ok" and c["message"] == ("device 0 (sm_90): /t's NVRTC 12.9 kernels stand in for compiles "
                                                    "(this node chose NVRTC 13.0); a kernel it lacks is compiled")
    [c] = _doctor_checks.precompiled_tiers(tier, [dev(use("needs a CUDA 13.0 driver"))])
    assert c["status"] == "warn" and c["message"].endswith("/t (NVRTC 12.9, sm_90): needs a CUDA 13.0 driver")
    assert "causal-conv1d precompile --out DIR" in c["fix"]
    [c] = _doctor_checks.precompiled_tiers(tier, [dev()])
    assert c["status"] == "warn" and "so first calls compile: no tier lists a target for its arch" in c["message"]
    [c] = _doctor_checks.precompiled_tiers(tier, [dict(dev(), ptx_tier="serves")])
    assert "so first calls link the shipped PTX tier's kernels or compile: " in c["message"]
    assert _doctor_checks.precompiled_tiers(tier, [dev(usable=False)]) == []  # its own check says why
    skipped = [{"dir": "/u", "problem": "/u is writable by others"}]
    [c] = _doctor_checks.precompiled_tiers(skipped, [])
    assert c["status"] == "warn" and c["message"] == "the tier /u is skipped: /u is writable by others"


def test_a_failing_self_test_fails_the_doctor(fake_driver, nvrtc, tmp_path):
    # The fake accepts launches but runs none: the poisoned output stays NaN.
    rc, out, _ = doctor(env=fake_env(fake_driver, tmp_path, CC1D_FAKE_EXECUTE="0"))
    assert rc == 1
    assert any(l.startswith("cuda:0") and "self-test FAILED" in l for l in out.splitlines()), out
    assert out.strip().splitlines()[-1].startswith("PROBLEMS")
    rc, out, _ = doctor("--json", env=fake_env(fake_driver, tmp_path, CC1D_FAKE_EXECUTE="0"))
    r = strict_json(out)  # the NaN error is null, not NaN
    t = next(t for t in r["self_test"] if t["device"] == "cuda:0")
    assert rc == 1 and not t["passed"] and t["max_abs_error"] is None


def test_a_forced_backend_that_cannot_work_fails(lib):
    rc, out, _ = doctor("--json", env={"CAUSAL_CONV1D_CUDA_DRIVER": NO_DRIVER, "CAUSAL_CONV1D_BACKEND": "nvrtc"})
    r = strict_json(out)
    assert rc == 1 and not r["ok"]
    cpu = r["dispatch"][0]
    assert cpu["backend"] is None and cpu["rejected"][0]["backend"] == "nvrtc"


def test_strict_mode_turns_a_fallback_into_a_failure(fake_driver, tmp_path):
    # sm_30 is below every NVRTC: cuda:0 falls back to the cpu backend through host copies.
    env = fake_env(fake_driver, tmp_path, CC1D_FAKE_DEVICES="30")
    rc, out, _ = doctor("--json", "--no-self-test", env=env)
    r = strict_json(out)
    cuda = next(d for d in r["dispatch"] if d["device"] == "cuda:0")
    assert rc == 0 and cuda["fallback"] and cuda["backend"] == "cpu" and not cuda["strict_fallback"]
    assert r["self_test"] == []
    rc, out, _ = doctor(env=dict(env, CAUSAL_CONV1D_STRICT="1"))
    assert rc == 1 and "CAUSAL_CONV1D_STRICT=1 forbids it" in out


# ---- the JSON ------------------------------------------------------------------------------------


def test_validate_names_the_field():
    report = {"schema": 1, "ok": True}
    with pytest.raises(ValueError, match="missing field 'exit_status'"):
        _doctor.validate(report)
    with pytest.raises(ValueError, match=r"doctor.ok: expected bool"):
        _doctor.validate({"schema": 1, "ok": "yes"}, {"schema": int, "ok": bool})
    with pytest.raises(ValueError, match=r"doctor.checks\[0\]: missing field 'fix'"):
        _doctor.validate({"checks": [{"name": "x", "status": "ok", "message": "m"}]}, {"checks": _doctor.SCHEMA["checks"]})


def test_clean_makes_strict_json():
    dirty = {"a": b"torch 2.\xff", "b": "2.\udcff", "c": [float("nan"), math.inf, 1.5], b"k": "ok"}
    text = json.dumps(_doctor.clean(dirty), allow_nan=False, ensure_ascii=False)
    r = strict_json(text)
    assert r == {"a": "torch 2.\ufffd", "b": "2.\ufffd", "c": [None, None, 1.5], "k": "ok"}


def test_report_of_the_library_is_valid_utf8(lib):
    """A torch version with the byte 0xff (and a truncated UTF-8 sequence) reaches cc1d_report as
    U+FFFD: the raw bytes decode strictly and parse."""
    import ctypes

    try:
        assert lib.dll.cc1d_set_torch_info(b"2.\xff+bad", b"12.\xc3", 1) == _lib.OK
        needed = ctypes.c_size_t(0)
        lib.dll.cc1d_report(None, 0, ctypes.byref(needed))
        buf = ctypes.create_string_buffer(needed.value)
        assert lib.dll.cc1d_report(buf, needed.value, ctypes.byref(needed)) == _lib.OK
        r = json.loads(buf.value.decode("utf-8", "strict"))
        assert r["torch"]["version"] == "2.\ufffd+bad" and r["torch"]["cuda_version"] == "12.\ufffd"
    finally:
        lib.set_torch_info(*_lib.torch_facts())


# ---- the version matrix ------------------------------------------------------------------------


def test_torch_cuda_against_the_driver():
    c = _doctor_checks.torch_cuda_vs_driver("12.4", "11.8", None)
    assert c["status"] == "fail" and "525.60.13" in c["fix"] and "whl/cu118" in c["fix"]
    c = _doctor_checks.torch_cuda_vs_driver("12.8", "12.2", None)
    assert c["status"] == "ok" and "minor-version compatibility" in c["message"]
    assert _doctor_checks.torch_cuda_vs_driver("12.4", "13.0", None)["status"] == "ok"
    c = _doctor_checks.torch_cuda_vs_driver(None, "12.4", None)
    assert c["status"] == "warn" and "CPU-only" in c["message"]
    c = _doctor_checks.torch_cuda_vs_driver("12.4", None, "no CUDA GPU visible")
    assert c["status"] == "skip" and "no CUDA GPU visible" in c["message"]


def test_companions_against_torch():
    c = _doctor_checks.companion("torchvision", "0.20.1", ["numpy", "pillow"], "2.6.0+cu124")
    assert c["status"] == "fail"
    assert c["message"].startswith("torchvision 0.20.1 was built for torch 2.5; torch 2.6.0+cu124 is running")
    assert "install torchvision==0.21.* for torch 2.6" in c["fix"]
    c = _doctor_checks.companion("torchvision", "0.21.0", ["torch==2.5.1"], "2.6.0")  # the pin wins
    assert c["status"] == "fail" and "built for torch 2.5" in c["message"]
    assert _doctor_checks.companion("torchvision", "0.21.0", ["torch==2.6.0"], "2.6.0+cpu")["status"] == "ok"
    c = _doctor_checks.companion("torchaudio", "2.4.1", [], "2.6.0")
    assert c["status"] == "fail" and "torchaudio==2.6.*" in c["fix"]
    assert _doctor_checks.companion("torchaudio", None, [], "2.6.0")["status"] == "skip"


def test_python_against_the_torch_build():
    c = _doctor_checks.python_vs_torch(["cp312-cp312-manylinux_2_28_x86_64"], (3, 11), None)
    assert c["status"] == "fail" and "cp312" in c["message"] and "--force-reinstall torch" in c["fix"]
    assert _doctor_checks.python_vs_torch(["cp311-cp311-linux_x86_64"], (3, 11), None)["status"] == "ok"
    assert _doctor_checks.python_vs_torch([], (3, 11), "ImportError: libcudnn.so.9")["status"] == "fail"


def test_nvrtc_newer_than_the_driver():
    newer = {"path": "/x/libnvrtc.so.13", "version": "13.0", "error": None}
    older = {"path": "/y/libnvrtc.so.12", "version": "12.4", "error": None}
    checks = _doctor_checks.nvrtc_vs_driver([newer, older], "12.8")
    assert [c["status"] for c in checks] == ["warn"] and "580" in checks[0]["fix"]
    assert [c["status"] for c in _doctor_checks.nvrtc_vs_driver([newer], "12.8")] == ["fail"]
    assert _doctor_checks.nvrtc_vs_driver([older], "12.8")[0]["status"] == "ok"
    c = _doctor_checks.nvrtc_vs_driver([], "12.8")[0]
    assert c["status"] == "warn" and "pip install nvidia-cuda-nvrtc-cu12 " in c["fix"]
    c = _doctor_checks.nvrtc_vs_driver([], "13.0")[0]  # CUDA 13's wheel has no -cu13 suffix
    assert c["status"] == "warn" and "pip install nvidia-cuda-nvrtc " in c["fix"]
    devices = [{"index": 0, "usable": True, "mode": "shipped PTX only", "nvrtc": ""},
               {"index": 1, "usable": False, "mode": "", "nvrtc": ""}]
    c = _doctor_checks.nvrtc_vs_driver([], "13.0", devices)[0]
    assert c["status"] == "warn" and c["message"] == ("no NVRTC found; device 0 (shipped PTX only) run(s) prebuilt "
                                                      "kernels meanwhile, and a call needing another falls back")


# ---- --scan-extensions ------------------------------------------------------------------------------


def _planted_extension(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the planted extension")
    pkg = tmp_path / "site" / "planted"
    pkg.mkdir(parents=True)
    src = tmp_path / "ext.cpp"
    src.write_text("namespace at { void cc1d_planted_missing(int); }\n"
                   "namespace c10 { namespace detail { [[noreturn]] void torchCheckFail(const char*, const char*, "
                   "unsigned, const char*); } }\n"
                   "extern \"C\" void use() { at::cc1d_planted_missing(1); c10::detail::torchCheckFail(0, 0, 0, 0); }\n")
    good = tmp_path / "good.cpp"
    good.write_text("namespace c10 { namespace detail { [[noreturn]] void torchCheckFail(const char*, const char*, "
                    "unsigned, const char*); } }\nextern \"C\" void use() { c10::detail::torchCheckFail(0, 0, 0, 0); }\n")
    libdir = _torch_lib._torch_lib_dir()
    for s, out in ((src, pkg / "_C.so"), (good, pkg / "_ok.so")):
        subprocess.run([cxx, "-shared", "-fPIC", str(s), "-o", str(out), f"-L{libdir}", "-Wl,--no-as-needed", "-lc10"],
                       check=True, capture_output=True)
    return tmp_path / "site", pkg


def test_scan_finds_the_planted_mismatch(tmp_path):
    root, pkg = _planted_extension(tmp_path)
    found = {r["path"]: r for r in _extscan.scan([str(root)])}
    bad, good = found[str(pkg / "_C.so")], found[str(pkg / "_ok.so")]
    assert bad["links"] == ["libc10.so"] and bad["missing"] == ["_ZN2at20cc1d_planted_missingEi"]
    assert "rebuild _C.so against torch" in bad["fix"]
    assert good["missing"] == [] and good["fix"] is None
    checks = _extscan.checks(list(found.values()))
    assert [c["status"] for c in checks] == ["fail"] and "undefined symbol" in checks[0]["message"]


def test_doctor_scan_extensions_reports_it(tmp_path, lib):
    root, pkg = _planted_extension(tmp_path)
    import os

    env = {"PYTHONPATH": os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(root)]),
           "CAUSAL_CONV1D_CUDA_DRIVER": NO_DRIVER}
    rc, out, _ = doctor("--json", "--scan-extensions", "--no-self-test", env=env)
    r = strict_json(out)
    assert rc == 1 and not r["ok"]
    ext = next(e for e in r["extensions"] if e["path"] == str(pkg / "_C.so"))
    assert ext["missing"] == ["_ZN2at20cc1d_planted_missingEi"]
    assert any(c["status"] == "fail" and str(pkg / "_C.so") in c["message"] for c in r["checks"])
