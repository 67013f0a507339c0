"""Each Python benchmark in bench/ still runs: its quickest mode, on the cpu backend where it has a
choice, in a child process, and its table comes out. A benchmark is not a test, so nothing else
notices when one stops working; this does, the day it happens. Timings are printed by the
benchmarks and never judged here. (The C++ benchmarks have the same check in ctest, label bench.)
"""
import subprocess

import pytest

from helpers import REPO, run_python

BENCH = REPO / "bench"

# (script and its arguments, a line its output must hold). The gpu_* scripts check their outputs
# against the baseline themselves and exit non-zero on a mismatch.
CASES = [
    (["cpu_fwd.py", "--quick", "--reps", "1"], "| shape (B,D,L) | dtype | layout | kernel GB/s"),
    (["cpu_bwd.py", "--quick"], "| shape (B,D,L) | dtype | layout | cpu backend ms"),
    (["call_overhead.py", "--quick"], "| causal_conv1d_update, batch 1, dim 4096 bf16, silu |"),
    (["cpu_decode.py", "--quick"], "| 1 | bfloat16 | libcc1d |"),
    (["cpu_update_tokens.py", "--quick"], "| width 4, Mamba's rows of 4 | 1 | bfloat16 | libcc1d |"),
    (["first_call.py", "--device", "cpu"], "Every output matched the float64 reference."),
    (["cpu_narrow.py", "--quick"], "| 1,3,21845 | channel-last |"),
    (["gpu_fwd.py", "--quick", "--device", "cpu", "--backend", "cpu"], "all outputs match the baseline"),
    (["gpu_bwd.py", "--quick", "--device", "cpu", "--backend", "cpu", "--check-only"],
     "all gradients match the baseline"),
]


def _run(args):
    r = run_python(args=[str(BENCH / args[0]), *args[1:]], env={"CAUSAL_CONV1D_LOG_LEVEL": "warn"}, timeout=600)
    assert r.returncode == 0, f"bench/{' '.join(args)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.parametrize("args,expect", CASES, ids=[c[0][0] for c in CASES])
def test_bench_runs(args, expect):
    out = _run(args)
    assert expect in out, out[-3000:]
    assert "MISMATCH" not in out


def test_precompile_throughput_runs(nvrtc):
    out = _run(["precompile_throughput.py", "--quick"])
    row = [line for line in out.splitlines() if line.startswith("| 1 |")]
    assert len(row) == 1, out
    assert int(row[0].split("|")[2]) > 0, row  # variants compiled (precompile raises if any fails)


def test_kernel_variants_apply_and_compile(nvrtc, tmp_path):
    """The device run's tuning experiments (bench/kernel_variants.sh) still apply to today's
    sources, and each kernel variant still compiles: a stale one would cost the device run's
    `variants` step, which has no second try. One dtype, width and SM each (sm_90, bf16, width 4:
    what the device times)."""
    out = tmp_path / "variants"
    r = subprocess.run(["bash", str(BENCH / "kernel_variants.sh"), "--check", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    kernel_variants = sorted(d.name for d in out.iterdir() if not (d / "src").is_dir())
    assert kernel_variants, r.stdout
    for name in kernel_variants:
        ops = "fwd" if name.startswith("fwd_") else "bwd" if name.startswith("bwd_") else "fwd,bwd"
        r = run_python(args=["-m", "causal_conv1d", "precompile", "--op", ops, "--dtype", "bf16", "--width", "4",
                             "--arch", "90", "--jobs", "2", "--out", str(tmp_path / f"tier-{name}")],
                       env={"CAUSAL_CONV1D_KERNEL_DIR": str(out / name)}, timeout=600)
        assert r.returncode == 0, f"variant {name}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
