"""The kernel cache from Python: `causal-conv1d cache path|stats|list|verify|clear` and
`causal-conv1d precompile` (libcc1d's cc1d_cache_command and cc1d_precompile), each run in a
subprocess with its own cache directories. No GPU is needed; precompile needs an NVRTC (torch's
CUDA wheel ships one)."""

import ctypes
import json
import logging
import os
import re
import stat
import subprocess
import sys

import pytest

from causal_conv1d import _lib, cli

CACHE_VARS = ("CAUSAL_CONV1D_CACHE_DIR", "CAUSAL_CONV1D_CACHE_PATH", "CAUSAL_CONV1D_CACHE_MAX_MB", "XDG_CACHE_HOME")


@pytest.fixture
def run(monkeypatch, capsys, lib):
    """run(*argv, **env) -> (exit code, stdout, stderr) of `causal-conv1d *argv` in this process, with
    the cache variables cleared and `env` set (libcc1d reads them at each command)."""
    def go(*args, **env):
        for k in CACHE_VARS:
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, str(v))
        capsys.readouterr()
        rc = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return rc, out, err
    return go


def _json(run, *args, **env):
    rc, out, err = run(*args, "--json", **env)
    assert rc in (0, 1), err
    return json.loads(out)


def _precompile(run, out, *extra, **env):
    return run("precompile", "--out", out, "--arch", "90", "--op", "fwd", "--dtype", "fp32", "--width", "4",
               "--jobs", "2", *extra, **env)


def test_default_local_cache_is_under_causal_conv1d(tmp_path, run, monkeypatch):
    """One naming scheme: ~/.cache/causal-conv1d/{venv,kernels}; nothing is created by looking."""
    monkeypatch.setenv("HOME", str(tmp_path))
    res = _json(run, "cache", "path")
    assert res["local"]["dir"] == str(tmp_path / ".cache" / "causal-conv1d" / "kernels")
    assert res["local"]["entries_dir"] == res["local"]["dir"] + "/kernels-v3"
    assert res["local"]["state"] == "read-write" and res["tiers"] == []
    assert not (tmp_path / ".cache").exists()
    res = _json(run, "cache", "path", XDG_CACHE_HOME=tmp_path / "xdg")
    assert res["local"]["dir"] == str(tmp_path / "xdg" / "causal-conv1d" / "kernels")
    res = _json(run, "cache", "path", CAUSAL_CONV1D_CACHE_DIR="off")
    assert res["local"]["state"] == "off" and res["local"]["dir"] == ""


