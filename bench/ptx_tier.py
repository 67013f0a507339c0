"""What a shipped-PTX tier would save on a cold first call, measured without a GPU: per kernel of
the static profile's set (bench/kernel_cubins --profile-set), the NVRTC time of an sm_XY cubin
(what the runtime compiles today), of compute_XY PTX alone (what a build machine would do once),
and of ptxas on that PTX (standing in for the driver's JIT, which a tier would leave to run time);
the PTX's size, raw and gzipped (what the library would carry); and whether PTX built for a lower
virtual arch gives the same SASS on the device's SM as the direct compile (how many PTX sets a
tier needs). With --ptx-nvrtc, that lower arch's PTX comes from another NVRTC (an older CUDA's,
whose PTX older drivers accept), and --jit-ptxas assembles it: that CUDA's ptxas, standing in for
its driver's JIT. Where the SASS differs, the registers and spill bytes say how.

    python bench/ptx_tier.py --tool build/cmake/bench/kernel_cubins [--match " bf16"] \\
        [--sm 90] [--virtual 80] [--nvrtc /usr/local/cuda/lib64/libnvrtc.so] [--ptxas ...] \\
        [--ptx-nvrtc .../libnvrtc.so.12 --jit-ptxas .../ptxas]

The sources are kernels_src/ (or CAUSAL_CONV1D_KERNEL_DIR), compiled with the runtime's options
(`-std=c++17 --use_fast_math`, and `--minimal` from NVRTC 12.4 on: nvrtc_compile.cpp). Times are this process's CPU time
for NVRTC and the child's for ptxas (its start, about 10 ms here, included). Prints a markdown
table. Exits 77 (ctest's skip) without NVRTC, ptxas or nvdisasm; ctest runs it on one kernel
(bench_smoke.ptx_tier).
"""
import argparse
import ctypes
import gzip
import os
import re
import resource
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass_profile import disassemble, find_tool, run  # noqa: E402  (same folder)

OPTS = [b"-std=c++17", b"--use_fast_math"]
SKIP = 77


class Nvrtc:
    def __init__(self, path, src_dir):
        self.lib = ctypes.CDLL(path)
        self.src_dir = src_dir
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        self.version = (major.value, minor.value)
        self.opts = OPTS + ([b"--minimal"] if self.version >= (12, 4) else [])
        with open(os.path.join(src_dir, "causal_conv1d.cu"), "rb") as f:
            self.main = f.read()

    def compile(self, name, arch):
        """(cubin or PTX bytes, CPU seconds) for one kernel's name expression."""
        lib, prog = self.lib, ctypes.c_void_p()
        if lib.nvrtcCreateProgram(ctypes.byref(prog), self.main, b"causal_conv1d.cu", 0, None, None) != 0:
            raise SystemExit("nvrtcCreateProgram failed")
        lib.nvrtcAddNameExpression(prog, name.encode())
        opts = [f"-arch={arch}".encode(), f"-I{self.src_dir}".encode()] + self.opts
        before = cpu_self()
        rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        seconds = cpu_self() - before
        n = ctypes.c_size_t()
        if rc != 0:
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise SystemExit(f"NVRTC failed on {name} for {arch}:\n{log.value.decode()}")
        cubin = arch.startswith("sm_")
        size, get = (lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if cubin else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX)
        size(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        get(prog, buf)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        image = buf.raw[: n.value]
        return (image if cubin else image.rstrip(b"\0")), seconds  # PTX: without its terminating NUL


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def ptxas(tool, ptx, sm, tmp):
    """(cubin path, the child's CPU seconds, "registers, spill bytes" from its -v report)."""
    src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, f"k{sm}.cubin")
    with open(src, "wb") as f:
        f.write(ptx)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([tool, "-v", f"-arch=sm_{sm}", src, "-o", out], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"ptx_tier: {tool} failed on sm_{sm}:\n{r.stderr.strip()}")
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spills = sum(int(b) for b in re.findall(r"(\d+) bytes spill (?:stores|loads)", r.stderr))
    usage = f"{regs.group(1) if regs else '?'} regs, {spills} B spilled"
    return out, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), usage


