"""precompile throughput for a fleet's arch list, in variants per second per core.

Runs libcc1d's precompile (what `causal-conv1d precompile` runs) into fresh directories with 1
thread and with one per core, for the archs 75, 80, 86, 89, 90, 100 and 120, and prints a
markdown table for bench/RESULTS.md. Variants per CPU second (the process's CPU time) is the
figure a loaded machine does not distort: wall-clock rates fall when other work shares the cores. By default a subset of the variants (widths 4, dtypes bf16
and fp32: every op's variants using only those), so that it runs in a few minutes on 2 cores;
--full compiles every variant of every op; --quick only the forward's fp32 variants at width 4
for sm_90 with 1 thread (a check that the bench runs, for tests/python/test_bench_smoke.py).

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/precompile_throughput.py [--full | --quick] [--jobs 1,2]
"""
import argparse
import os
import tempfile

from causal_conv1d import _lib

ARCHS = (75, 80, 86, 89, 90, 100, 120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="every variant of every op (slow on few cores)")
    ap.add_argument("--quick", action="store_true", help="the forward's fp32 width-4 variants for sm_90, 1 thread")
    ap.add_argument("--jobs", default=f"1,{os.cpu_count()}", help="comma-separated thread counts to run")
    args = ap.parse_args()
    lib = _lib.library()
    if lib is None:
        raise SystemExit(_lib.load_error())
    archs, what = ARCHS, "width 4, bf16/fp32 variants"
    subset = {"widths": [4], "dtypes": [_lib.BFLOAT16, _lib.FLOAT32]}
    if args.full:
        subset, what = {}, "every variant"
    elif args.quick:
        archs, what, args.jobs = (90,), "the forward's width-4 fp32 variants", "1"
        subset = {"widths": [4], "dtypes": [_lib.FLOAT32], "ops": [_lib.OP_IDS["fwd"]]}
    print(f"archs {', '.join(map(str, archs))}; {what}; {os.cpu_count()} cores")
    print("| threads | variants | NVRTC | wall s | variants/s | variants/s per core | CPU s | variants per CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for jobs in (int(j) for j in args.jobs.split(",")):
        with tempfile.TemporaryDirectory() as out:
            m = lib.precompile(out, archs=archs, jobs=jobs, **subset)
        t = m["totals"]
        nvrtc = ", ".join(sorted({a["compiler"] for a in m["archs"]}))
        print(f"| {t['jobs']} | {t['compiled']} | {nvrtc} | {t['wall_s']:.1f} | {t['variants_per_s']:.2f} | "
              f"{t['variants_per_s_per_core']:.2f} | {t['cpu_s']:.1f} | {t['variants_per_cpu_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