def test_the_command_line_entry_point(tmp_path):
    """`python -m causal_conv1d cache path` (what the `causal-conv1d` script runs), in a new process."""
    env = dict(os.environ, CAUSAL_CONV1D_CACHE_DIR=str(tmp_path / "c"), CAUSAL_CONV1D_CACHE_PATH=str(tmp_path / "t"))
    r = subprocess.run([sys.executable, "-m", "causal_conv1d", "cache", "path"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"local: {tmp_path / 'c'}  [read-write]" in r.stdout
    assert f"tier: {tmp_path / 't'}  [absent ({tmp_path / 't'} does not exist)]" in r.stdout


def _fwd_paths() -> int:
    """The forward's variants per (dtype pair, width): what _precompile's filters keep."""
    fwd = next(o for o in _lib.library().report()["ops"] if o["name"] == "fwd")
    return fwd["kernels"] // (9 * _lib.MAX_WIDTH)


def test_precompile_writes_a_tier_and_a_manifest(tmp_path, run, nvrtc):
    out = tmp_path / "layer"
    rc, stdout, err = _precompile(run, out, "--json", CAUSAL_CONV1D_CACHE_DIR="off")
    assert rc == 0, err
    m = json.loads(stdout)
    assert json.loads((out / "manifest.json").read_text()) == m
    n = _fwd_paths()
    assert m["totals"]["variants"] == n and m["totals"]["compiled"] == n and m["totals"]["failed"] == 0
    assert m["totals"]["variants_per_s_per_core"] > 0 and m["totals"]["jobs"] == 2
    assert [a["arch"] for a in m["archs"]] == [90] and m["archs"][0]["target"] == "sm_90"
    assert m["archs"][0]["compiler"].startswith("NVRTC ")
    # Each op's kernel-source digest, as the report gives it (the one in that op's cache keys).
    ops = _lib.library().report()["backends"]["nvrtc"]["kernel_sources"]["ops"]
    assert m["kernel_sources"]["ops"] == ops and set(ops) == set(_lib.OP_IDS)
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in ops.values()) and len(set(ops.values())) == len(ops)
    assert sorted(v["kernel"] for v in m["variants"]) == [f"cc1d::causal_conv1d_fwd_kernel<float, float, 4, {path}>"
                                                         for path in range(n)]
    assert stat.S_IMODE((out / "kernels-v3").stat().st_mode) == 0o755
    for v in m["variants"]:
        f = out / "kernels-v3" / f"{v['key']}.cc1dbin"
        assert stat.S_IMODE(f.stat().st_mode) == 0o644 and f.stat().st_size > v["bytes"]
    # Seen as a tier: every entry verifies, named by its kernel.
    res = _json(run, "cache", "list", CAUSAL_CONV1D_CACHE_DIR="off", CAUSAL_CONV1D_CACHE_PATH=out)
    tier = res["tiers"][0]
    assert tier["state"] == "read-only" and tier["entries"] == n and tier["ok"] == n and tier["bad"] == 0
    assert sorted(e["key"] for e in tier["items"]) == sorted(v["key"] for v in m["variants"])
    assert {e["kernel"] for e in tier["items"]} == {v["kernel"] for v in m["variants"]}
    rc, stdout, _ = run("cache", "list", CAUSAL_CONV1D_CACHE_DIR="off", CAUSAL_CONV1D_CACHE_PATH=out)
    assert rc == 0 and f"tier {out} [read-only]: {n} entries" in stdout and f"{n} ok, 0 bad" in stdout
    # Its targets (targets-v1): what a node without NVRTC takes its keys from.
    targets = _json(run, "cache", "path", CAUSAL_CONV1D_CACHE_PATH=out)["tiers"][0]["targets"]
    assert [(t["arch"], t["target"], t["compiler"]) for t in targets] == [(90, "sm_90", m["archs"][0]["compiler"])]
    assert targets[0]["min_driver"] % 1000 == 0 and targets[0]["min_driver"] >= 11000  # a cubin: the major's .0
    rc, stdout, _ = run("cache", "path", CAUSAL_CONV1D_CACHE_PATH=out)
    assert rc == 0 and f"  sm_90: sm_90 by {m['archs'][0]['compiler']}, for drivers of CUDA " in stdout
    # A second run finds everything there; the human summary says so.
    rc, stdout, err = _precompile(run, out, CAUSAL_CONV1D_CACHE_DIR="off")
    assert rc == 0, err
    assert f"{n} variants (0 compiled, {n} already there)" in stdout
    assert f"CAUSAL_CONV1D_CACHE_PATH={out}" in stdout and "sm_90: sm_90 with NVRTC" in stdout


def test_verify_stats_and_clear_on_the_local_cache(tmp_path, run, nvrtc):
    local = tmp_path / "local"
    rc, _, err = _precompile(run, local, CAUSAL_CONV1D_CACHE_DIR="off")  # seeds it, as a prewarmed node has
    assert rc == 0, err
    entries = sorted((local / "kernels-v3").glob("*.cc1dbin"))
    n = _fwd_paths()
    assert len(entries) == n
    bad = entries[0]
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0x01
    bad.write_bytes(bytes(data))
    env = {"CAUSAL_CONV1D_CACHE_DIR": local}
    res = _json(run, "cache", "stats", **env)
    assert res["local"]["entries"] == n and res["local"]["state"] == "read-write"
    assert set(res["local"]["counters"]) == {"hits", "misses", "corrupt", "writes", "evictions"}
    rc, stdout, _ = run("cache", "verify", **env)
    assert rc == 1, stdout  # a bad entry was found
    assert f"{n - 1} ok, 1 bad; 1 removed" in stdout and "BAD: checksum mismatch (removed)" in stdout
    assert not bad.exists() and entries[1].exists()
    assert run("cache", "verify", **env)[0] == 0
    rc, stdout, _ = run("cache", "stats", **env)
    assert rc == 0 and "entries" in stdout and re.search(rf"local  read-write +{n - 1}\b", stdout)
    facts = local / "nvrtc-facts-v1"  # NVRTC's facts (nvrtc_memo.h) go with the kernels
    facts.write_text("x")
    res = _json(run, "cache", "clear", **env)
    assert res["local"]["removed"] == n - 1 and res["local"]["entries"] == 0
    assert res["local"]["removed_facts"] == [str(facts)] and not facts.exists()
    assert not list((local / "kernels-v3").glob("*.cc1dbin"))
    facts.write_text("x")
    rc, stdout, _ = run("cache", "clear", **env)
    assert rc == 0 and stdout.strip().endswith(f"removed 0 file(s), 0.0 kB, and {facts}"), stdout
    assert not facts.exists()


def test_an_untrusted_cache_directory_is_reported(tmp_path, run, caplog):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="causal_conv1d"):
        res = _json(run, "cache", "path", CAUSAL_CONV1D_CACHE_DIR=d)
    assert res["local"]["state"] == "untrusted"
    assert res["local"]["problem"] == f"{d} is writable by its group and others (mode 0777)"
    assert sum("chmod go-w" in r.getMessage() for r in caplog.records) == 1  # the one warning
    rc, stdout, _ = run("cache", "clear", CAUSAL_CONV1D_CACHE_DIR=d)
    assert rc == 0 and "nothing removed" in stdout


