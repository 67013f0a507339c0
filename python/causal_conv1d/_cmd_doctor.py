"""`causal-conv1d doctor`: diagnoses the installation (environment, GPUs, NVRTC, cache, dispatch,
a self-test per device, the version matrix) in a few lines, with the action to take next to each
problem. --json prints the same as JSON (schema in _doctor.py). Exit status 0 when every device
has a working backend, 1 otherwise."""

from __future__ import annotations

import json

HELP = "diagnose the installation: versions, GPUs, NVRTC, cache, backends, a self-test per device"


def add_arguments(p) -> None:
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (schema: README)")
    p.add_argument("--scan-extensions", action="store_true",
                   help="also list torch C++ extensions whose symbols the running libtorch lacks")
    p.add_argument("--no-self-test", dest="self_test", action="store_false",
                   help="skip the per-device self-test (no compile, no launch)")


def _gib(n: int) -> str:
    return f"{n / 2**30:.0f} GiB"


def render(r: dict) -> list:
    """The text report: one line per fact, problems followed by `-> fix`."""
    env, hw, lines = r["environment"], r["hardware"], []
    t, lib, ct = env["torch"], env["libcc1d"], env["cc1d_torch"]
    torch_line = (f"torch {t['version']} (CUDA {t['cuda'] or 'none: CPU-only build'}, "
                  f"{'cxx11' if t['cxx11_abi'] else 'pre-cxx11'} ABI)" if t["error"] is None
                  else f"torch cannot be imported: {t['error']}")
    lines.append(f"environment  Python {env['python']['version']}, {torch_line}, causal-conv1d "
                 f"{env['package']['version']} (upstream API {env['package']['api_version']})")
    lines.append(f"libcc1d      {lib['version']} {lib['path']}" if lib["path"] else f"libcc1d      NOT LOADED: {lib['error']}")
    lines.append(f"cc1d_torch   {'loaded from ' + ct['path'] if ct['loaded'] else ct['reason']}")
    d = hw["driver"]
    lines.append(f"driver       CUDA {d['cuda_version']} {d['path']}" if d["cuda_version"] else "driver       none")
    for dev in hw["devices"]:
        lines.append(f"GPU {dev['index']}        {dev['name']}, sm_{dev['sm']}, {dev['sm_count']} SMs, "
                     f"{_gib(dev['memory_bytes'])}")
    nv = r["nvrtc"]
    cands = "; ".join(f"{c['version']} {c['path']}" if not c["error"] else f"{c['path']} rejected: {c['error']}"
                      for c in nv["candidates"]) or "none found"
    lines.append(f"NVRTC        {cands}")
    for dev in nv["devices"]:
        if not dev["usable"]:
            lines.append(f"  device {dev['index']}: no usable NVRTC: {dev['reason']}")
        elif not dev["nvrtc"]:  # the shipped PTX tier alone serves it
            lines.append(f"  device {dev['index']}: {dev['mode']} {dev['target']} ({dev['reason']})")
        else:
            lines.append(f"  device {dev['index']}: {dev['mode']} {dev['target']} with NVRTC {dev['nvrtc_version']}")
        if dev["ptx_tier"]:
            why = "yes" if dev["ptx_tier"] == "serves" else f"no, {dev['ptx_tier']}"
            lines.append(f"  device {dev['index']}: first calls from the shipped PTX tier: {why}")
    c = r["cache"]
    lines.append(f"cache        {c['dir']} ({'writable' if c['writable'] else 'NOT writable'}; {c['entries']} "
                 f"file(s), {c['bytes'] / 1e6:.1f} MB)" if c["dir"] else f"cache        off: {c['reason']}")
    g = r["gpu_backend"]
    lines.append(f"GPU backend  {'yes: ' if g['available'] else 'NONE: '}{g['reason']}")
    tests = {s["device"]: s for s in r["self_test"]}
    for e in r["dispatch"]:
        head = f"{e['device']:<12} "
        if e["backend"] is None:
            why = "; ".join(f"{x['backend']}: {x['reason']}" for x in e["rejected"])
            lines.append(head + f"NO BACKEND ({why})")
            continue
        line = head + f"{e['backend']}" + (" (a fallback; CAUSAL_CONV1D_STRICT=1 forbids it)" if e["strict_fallback"]
                                           else " (fallback)" if e["fallback"] else "")
        s = tests.get(e["device"])
        if s is not None:
            if s["error"]:
                line += f"; self-test FAILED: {s['error']}"
            elif s["passed"]:
                line += (f"; self-test passed (max error {s['max_abs_error']:.2g}, first call {s['first_ms']:.1f} ms, "
                         f"then {s['median_ms']:.2f} ms)")
            else:
                line += f"; self-test FAILED: max error {s['max_abs_error']} > tolerance {s['tolerance']}"
        lines.append(line)
    for chk in r["checks"]:
        if chk["status"] in ("warn", "fail"):
            lines.append(f"{chk['status'].upper():<12} {chk['name']}: {chk['message']}"
                         + (f" -> {chk['fix']}" if chk["fix"] else ""))
    counts = ", ".join(f"{sum(c['status'] == s for c in r['checks'])} {s}" for s in ("ok", "warn", "fail", "skip"))
    lines.append(("OK: every device has a working backend" if r["ok"] else "PROBLEMS: see the lines above")
                 + f" (checks: {counts})")
    return lines


def run(args) -> int:
    from . import _doctor

    report = _doctor.diagnose(self_test=args.self_test, scan_extensions=args.scan_extensions)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False))
    else:
        print("\n".join(render(report)))
    return report["exit_status"]
