"""`doctor --scan-extensions`: torch C++ extensions that will fail with "undefined symbol".

For every shared object in the environment that links libtorch or libc10 (torchvision's _C,
torchaudio's, flash-attn's, a user's build), reads its ELF file without importing it, lists the
torch symbols it imports that the running libtorch does not export, and names the fix. This is
the manual `nm -D ext.so | grep ' U '` against `nm -D libtorch*.so`, automated.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from pathlib import Path
from typing import Optional

from . import _doctor_checks, _elf, _torch_lib

_SKIP_DIRS = {"__pycache__", ".git", "node_modules"}


def default_roots() -> list:
    """site-packages (system and user) and every directory on sys.path, without duplicates."""
    roots = [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")]
    roots += list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]
    roots += [p for p in sys.path if p]
    out, seen = [], set()
    for r in roots:
        if r and os.path.isdir(r):
            real = os.path.realpath(r)
            if real not in seen:
                seen.add(real)
                out.append(real)
    return out


def _shared_objects(roots: list, skip: str) -> list:
    found, seen = [], set()
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in _SKIP_DIRS and os.path.join(d, x) != skip]
            for f in files:
                if f.endswith(".so") or ".so." in f:
                    real = os.path.realpath(os.path.join(d, f))
                    if real not in seen and not real.startswith(skip + os.sep):
                        seen.add(real)
                        found.append(real)
    return sorted(found)


def _owners(paths: list) -> dict:
    """file -> (distribution name, version) from the installed distributions' RECORD files."""
    from importlib import metadata

    wanted, out = set(paths), {}
    for dist in metadata.distributions():
        for f in dist.files or []:
            p = os.path.realpath(str(dist.locate_file(f)))
            if p in wanted:
                out[p] = (dist.metadata["Name"], dist.version, list(dist.requires or []))
    return out


def _fix(path: str, owner: Optional[tuple], torch_version: str) -> str:
    mm = _doctor_checks.major_minor(torch_version)
    torch_mm = f"{mm[0]}.{mm[1]}" if mm else torch_version
    if owner is None:
        return f"rebuild {os.path.basename(path)} against torch {torch_mm} (it belongs to no installed package)"
    name, version, requires = owner
    if name.lower() in ("torchvision", "torchaudio"):
        c = _doctor_checks.companion(name.lower(), version, requires, torch_version)
        if c["fix"]:
            return c["message"].split(" (")[0] + "; " + c["fix"]
    return (f"{name} {version} was built for another torch; reinstall it for torch {torch_mm} "
            f"(pip install --force-reinstall --no-cache-dir {name}), or build it from source against this torch")


def scan(roots: Optional[list] = None) -> list:
    """[{path, package, version, links, missing, fix}] for every extension that links torch;
    `missing` lists the imported torch symbols the running libtorch lacks (empty: it fits)."""
    import torch

    torch_dir = str(Path(torch.__file__).resolve().parent)
    lib_dir = os.path.join(torch_dir, "lib")
    libs = []
    for n in sorted(os.listdir(lib_dir)):
        if n.endswith(".so") and n.startswith(("libtorch", "libc10")):
            try:
                libs.append(_elf.ElfFile(os.path.join(lib_dir, n)))
            except (OSError, _elf.ElfError):
                pass
    results = []
    try:
        for path in _shared_objects(roots if roots is not None else default_roots(), torch_dir):
            needed = _elf.read_needed(path)
            links = [n for n in needed or [] if n.startswith(("libtorch", "libc10"))]
            if not links:
                continue
            try:
                with _elf.ElfFile(path) as f:
                    wanted = [s for s in f.undefined() if _torch_lib.is_torch_symbol(s)]
            except (OSError, _elf.ElfError):
                continue
            missing = [s for s in wanted if not any(lib.exports(s) for lib in libs)]
            results.append({"path": path, "package": None, "version": None, "links": links, "missing": missing,
                            "fix": None})
    finally:
        for lib in libs:
            lib.close()
    broken = [r for r in results if r["missing"]]
    owners = _owners([r["path"] for r in broken]) if broken else {}
    for r in broken:
        owner = owners.get(r["path"])
        if owner is not None:
            r["package"], r["version"] = owner[0], owner[1]
        r["fix"] = _fix(r["path"], owner, str(torch.__version__))
    return results


def checks(extensions: list) -> list:
    out = []
    for r in extensions:
        if r["missing"]:
            what = f"{r['package']} {r['version']} ({r['path']})" if r["package"] else r["path"]
            out.append(_doctor_checks.check(
                "torch extension", "fail",
                f"{what} imports {len(r['missing'])} symbol(s) the running libtorch does not export "
                f"(e.g. {r['missing'][0]}); importing it fails with 'undefined symbol'", r["fix"]))
    if not out:
        out.append(_doctor_checks.check("torch extensions", "ok",
                                        f"all {len(extensions)} torch extension(s) fit the running libtorch"))
    return out