def test_bad_precompile_arguments_name_what_is_wrong(tmp_path, run):
    out = tmp_path / "o"
    for args, text in ((["--arch", "9x"], "--arch: expected comma-separated integers, got '9x'"),
                       (["--op", "nope"], "--op: unknown 'nope'; expected some of fwd, update"),
                       (["--dtype", "fp8"], "--dtype: unknown 'fp8'"),
                       (["--width", "9"], "cc1d_precompile: widths[0] is 9; expected 1..CC1D_MAX_WIDTH"),
                       (["--arch", "5"], "cc1d_precompile: archs[0] is 5; expected an SM number")):
        rc, _, err = run("precompile", "--out", out, *args)
        assert rc == 2 and text in err, (args, err)
    rc, _, err = run("precompile", "--out", out, "--driver-cuda", "twelve")
    assert rc == 2 and "--driver-cuda" in err and len(err.strip().splitlines()) == 1  # one line, no traceback
    assert not out.exists()


def test_library_precompile_validates_before_compiling(tmp_path, lib):
    for kw, text in (({"widths": [0]}, "widths[0] is 0"), ({"dtypes": [3]}, "dtypes[0] is 3"),
                     ({"ops": [42]}, "ops[0] is 42"), ({"jobs": -1}, "jobs is -1"),
                     ({"driver_version": -5}, "driver_version is -5")):
        with pytest.raises(_lib.LibraryValueError, match=re.escape(text)):
            lib.precompile(str(tmp_path / "o"), **kw)
    with pytest.raises(_lib.LibraryValueError, match="out_dir is required"):
        lib.precompile("")
    assert not (tmp_path / "o").exists()
    out = ctypes.c_void_p()
    assert lib.dll.cc1d_precompile(None, ctypes.byref(out)) == _lib.ERR_NULL_POINTER
    assert lib.last_error() == "cc1d_precompile: args is NULL" and out.value is None
    assert lib.dll.cc1d_cache_command(9, ctypes.byref(out)) == _lib.ERR_INVALID_ARGUMENT
    assert lib.last_error() == "cc1d_cache_command: command must be 0 (path) .. 4 (clear), got 9"
    assert lib.dll.cc1d_cache_command(0, None) == _lib.ERR_NULL_POINTER
