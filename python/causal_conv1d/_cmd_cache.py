"""`causal-conv1d cache path | stats | list | verify | clear [--json]`: see and manage the kernel cache.

The local cache is CAUSAL_CONV1D_CACHE_DIR (default ~/.cache/causal-conv1d/kernels); the read-only
tiers are CAUSAL_CONV1D_CACHE_PATH. Set them as the program you are looking at does.

  path    where the local cache and each tier live, and their state (a tier's targets: what a node
          without NVRTC loads from it)
  stats   entries and bytes on disk; hits, misses, corrupt, writes, evictions (kept by every process)
  list    every entry: key, size, date, target, compiler, kernel, and whether it verifies
  verify  checks every entry: bad local entries are removed, bad tier entries reported (exit 1 if any)
  clear   removes every local entry, and NVRTC's facts (tiers are never written)
"""

from __future__ import annotations

import json
import sys
import time

from . import _lib


def _places(result: dict) -> list:
    return [("local", result["local"])] + [("tier", t) for t in result["tiers"]]


def _state(p: dict) -> str:
    return p["state"] + (f" ({p['problem']})" if p.get("problem") else "")


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _print_path(result: dict) -> None:
    for role, p in _places(result):
        print(f"{role}: {p['dir'] or '(off)'}  [{_state(p)}]")
        if p["dir"]:
            print(f"  entries: {p['entries_dir']}")
        for t in p.get("targets", []):  # a precompiled tier's: what a node without NVRTC loads
            print(f"  sm_{t['arch']}: {t['target']} by {t['compiler']}, for drivers of CUDA "
                  f"{t['min_driver'] // 1000}.{t['min_driver'] % 1000 // 10} and later (no NVRTC needed)")


def _print_stats(result: dict) -> None:
    cols = ("entries", "bytes", "hits", "misses", "corrupt", "writes", "evictions")
    print(f"{'':6} {'state':12} " + " ".join(f"{c:>10}" for c in cols) + "  dir")
    for role, p in _places(result):
        counters = p.get("counters", {})
        values = [p.get("entries", 0), p.get("bytes", 0)] + [counters.get(c, "-") for c in cols[2:]]
        print(f"{role:6} {p['state']:12} " + " ".join(f"{v:>10}" for v in values) + f"  {p['dir'] or '(off)'}")
        if p.get("temp_files"):
            print(f"{'':6} {p['temp_files']} temp file(s), {p['temp_bytes']} bytes, being written or left by "
                  f"killed writers")
        if p.get("problem"):
            print(f"{'':6} {p['problem']}")


def _print_items(result: dict) -> None:
    for role, p in _places(result):
        if not p["dir"]:
            continue
        head = f"{role} {p['dir']} [{_state(p)}]: {p.get('entries', 0)} entries, {_size(p.get('bytes', 0))}"
        if "ok" in p:
            head += f"; {p['ok']} ok, {p['bad']} bad"
        if "removed" in p:
            head += f"; {p['removed']} removed"
        print(head)
        for e in sorted(p.get("items", []), key=lambda e: (e["kernel"], e["target"], e["key"])):
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["mtime"]))
            if e["ok"]:
                what = f"{e['target']:<11} {e['compiler']:<11} {e['kernel']}"
            else:
                what = f"BAD: {e['problem']}" + (" (removed)" if e["removed"] else
                                                 " (kept: a tier is never written)" if role == "tier" else "")
            print(f"  {e['key'][:16]} {e['bytes']:>9} {when} {what}")


def _print_clear(result: dict) -> None:
    p = result["local"]
    if p["state"] not in ("read-write", "full"):
        print(f"local: {p['dir'] or '(off)'} [{_state(p)}]: nothing removed")
        return
    facts = "".join(f", and {f}" for f in p["removed_facts"])
    print(f"local: {p['dir']}: removed {p['removed']} file(s), {_size(p['removed_bytes'])}{facts}")


def cmd_cache(args) -> int:
    lib = _lib.library()
    if lib is None:
        print(f"causal-conv1d cache: {_lib.load_error()}", file=sys.stderr)
        return 1
    result = lib.cache_command(args.action)
    if args.json:
        print(json.dumps(result, indent=2))
    elif args.action == "path":
        _print_path(result)
    elif args.action == "stats":
        _print_stats(result)
    elif args.action in ("list", "verify"):
        _print_items(result)
    else:
        _print_clear(result)
    bad = sum(p.get("bad", 0) for _, p in _places(result))
    return 1 if args.action == "verify" and bad else 0


HELP = "see and manage the kernel cache (path, stats, list, verify, clear)"


def add_arguments(p) -> None:
    p.add_argument("action", choices=tuple(_lib.CACHE_COMMANDS))
    p.add_argument("--json", action="store_true", help="the same, as JSON")


run = cmd_cache
