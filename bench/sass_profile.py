#!/usr/bin/env python3
"""Static SASS profile of the kernels, with no GPU: how a kernel will run, read from its cubin.

The cubins come from bench/kernel_cubins (the runtime's own compile_kernel and NVRTC options),
one per kernel family (each op's paths x x dtype, width 4) and SM. For each one:
  - registers, stack, local memory and shared memory (cuobjdump -res-usage);
  - global loads and stores by width, local-memory traffic (LDL/STL = spills), from the SASS
    (nvdisasm);
  - the steady-state loop: the innermost loop that stores the most bytes; its instructions
    divided by the outputs it stores ("instr/out"), and its 16-byte loads and stores;
  - occupancy per SM from registers, shared memory (static, plus the dynamic shared memory the
    planner asks for at launch) and the block size.

    bench/sass_profile.py --tool build/cmake/bench/kernel_cubins [--arch 80,90,100] [--match TEXT]
                          [--check bench/sass_budget.json] [--results bench/RESULTS.md]

--check fails (exit 1) when a budgeted (fast-path) family lost its 16-byte loads or stores,
spills (any LDL/STL in the steady-state loop, or more outside it than the budget records), or
exceeds its instruction budget; --results rewrites the table between the markers in
that file. Exit 77 when no NVRTC or no disassembler exists (ctest: skipped).

The disassembler: CC1D_NVDISASM / CC1D_CUOBJDUMP, else PATH, CUDA_HOME/bin, /usr/local/cuda/bin,
the pip packages nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump, then triton's copies, in the
venv of scripts/setup.sh (CC1D_VENV) and in this Python's site-packages.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
# Per-SM limits for occupancy: registers, warps, blocks, shared memory usable by blocks (bytes),
# shared memory the system reserves per block (bytes).
SM_LIMITS = {
    80: dict(regs=65536, warps=64, blocks=32, smem=167936, reserved=1024),
    90: dict(regs=65536, warps=64, blocks=32, smem=233472, reserved=1024),
    100: dict(regs=65536, warps=64, blocks=32, smem=233472, reserved=1024),
}
BEGIN, END = "<!-- sass-profile:begin -->", "<!-- sass-profile:end -->"


def tool_dirs():
    """Directories that may hold cuobjdump / nvdisasm, most specific first."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            dirs.append(os.path.join(root, "bin"))
    venv = os.environ.get("CC1D_VENV", os.path.expanduser("~/.cache/causal-conv1d/venv"))
    sites = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")) + [p for p in sys.path if p]
    for site in sites:
        dirs += sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin")))
        dirs.append(os.path.join(site, "triton", "backends", "nvidia", "bin"))
    return dirs


def find_tool(name):
    env = os.environ.get("CC1D_" + name.upper())
    if env:
        return env if os.access(env, os.X_OK) else None
    for d in tool_dirs():
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"sass_profile: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()}")
    return r.stdout


# ---- parsing ---------------------------------------------------------------------------------

RES_RE = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
INSN_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
LABEL_RE = re.compile(r"^(\.L_x_\d+):")
BRA_RE = re.compile(r"\bBRA(?:\.[A-Z.]+)?\s+(?:!?U?P\w+\s*,\s*)?`?\(?(\.L_x_\d+)\)?")


def res_usage(cuobjdump, cubin, function=None):
    """Registers, stack, shared and local bytes of the cubin's kernel (or of `function`, a mangled
    name, in a cubin of several)."""
    out = run([cuobjdump, "-res-usage", cubin])
    m = (RES_RE.search(out) if function is None
         else re.search(r"Function " + re.escape(function) + r":\s*\n[^\n]*?" + RES_RE.pattern, out))
    if not m:
        raise SystemExit(f"sass_profile: no resource usage in the cuobjdump output for {function or cubin}")
    return dict(zip(("regs", "stack", "shared", "local"), map(int, m.groups())))


def symbol_index(cubin, function):
    """The ELF symbol index of `function`, which nvdisasm -fun takes."""
    for line in run(["readelf", "-sW", cubin]).splitlines():
        f = line.split()
        if len(f) >= 8 and f[-1] == function:
            return f[0].rstrip(":")
    raise SystemExit(f"sass_profile: no symbol {function} in {cubin}")


