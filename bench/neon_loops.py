#!/usr/bin/env python3
"""The aarch64 cpu backend's steady-state loops, counted from the disassembly (no Arm machine).

For each NEON unit (fallback/cpu/simd_base.cpp, simd_neon_bf16.cpp) of an aarch64 build, and each
dtype of the channel-first forward (conv_row<4, dtype, silu>) and of the packed short rows
(conv_packed_rows<4, dtype, silu>), it finds the innermost loop with the most FMLAs: by_vectors'
group of 4 vectors of 4 floats, i.e. 16 outputs an iteration. It
prints the loop's instructions per output and the instructions that tell the code paths apart.
--check (scripts/aarch64_test.sh) fails when a loop is missing, divides, or exceeds BUDGET: the
figures of 2026-12-06 plus about 10%, as bench/sass_budget.json for the GPU kernels. Lower a figure
when a loop gets leaner; raise one only with a reason here.

    bench/neon_loops.py build/cmake-aarch64 [--check] [--objdump aarch64-linux-gnu-objdump]
"""
import argparse
import collections
import pathlib
import re
import subprocess
import sys

OUTPUTS = 16  # by_vectors' K (4) vectors of L (4) floats
DTYPES = {0: "fp32", 1: "fp16", 2: "bf16"}
SHOWN = ("fdiv", "frecpe", "bfcvtn", "bfcvtn2", "fcvtn", "fcvtl", "xtn")
KERNELS = ("conv_row", "conv_packed_rows")
# Instructions per output, by (unit, kernel, dtype). conv_row: 10.0, 10.1, 12.6 and 10.4 measured
# (2026-12-06, silu 5 instructions a vector leaner; 12.2, 12.5, 15.0 and 13.4 before); conv_packed_rows:
# 18.7, 19.1, 21.6 and 19.2 (its five lane permutes a vector are tbl lookups: GCC's generic shuffle
# took 32).
BUDGET = {("simd_base", "conv_row", "fp32"): 11.0, ("simd_base", "conv_row", "fp16"): 11.0,
          ("simd_base", "conv_row", "bf16"): 14.0, ("simd_neon_bf16", "conv_row", "fp32"): 11.0,
          ("simd_neon_bf16", "conv_row", "fp16"): 11.0, ("simd_neon_bf16", "conv_row", "bf16"): 11.5,
          ("simd_base", "conv_packed_rows", "fp32"): 20.5, ("simd_base", "conv_packed_rows", "fp16"): 21.0,
          ("simd_base", "conv_packed_rows", "bf16"): 24.0, ("simd_neon_bf16", "conv_packed_rows", "fp32"): 20.5,
          ("simd_neon_bf16", "conv_packed_rows", "fp16"): 21.0, ("simd_neon_bf16", "conv_packed_rows", "bf16"): 21.0}
NOT_BRANCHES = {"bl", "bic", "bif", "bit", "bsl", "bfi", "bfxil", "bfcvtn", "bfcvtn2"}


def functions(objdump, obj):
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-C", str(obj)], check=True,
                          capture_output=True, text=True).stdout
    for block in text.split("\n\n"):
        lines = block.strip().split("\n")
        head = re.match(r"[0-9a-f]+ <(.*)>:$", lines[0])
        if not head:
            continue
        insns = []
        for line in lines[1:]:
            m = re.match(r"\s*([0-9a-f]+):\s+(\S+)\s*(.*)", line)
            if m:
                insns.append((int(m.group(1), 16), m.group(2), m.group(3)))
        yield head.group(1), insns


def steady_loop(insns):
    """The innermost loop (a backward branch's range holding no other) with the most FMLAs."""
    at = {a: i for i, (a, _, _) in enumerate(insns)}
    loops = set()
    for i, (a, op, args) in enumerate(insns):
        m = re.search(r"\b([0-9a-f]+) <", args)
        target = int(m.group(1), 16) if m else None
        if op.startswith("b") and op not in NOT_BRANCHES and target in at and target <= a:
            loops.add((at[target], i))
    inner = [(s, e) for s, e in loops if not any((s, e) != (s2, e2) and s <= s2 and e2 <= e for s2, e2 in loops)
             and not any(op == "bl" for _, op, _ in insns[s:e + 1])]
    best = max(inner, key=lambda r: sum(op == "fmla" for _, op, _ in insns[r[0]:r[1] + 1]), default=None)
    return collections.Counter(op for _, op, _ in insns[best[0]:best[1] + 1]) if best else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", type=pathlib.Path)
    ap.add_argument("--objdump", default="aarch64-linux-gnu-objdump")
    ap.add_argument("--check", action="store_true", help="exit 1 when a loop misses its budget")
    args = ap.parse_args()
    seen, failures = set(), []
    print("| unit | kernel | dtype | silu | loop instr/out | " + " | ".join(SHOWN) + " |")
    print("|---|---|---|---|---|" + "---|" * len(SHOWN))
    for unit in ("simd_base", "simd_neon_bf16"):
        obj = args.build / f"CMakeFiles/cc1d_objects.dir/fallback/cpu/{unit}.cpp.o"
        if not obj.exists():
            print(f"| {unit} | not built ({obj}) |")
            continue
        for name, insns in functions(args.objdump, obj):
            m = re.search(r"\b(" + "|".join(KERNELS) + r")<4, (\d), (true|false)>\(", name)
            count = steady_loop(insns) if m else None
            if count:
                kernel, dtype, per_out = m.group(1), DTYPES[int(m.group(2))], sum(count.values()) / OUTPUTS
                print(f"| {unit} | {kernel} | {dtype} | {m.group(3)} | {per_out:.1f} | "
                      + " | ".join(str(count[k]) for k in SHOWN) + " |")
                key = (unit, kernel, dtype)
                seen.add(key)
                # The group's silu: one reciprocal estimate a vector, no division.
                if per_out > BUDGET[key] or count["fdiv"] or count["frecpe"] != OUTPUTS // 4:
                    failures.append(f"{unit} {kernel} {dtype}: {per_out:.1f} instructions per output (budget "
                                    f"{BUDGET[key]}), {count['fdiv']} fdiv, {count['frecpe']} frecpe (want 4)")
    failures += [f"{' '.join(k)}: no steady-state loop found" for k in sorted(set(BUDGET) - seen)]
    for f in failures:
        print("neon_loops: " + f)
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main())
