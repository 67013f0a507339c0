"""A kernel's cold first call, from the shipped PTX tier and from NVRTC, side by side.

Each measurement is a fresh process with a fresh kernel cache and the driver's JIT cache off
(CUDA_CACHE_DISABLE=1), so every first call really builds its kernels: once with
CAUSAL_CONV1D_PTX_TIER=1 (the driver links the embedded PTX), once with 0 (NVRTC compiles), and
once with the tier and no NVRTC at all (CAUSAL_CONV1D_NVRTC=none, as on a node without one). The
cache directory holds the NVRTC facts an earlier process left (nvrtc_memo.h), as on any machine
after its first process, so a first call from the tier loads no NVRTC. The CUDA context is made
before the clock starts. Each output is checked against causal_conv1d_ref in float64 (the run
fails on a mismatch). Prints a markdown table: per configuration, the first call's wall time
and each kernel's build time and origin as cc1d_report gives them.

    CAUSAL_CONV1D_LIBRARY=build/cmake/libcc1d.so python bench/first_call.py [--device cpu]

(--device cpu only checks the plumbing: the cpu backend builds nothing.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# (name, x dtype, layout, backward too)
CONFIGS = [("fwd bf16 channel-first", "bfloat16", "cf", False), ("fwd bf16 channel-last", "bfloat16", "cl", False),
           ("fwd fp32 channel-first", "float32", "cf", False), ("fwd+bwd bf16 channel-first", "bfloat16", "cf", True),
           ("fwd+bwd bf16 channel-last", "bfloat16", "cl", True)]


def child(device: str, dtype: str, layout: str, backward: bool) -> None:
    import time

    import torch

    import causal_conv1d
    from causal_conv1d import _lib
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref

    dev = torch.device(device)
    torch.zeros(1, device=dev)  # the CUDA context, outside the clock
    B, D, L, W = 2, 256, 512, 4
    x = torch.randn(B, L, D, device=dev, dtype=getattr(torch, dtype)).transpose(1, 2) if layout == "cl" else \
        torch.randn(B, D, L, device=dev, dtype=getattr(torch, dtype))
    w = torch.randn(D, W, device=dev, dtype=x.dtype)
    b = torch.randn(D, device=dev, dtype=x.dtype)
    if backward:
        for t in (x, w, b):
            t.requires_grad_(True)
    t0 = time.perf_counter()
    y = causal_conv1d.causal_conv1d_fn(x, w, b, activation="silu")
    if backward:
        y.float().square().sum().backward()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    rep = _lib.library().report()["backends"].get("nvrtc", {})
    ref = causal_conv1d_ref(x.detach().double(), w.detach().double(), b.detach().double(), activation="silu")
    err = ((y.detach().double() - ref).abs() / (1 + ref.abs())).max().item()
    print(json.dumps({"ms": ms, "compiled": rep.get("compiled", []), "err": err}))


FACTS = "nvrtc-facts-v1"  # NvrtcMemo::kFileName


def facts_of(device: str) -> bytes:
    """The NVRTC facts a process on `device` leaves in its cache directory (b"" when none)."""
    with tempfile.TemporaryDirectory() as cache:
        subprocess.run([sys.executable, "-c", "from causal_conv1d import _lib; _lib.library().report()"],
                       env=dict(os.environ, CAUSAL_CONV1D_CACHE_DIR=cache), check=True, timeout=300)
        path = os.path.join(cache, FACTS)
        return open(path, "rb").read() if os.path.exists(path) else b""


# (column, environment): the tier, NVRTC alone, the tier alone.
MODES = [("shipped PTX", {"CAUSAL_CONV1D_PTX_TIER": "1"}), ("NVRTC", {"CAUSAL_CONV1D_PTX_TIER": "0"}),
         ("shipped PTX, no NVRTC", {"CAUSAL_CONV1D_PTX_TIER": "1", "CAUSAL_CONV1D_NVRTC": "none"})]
TOLERANCE = {"bfloat16": 2e-2, "float32": 1e-4}  # relative to 1 + |ref|


def measure(device: str, dtype: str, layout: str, backward: bool, mode: dict, facts: bytes) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        if facts:
            fd = os.open(os.path.join(cache, FACTS), os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, facts)
            os.close(fd)
        env = dict(os.environ, CAUSAL_CONV1D_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1", **mode)
        r = subprocess.run([sys.executable, __file__, "--child", device, dtype, layout, str(int(backward))],
                           env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"the child failed ({device} {dtype} {layout} {mode}):\n{r.stdout}{r.stderr}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    if not rec["err"] <= TOLERANCE[dtype]:
        raise SystemExit(f"MISMATCH ({device} {dtype} {layout} {mode}): error {rec['err']:.3g} against the "
                         f"float64 reference, tolerance {TOLERANCE[dtype]}")
    return rec


def kernels(rec: dict) -> str:
    short = lambda v: v["variant"].replace("cc1d::causal_conv1d_", "").replace("cc1d::", "")
    return "; ".join(f"{short(v)} {v['ms']:.0f} ms ({v['origin']})" for v in rec["compiled"]) or "none built"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1")
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    facts = facts_of(args.device)
    print(f"NVRTC facts kept between processes: {'yes' if facts else 'none (no GPU found)'}\n")
    print("| configuration | " + " | ".join(f"first call, {m} ms" for m, _ in MODES) + " | " +
          " | ".join(f"kernels ({m})" for m, _ in MODES) + " |")
    print("|---|" + "---|" * 2 * len(MODES))
    for name, dtype, layout, backward in CONFIGS:
        recs = [measure(args.device, dtype, layout, backward, env, facts) for _, env in MODES]
        print(f"| {name} | " + " | ".join(f"{r['ms']:.1f}" for r in recs) + " | " +
              " | ".join(kernels(r) for r in recs) + " |")
    print("\nEvery output matched the float64 reference.")


if __name__ == "__main__":
    main()
