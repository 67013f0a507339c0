"""precompile throughput for a fleet's arch list, in variants per second per core.

Runs libcc1d's precompile (what `causal-conv1d precompile` runs) into fresh directories with 1
thread and with one per core, for the archs 75, 80, 86, 89, 90, 100 and 120, and prints a
markdown table for bench/RESULTS.md. Variants per CPU second (the process's CPU time) is the
figure a loaded machine does not distort: wall-clock rates fall when other work shares the cores. By default a subset of the variants (widths 4, dtypes bf16
and fp32: every op's variants using only those), so that it runs in a few minutes on 2 cores;
--full compiles every variant of every op.

    PYTHONPATH=python CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so \\
        ~/.cache/causal-conv1d/venv/bin/python bench/precompile_throughput.py [--full] [--jobs 1,2]
"""
import argparse
import os
import tempfile

from causal_conv1d import _lib

ARCHS = (75, 80, 86, 89, 90, 100, 120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="every variant of every op (slow on few cores)")
    ap.add_argument("--jobs", default=f"1,{os.cpu_count()}", help="comma-separated thread counts to run")
    args = ap.parse_args()
    lib = _lib.library()
    if lib is None:
        raise SystemExit(_lib.load_error())
    subset = {} if args.full else {"widths": [4], "dtypes": [_lib.BFLOAT16, _lib.FLOAT32]}
    print(f"archs {', '.join(map(str, ARCHS))}; {'every variant' if args.full else 'width 4, bf16/fp32 variants'}; "
          f"{os.cpu_count()} cores")
    print("| threads | variants | NVRTC | wall s | variants/s | variants/s per core | CPU s | variants per CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for jobs in (int(j) for j in args.jobs.split(",")):
        with tempfile.TemporaryDirectory() as out:
            m = lib.precompile(out, archs=ARCHS, jobs=jobs, **subset)
        t = m["totals"]
        nvrtc = ", ".join(sorted({a["compiler"] for a in m["archs"]}))
        print(f"| {t['jobs']} | {t['compiled']} | {nvrtc} | {t['wall_s']:.1f} | {t['variants_per_s']:.2f} | "
              f"{t['variants_per_s_per_core']:.2f} | {t['cpu_s']:.1f} | {t['variants_per_cpu_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