def disassemble(nvdisasm, cubin, function=None):
    """[(address, opcode text)], {label: address} of the kernel's text section (or `function`'s)."""
    insns, labels, pending = [], {}, []
    only = ["-fun", symbol_index(cubin, function)] if function else []
    for line in run([nvdisasm, "-c"] + only + [cubin]).splitlines():
        lm = LABEL_RE.match(line.strip())
        if lm:
            pending.append(lm.group(1))
            continue
        m = INSN_RE.search(line)
        if not m:
            continue
        addr = int(m.group(1), 16)
        for lab in pending:
            labels[lab] = addr
        pending = []
        insns.append((addr, m.group(2).strip()))
    return insns, labels


def opcode(text):
    t = re.sub(r"^@!?U?P\w+\s+", "", text)  # predicate
    return t.split()[0] if t else ""


def access_bytes(op):
    """Bytes moved by a global/local load or store opcode (LDG.E.128 -> 16, LDG.E.U16 -> 2)."""
    parts = op.split(".")
    for p in parts[1:]:
        if p in ("128", "64"):
            return int(p) // 8
        if p in ("U16", "S16"):
            return 2
        if p in ("U8", "S8"):
            return 1
    return 4


def loops(insns, labels):
    """Backward branches: [(start index, end index)] of each loop body. Code after the last
    unconditional EXIT is outlined cold code (e.g. a shuffle's divergent path) that jumps back
    into the body: not a loop."""
    index = {a: i for i, (a, _) in enumerate(insns)}
    last_exit = max((i for i, (_, t) in enumerate(insns) if t.split()[0] == "EXIT"), default=len(insns) - 1)
    out = []
    for i, (addr, text) in enumerate(insns[:last_exit + 1]):
        m = BRA_RE.search(text)
        if m and m.group(1) in labels and labels[m.group(1)] <= addr:
            out.append((index[labels[m.group(1)]], i))
    return out


def stored(lops, width=None):
    """Bytes the global stores among opcodes `lops` move (only stores of `width` bytes if given)."""
    return sum(access_bytes(op) for op in lops if op.startswith("STG") and width in (None, access_bytes(op)))


def steady_loop(ops, all_loops, elem_bytes):
    """The steady-state loop of a kernel (opcodes `ops`, loops as from loops()) and its figures,
    or None: the shortest loop with 16-byte stores; without one, the innermost loop storing the
    most bytes (ties: one that computes, i.e. has FP arithmetic, before one that only moves data,
    such as the update's state writes or its zeroing of padding rows; then the shortest), else
    any loop that stores. Its instructions are counted at its own level: loops nested in it
    (rolled edge code) are left out."""

    def nested(s, e):
        return [(s2, e2) for s2, e2 in all_loops if s <= s2 and e2 <= e and (s2, e2) != (s, e)]

    def own(s, e):
        inner = nested(s, e)
        return [ops[i] for i in range(s, e + 1) if not any(s2 <= i <= e2 for s2, e2 in inner)]

    def computes(lops):
        return any(op.startswith(("FFMA", "FMUL", "FADD", "HFMA2", "HMUL2", "HADD2")) for op in lops)

    best = None
    vec = [(s, e) for s, e in all_loops if stored(own(s, e), 16)]
    if vec:
        best = min(vec, key=lambda l: l[1] - l[0])
    else:
        innermost = [(s, e) for s, e in all_loops if not nested(s, e)]
        for group in (innermost, all_loops):
            owned = [(own(s, e), (s, e)) for s, e in group]
            scored = [(stored(o), computes(o), -(e - s), (s, e)) for o, (s, e) in owned if stored(o)]
            if scored:
                best = max(scored)[-1]
                break
    if not best:
        return None
    lops = own(*best)
    # A loop with 16-byte stores writes its outputs with them (its scalar stores are edges and
    # final states); otherwise every store is an output.
    outputs = (stored(lops, 16) or stored(lops)) / elem_bytes
    return dict(insns=len(lops), outputs=outputs, per_output=len(lops) / outputs,
                spills=sum(1 for op in lops if op.startswith(("LDL", "STL"))),
                ldg128=sum(1 for op in lops if op.startswith("LDG") and access_bytes(op) == 16),
                stg128=sum(1 for op in lops if op.startswith("STG") and access_bytes(op) == 16))


