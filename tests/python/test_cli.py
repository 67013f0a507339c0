"""The command line: `causal-conv1d report | doctor | demo | --version`, `python -m causal_conv1d`, and
its errors: one line each, naming the fix."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import causal_conv1d
from causal_conv1d import cli


def _run(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if k not in ("CAUSAL_CONV1D_BACKEND", "CAUSAL_CONV1D_STRICT")}
    return subprocess.run([sys.executable, "-m", "causal_conv1d", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_version():
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"causal-conv1d {causal_conv1d.package_version}"


def test_no_command_prints_help():
    r = _run()
    assert r.returncode == 2 and "report" in r.stdout and "demo" in r.stdout


def test_report_json(lib):
    r = _run("report")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    pkg = rep["package"]
    assert pkg["version"] == causal_conv1d.package_version and pkg["api_version"] == "1.6.1"
    assert pkg["library_path"] == causal_conv1d.library_path() and pkg["library_error"] is None
    assert pkg["library_abi_version"] == 1
    assert rep["torch"]["version"]
    assert rep["dispatch"]["cpu"]["backend"] == "cpu"
    assert "cuda" in rep["dispatch"] and "rejected" in rep["dispatch"]["cuda"]
    assert isinstance(rep["library"], dict) and rep["library"]
    assert rep["library"].get("abi_version") == 1


def test_report_without_library(tmp_path):
    env = dict(os.environ, CAUSAL_CONV1D_LIBRARY=str(tmp_path / "missing.so"))
    env.pop("CAUSAL_CONV1D_STRICT", None)
    r = subprocess.run([sys.executable, "-m", "causal_conv1d", "report"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["package"]["library_path"] is None and "missing.so" in rep["package"]["library_error"]
    assert rep["dispatch"]["cpu"]["backend"] == "aten" and rep["library"] is None
    assert r.stderr.count("CausalConv1dWarning") == 1


def test_demo_small(lib):
    r = _run("demo", "--device", "cpu", "--batch", "2", "--dim", "64", "--seqlen", "300", "--runs", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "backend: cpu (auto" in r.stdout
    assert "0 element(s) outside" in r.stdout and "GB/s" in r.stdout and r.stdout.strip().endswith("OK")
    scale = [line for line in r.stdout.splitlines() if line.startswith("for scale: a copy of x")]
    assert len(scale) == 1 and "% of its speed" in scale[0], r.stdout


@pytest.mark.slow
def test_demo_readme_defaults(lib):
    """The README demo as is: batch 4, dim 2048, seqlen 2048, bf16, silu, width 4."""
    r = _run("demo")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "x (4, 2048, 2048) torch.bfloat16, width 4, silu" in r.stdout and "GB/s" in r.stdout


def test_demo_fails_on_mismatch(monkeypatch, capsys):
    """The demo's check can fail: a wrong result makes it exit non-zero."""
    real = causal_conv1d.causal_conv1d_fn

    def wrong(x, weight, bias=None, **kw):
        return real(x, weight, None, **kw)  # drops the bias

    monkeypatch.setattr(causal_conv1d, "causal_conv1d_fn", wrong)
    rc = cli.main(["demo", "--device", "cpu", "--batch", "1", "--dim", "16", "--seqlen", "64", "--runs", "1",
                   "--dtype", "fp32"])
    out = capsys.readouterr()
    assert rc == 1 and "FAILED" in out.err


def test_console_script():
    """The `causal-conv1d` entry point, when the package is installed in this environment."""
    script = Path(sys.executable).parent / "causal-conv1d"
    if not script.exists():
        pytest.skip("the package is not pip-installed in this environment (no causal-conv1d script)")
    r = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("causal-conv1d ")


# ---- every error is one line naming the fix ---------------------------------------------------


def _one_line_error(capsys, argv, rc_expected):
    rc = cli.main(argv)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == rc_expected, out
    assert len(lines) == 1 and "Traceback" not in out.err, out.err
    return lines[0]


@pytest.mark.parametrize("argv, needles", [
    (["bogus"], ["invalid choice: 'bogus'", "doctor", "see 'causal-conv1d --help'"]),
    (["demo", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["demo", "--backend", "gpu"], ["argument --backend: invalid choice: 'gpu'", "nvrtc", "emulate",
                                    "see 'causal-conv1d demo --help'"]),
    (["demo", "--width", "9"], ["argument --width: expected 1..8, got 9"]),
    (["demo", "--width", "four"], ["argument --width: expected an integer, got 'four'"]),
    (["demo", "--seqlen", "0"], ["argument --seqlen: expected >= 1, got 0"]),
    (["demo", "--dtype", "fp64"], ["argument --dtype: invalid choice: 'fp64'"]),
])
def test_usage_errors_are_one_line(capsys, argv, needles):
    line = _one_line_error(capsys, argv, 2)
    assert line.startswith("causal-conv1d: error: ")
    for n in needles:
        assert n in line, line


def test_no_cuda_device_is_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    line = _one_line_error(capsys, ["demo", "--device", "cuda"], 1)
    assert line.startswith("causal-conv1d demo: DemoError: no CUDA device: ")
    assert "run 'causal-conv1d doctor'" in line and "--device cpu" in line


def test_a_bad_device_is_one_line(capsys):
    line = _one_line_error(capsys, ["demo", "--device", "tpu:7"], 1)
    assert "--device 'tpu:7'" in line and "cpu or cuda[:N]" in line


def test_a_backend_that_cannot_serve_is_one_line(capsys, lib):
    line = _one_line_error(capsys, ["demo", "--device", "cpu", "--backend", "nvrtc", "--dim", "8", "--seqlen", "16"], 1)
    assert line.startswith("causal-conv1d demo: BackendUnavailableError: ")
    assert "backend 'nvrtc' (requested by --backend) cannot serve cpu" in line


def test_traceback_flag_shows_the_stack(capsys, lib):
    argv = ["demo", "--device", "cpu", "--backend", "nvrtc", "--dim", "8", "--seqlen", "16"]
    for flags in (["--traceback"] + argv, argv + ["--traceback"]):
        with pytest.raises(causal_conv1d.BackendUnavailableError, match="requested by --backend"):
            cli.main(flags)


def test_demo_says_requested_by_backend_flag(lib):
    r = _run("demo", "--device", "cpu", "--backend", "cpu", "--batch", "1", "--dim", "8", "--seqlen", "40",
             "--runs", "1")
    assert r.returncode == 0, r.stderr
    assert "backend: cpu (requested by --backend: libcc1d CPU kernels)" in r.stdout


def test_commands_are_modules():
    """cli.py only parses and dispatches: each command is _cmd_<name>.py with HELP, add_arguments, run."""
    import importlib

    for name in cli.COMMANDS:
        m = importlib.import_module(f"causal_conv1d._cmd_{name}")
        assert m.HELP and callable(m.add_arguments) and callable(m.run)