def sass(nvdisasm, cubin):
    return [op for _, op in disassemble(nvdisasm, cubin)[0]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True, help="path of the kernel_cubins executable (for the kernel list)")
    ap.add_argument("--match", default=" bf16", help="kernel families whose label contains this text")
    ap.add_argument("--sm", type=int, default=90, help="the device SM the tier serves")
    ap.add_argument("--virtual", type=int, default=80, help="the lower virtual arch whose PTX is compared")
    ap.add_argument("--nvrtc", default="/usr/local/cuda/lib64/libnvrtc.so")
    ap.add_argument("--ptxas", default=find_tool("ptxas") or "/usr/local/cuda/bin/ptxas")
    ap.add_argument("--ptx-nvrtc", help="the NVRTC that makes the compute_VIRTUAL PTX (default: --nvrtc)")
    ap.add_argument("--jit-ptxas", help="the ptxas that assembles that PTX (default: --ptxas)")
    args = ap.parse_args()
    nvdisasm = find_tool("nvdisasm")
    missing = [what for what, ok in (("nvdisasm (scripts/setup.sh installs it)", nvdisasm),
                                     (f"ptxas ({args.ptxas})", os.access(args.ptxas, os.X_OK)),
                                     (f"ptxas ({args.jit_ptxas})", os.access(args.jit_ptxas or args.ptxas, os.X_OK)),
                                     (f"NVRTC ({args.nvrtc})", os.path.exists(args.nvrtc)),
                                     (f"NVRTC ({args.ptx_nvrtc})", os.path.exists(args.ptx_nvrtc or args.nvrtc)))
               if not ok]
    if missing:
        print("SKIPPED: not found: " + ", ".join(missing))
        return SKIP
    src_dir = os.environ.get("CAUSAL_CONV1D_KERNEL_DIR") or os.path.join(os.path.dirname(__file__), "..", "kernels_src")
    nvrtc = Nvrtc(args.nvrtc, os.path.abspath(src_dir))
    tier_nvrtc = Nvrtc(args.ptx_nvrtc, os.path.abspath(src_dir)) if args.ptx_nvrtc else nvrtc
    sm, virt = args.sm, args.virtual
    with tempfile.TemporaryDirectory(prefix="cc1d_ptx_") as tmp:
        run([args.tool, "--out", tmp, "--arch", str(sm), "--profile-set", "--match", args.match])
        with open(os.path.join(tmp, "manifest.tsv")) as f:
            kernels = [line.rstrip("\n").split("\t")[6:8] for line in f]
        low_by = "" if tier_nvrtc is nvrtc else f" (NVRTC {tier_nvrtc.version[0]}.{tier_nvrtc.version[1]})"
        print(f"| kernel | NVRTC {nvrtc.version[0]}.{nvrtc.version[1]} to sm_{sm} cubin | NVRTC to compute_{sm} "
              f"PTX | ptxas on it | PTX KB (gzip) | its SASS = the cubin's | compute_{virt} PTX{low_by}'s SASS = the "
              "cubin's |")
        print("|---|---|---|---|---|---|---|")
        for label, name in kernels:
            cubin, t_cubin = nvrtc.compile(name, f"sm_{sm}")
            direct = os.path.join(tmp, "direct.cubin")
            with open(direct, "wb") as f:
                f.write(cubin)
            want = sass(nvdisasm, direct)
            ptx, t_ptx = nvrtc.compile(name, f"compute_{sm}")
            jit, t_jit, usage = ptxas(args.ptxas, ptx, sm, tmp)
            same = sass(nvdisasm, jit) == want
            low, _ = tier_nvrtc.compile(name, f"compute_{virt}")
            low_cubin, _, low_usage = ptxas(args.jit_ptxas or args.ptxas, low, sm, tmp)
            same_low = "yes" if sass(nvdisasm, low_cubin) == want else f"NO: {low_usage} against {usage}"
            print(f"| {label} | {t_cubin * 1e3:.0f} ms | {t_ptx * 1e3:.0f} ms | {t_jit * 1e3:.0f} ms | "
                  f"{len(ptx) / 1024:.0f} ({len(gzip.compress(ptx)) / 1024:.0f}) | {'yes' if same else 'NO'} | "
                  f"{same_low} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