def profile(cubin, arch, threads, dynamic_smem, elem_bytes, tools, function=None):
    res = res_usage(tools["cuobjdump"], cubin, function)
    res["shared"] += dynamic_smem  # a launch's dynamic shared memory counts like the static
    insns, labels = disassemble(tools["nvdisasm"], cubin, function)
    # The trailing self-branch and padding after the last EXIT are not code.
    body = [(a, t) for a, t in insns if opcode(t) != "NOP"]
    while body and opcode(body[-1][1]) == "BRA" and BRA_RE.search(body[-1][1]):
        body.pop()
    ops = [opcode(t) for _, t in body]
    loads = {}
    stores = {}
    for op in ops:
        if op.startswith("LDG"):
            loads[access_bytes(op)] = loads.get(access_bytes(op), 0) + 1
        elif op.startswith("STG"):
            stores[access_bytes(op)] = stores.get(access_bytes(op), 0) + 1
    spill_insns = sum(1 for op in ops if op.startswith(("LDL", "STL")))
    loop = steady_loop(ops, loops(body, labels), elem_bytes)
    lim = SM_LIMITS.get(arch)
    occ = None
    if lim and threads:
        warps = (threads + 31) // 32
        regs_per_warp = ((max(res["regs"], 1) * 32 + 255) // 256) * 256
        by_regs = lim["regs"] // (regs_per_warp * warps)
        by_smem = lim["smem"] // (res["shared"] + lim["reserved"]) if res["shared"] else lim["blocks"]
        blocks = min(by_regs, by_smem, lim["blocks"], lim["warps"] // warps)
        occ = blocks * warps / lim["warps"]
    return dict(res, insns=len(body), loads=loads, stores=stores, spill_insns=spill_insns, loop=loop,
                occupancy=occ)


def elem_bytes_of(label):
    return 4 if "fp32" in label.split() else 2


# ---- output ----------------------------------------------------------------------------------

def widths(d):
    return " ".join(f"{n}x{b * 8}b" for b, n in sorted(d.items(), reverse=True)) or "-"


def table(rows):
    lines = ["| kernel family (width 4) | SM | regs | local memory: LDL/STL, stack B | smem B | occupancy | "
             "global loads | global stores | kernel instr | loop instr/out | loop LDG.128 / STG.128 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["profile"]
        loop = p["loop"]
        lp = f"{loop['per_output']:.1f} ({loop['insns']}/{loop['outputs']:g})" if loop else "-"
        lv = f"{loop['ldg128']} / {loop['stg128']}" if loop else "-"
        occ = f"{100 * p['occupancy']:.0f}%" if p["occupancy"] is not None else "-"
        lines.append(f"| {r['label']} | {r['arch']} | {p['regs']} | {p['spill_insns']}, {p['stack'] + p['local']} | {p['shared']} | "
                     f"{occ} | {widths(p['loads'])} | {widths(p['stores'])} | {p['insns']} | {lp} | {lv} |")
    return "\n".join(lines)


def check(rows, budget, archs, match):
    """Messages for every budget rule a profiled family breaks; every budgeted family of the
    requested SMs (and --match) must have been profiled."""
    errors = []
    by_key = {(r["label"], r["arch"]): r["profile"] for r in rows}
    for label, rule in budget["families"].items():
        if match and not any(m in label for m in match.split("|")):
            continue
        for arch_s, max_per_output in rule["max_loop_instr_per_output"].items():
            arch = int(arch_s)
            if arch not in archs:
                continue
            p = by_key.get((label, arch))
            where = f"{label} on sm_{arch}"
            if p is None:
                errors.append(f"{where}: not profiled (the family or its kernel is gone)")
                continue
            allowed = rule.get("max_spill_insns", {}).get(arch_s, 0)
            if p["spill_insns"] > allowed or p["local"]:
                errors.append(f"{where}: spills ({p['spill_insns']} LDL/STL, {allowed} allowed by the budget; "
                              f"{p['local']} bytes of local memory)")
            loop = p["loop"]
            if loop is None:
                errors.append(f"{where}: no steady-state loop storing to global memory")
                continue
            if loop["spills"]:
                errors.append(f"{where}: spills inside the steady-state loop ({loop['spills']} LDL/STL)")
            # Loads issued ahead of the loop (the rule's loads_ahead: that many LDG.128 in the
            # kernel) stand in for loads in it.
            ahead = rule.get("loads_ahead", 0)
            loads_ok = loop["ldg128"] >= 1 or (ahead and p["loads"].get(16, 0) >= ahead)
            if rule.get("vector", True) and (not loads_ok or loop["stg128"] < 1):
                errors.append(f"{where}: lost its 16-byte accesses (loop has {loop['ldg128']} LDG.128, "
                              f"{loop['stg128']} STG.128; kernel {p['loads'].get(16, 0)} LDG.128)")
            if loop["per_output"] > max_per_output:
                errors.append(f"{where}: {loop['per_output']:.2f} loop instructions per output exceed the "
                              f"budget of {max_per_output} (bench/sass_budget.json)")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tool", required=True, help="path of the kernel_cubins executable")
    ap.add_argument("--arch", default="80,90,100")
    ap.add_argument("--match", help="only the families whose label contains this text (e.g. _vec; A|B: either)")
    ap.add_argument("--check", help="budget JSON: fail when a budgeted family breaks it")
    ap.add_argument("--results", help="markdown file whose profile table (between markers) is rewritten")
    ap.add_argument("--json", help="also write the raw profile here")
    args = ap.parse_args()
    tools = {n: find_tool(n) for n in ("cuobjdump", "nvdisasm")}
    missing = [n for n, p in tools.items() if p is None]
    if missing:
        print(f"SKIPPED: {', '.join(missing)} not found (searched CC1D_NVDISASM/CC1D_CUOBJDUMP, PATH, CUDA_HOME, "
              f"/usr/local/cuda, pip's nvidia-cuda-nvdisasm/-cuobjdump and triton); scripts/setup.sh installs them")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="cc1d_sass_") as tmp:
        cmd = [args.tool, "--out", tmp, "--arch", args.arch, "--profile-set"] + (["--match", args.match] if args.match else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == SKIP:
            print("SKIPPED: " + (r.stderr.strip() or "kernel_cubins found no NVRTC"))
            return SKIP
        if r.returncode != 0:
            raise SystemExit(f"sass_profile: kernel_cubins failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        rows = []
        with open(os.path.join(tmp, "manifest.tsv")) as f:
            for line in f:
                file, arch, threads, smem, ms, lowered, label, name = line.rstrip("\n").split("\t")
                rows.append(dict(label=label, name=name, arch=int(arch), compile_ms=float(ms),
                                 profile=profile(os.path.join(tmp, file), int(arch), int(threads), int(smem),
                                                 elem_bytes_of(label), tools)))
    rows.sort(key=lambda r: (r["label"], r["arch"]))
    text = table(rows)
    print(text)
    print(f"\n(cuobjdump {tools['cuobjdump']}, nvdisasm {tools['nvdisasm']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.results:
        with open(args.results) as f:
            doc = f.read()
        if BEGIN not in doc or END not in doc:
            raise SystemExit(f"sass_profile: {args.results} has no {BEGIN} ... {END} markers")
        head, rest = doc.split(BEGIN, 1)
        with open(args.results, "w") as f:
            f.write(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1])
    if args.check:
        with open(args.check) as f:
            errors = check(rows, json.load(f), [int(a) for a in args.arch.split(",")], args.match)
        if errors:
            print("\nFAILED static profile budget:\n  " + "\n  ".join(errors))
            return 1
        print(f"\nstatic profile budget ({args.check}): every fast-path family keeps its 16-byte accesses, "
              f"no spills, within its instruction budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
