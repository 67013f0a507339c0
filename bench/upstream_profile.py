"""Upstream's kernels in the static profile's terms: compiles one of upstream causal-conv1d's .cu
files with nvcc and its setup.py's flags, then reads each chosen kernel of the cubin as
bench/sass_profile.py reads ours (registers, occupancy, global accesses by width, instructions,
the steady-state loop's instructions per output).

    python bench/upstream_profile.py --upstream <a checkout of Dao-AILab/causal-conv1d> \\
        [--file causal_conv1d_bwd.cu] [--arch 90] [--match REGEX] [--cubin saved.cubin]

The .cu includes ATen headers: the include paths come from the torch of this interpreter (the
project's venv). Compiling either file takes about 4 minutes on one core (every dtype,
width and flag of upstream's switches); --cubin keeps the result, and reads it back when it
exists. --match selects kernels by their demangled name (default: width 4, vector loads,
bf16 and fp32, no seq_idx; the backward's with silu); for the update (causal_conv1d_update.cu),
e.g. --match 'update_kernel_traits<64, 4, (c10::BFloat16, c10::BFloat16|float, float)>'. A
kernel's block size is its traits' first argument (128, the update's 64).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_profile import find_tool, profile, run, table  # noqa: E402  (same folder)

# setup.py's nvcc flags (upstream 1.6), less -lineinfo and --ptxas-options=-v.
NVCC_FLAGS = ["-O3", "-std=c++17", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math"]
# Width 4, vector loads, bf16 and fp32 (x and weight alike), no seq_idx: the forward's traits
# <threads, width, vec load, x, w> (channel-first) and <threads, width, chunk L, vec load, x, w>
# with <seq_idx> (channel-last; its silu is a run-time flag); the backward's, silu compiled in,
# <threads, width, silu, vec load, x, w> with <deterministic>, and <threads, width, chunk L, silu,
# vec load, x, w> with <seq_idx, dfinal_states, deterministic>.
DT = r"(c10::BFloat16, c10::BFloat16|float, float)"
DEFAULT_MATCH = "|".join([rf"fwd_kernel_traits<128, 4, true, {DT}> >",
                          rf"fwd_kernel_traits<128, 4, 64, true, {DT}>, false>",
                          rf"bwd_kernel_traits<128, 4, true, true, {DT}>, false>",
                          rf"bwd_kernel_traits<128, 4, 128, true, true, {DT}>, false, false, false>"])


def compile_cu(nvcc, src, arch, out):
    import torch.utils.cpp_extension as ext  # the project's venv: ATen's headers
    import sysconfig
    inc = [f"-I{p}" for p in ext.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    run([nvcc, "-cubin", f"-arch=sm_{arch}"] + NVCC_FLAGS + inc + [src, "-o", out])


def kernels(cubin):
    """(mangled, demangled) of every kernel in the cubin."""
    names = re.findall(r"Function (\S+):", run([find_tool("cuobjdump"), "-res-usage", cubin]))
    demangled = run(["c++filt"] + names).splitlines() if names else []
    return list(zip(names, demangled))


def label_of(demangled):
    dtype = "bf16" if "BFloat16" in demangled else "fp16" if "Half" in demangled else "fp32"
    if "_update_kernel" in demangled:  # <traits, kIsCircularBuffer>
        ring = re.search(r", true>\(", demangled) is not None
        return f"upstream update {'ring' if ring else 'state'} {dtype}"
    op = "fwd" if "_fwd_kernel" in demangled else "bwd"
    kind = "channel-last" if "channellast" in demangled else "channel-first"
    return f"upstream {op} {kind} {dtype}"


def threads_of(demangled):
    """A kernel's block size: the first template argument of its traits (update: 64)."""
    m = re.search(r"_traits<(\d+),", demangled)
    return int(m.group(1)) if m else 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="a checkout of Dao-AILab/causal-conv1d")
    ap.add_argument("--file", default="causal_conv1d_bwd.cu", help="the .cu file of csrc/ to compile")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--match", default=DEFAULT_MATCH, help="regex over the kernels' demangled names")
    ap.add_argument("--cubin", help="where to keep the cubin (read back if it exists)")
    ap.add_argument("--nvcc", default=find_tool("nvcc") or "/usr/local/cuda/bin/nvcc")
    args = ap.parse_args()
    tools = {n: find_tool(n) for n in ("cuobjdump", "nvdisasm")}
    if None in tools.values() or not os.access(args.nvcc, os.X_OK):
        print(f"SKIPPED: needs nvcc ({args.nvcc}), cuobjdump and nvdisasm (scripts/setup.sh installs the last two)")
        return 77
    with tempfile.TemporaryDirectory(prefix="cc1d_upstream_") as tmp:
        cubin = args.cubin or os.path.join(tmp, "upstream.cubin")
        if not os.path.exists(cubin):
            compile_cu(args.nvcc, os.path.join(args.upstream, "csrc", args.file), args.arch, cubin)
        rows = [dict(label=label_of(d), arch=args.arch,
                     profile=profile(cubin, args.arch, threads_of(d), 0, 4 if "float, float" in d else 2, tools,
                                     function=m))
                for m, d in kernels(cubin) if re.search(args.match, d)]
    if not rows:
        raise SystemExit(f"upstream_profile: no kernel of {args.file} matches {args.match!r}")
    print(table(sorted(rows, key=lambda r: r["label"])))


if __name__ == "__main__":
    sys.exit(main())
