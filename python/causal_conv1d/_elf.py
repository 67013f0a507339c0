"""A reader of the dynamic-linking facts of ELF shared objects, without loading them: the
libraries a file needs, the symbols it imports, and whether a library exports a symbol.

This is `nm -D` / `readelf -d` in Python, for two users: the cc1d_torch handshake (every torch
symbol the op library imports must be exported by the running libtorch before it is dlopen()ed)
and `doctor --scan-extensions`. 64-bit little-endian ELF only (x86_64, aarch64); anything else
raises ElfError. Lookups use the file's GNU hash table, so asking a 500 MB libtorch_cpu.so
about a few symbols reads a few pages.
"""

from __future__ import annotations

import mmap
import struct
from typing import Iterator, Optional

SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_HASH = 6, 11, 0x6FFFFFF6
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
STB_GLOBAL, STB_WEAK = 1, 2
STV_DEFAULT, STV_PROTECTED = 0, 3


class ElfError(ValueError):
    """Not a 64-bit little-endian ELF file, or a truncated one."""


def gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


class ElfFile:
    """One shared object, memory-mapped. Use as a context manager or call close()."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            try:
                self._m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                raise ElfError(f"{path}: empty file") from None
        try:
            self._parse()
        except (struct.error, IndexError):
            self.close()
            raise ElfError(f"{path}: truncated or malformed ELF file") from None
        except ElfError:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if getattr(self, "_m", None) is not None:
            self._m.close()
            self._m = None

    def _parse(self) -> None:
        m = self._m
        if m[:4] != b"\x7fELF":
            raise ElfError(f"{self.path}: not an ELF file")
        if m[4] != 2 or m[5] != 1:
            raise ElfError(f"{self.path}: not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", m, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", m, 0x3A)
        self._sections = [struct.unpack_from("<IIQQQQIIQQ", m, shoff + i * shentsize) for i in range(shnum)]
        self._dynsym = self._dynamic = self._gnu_hash = None
        for sh in self._sections:
            kind = sh[1]
            if kind == SHT_DYNSYM:
                self._dynsym = sh
            elif kind == SHT_DYNAMIC:
                self._dynamic = sh
            elif kind == SHT_GNU_HASH:
                self._gnu_hash = sh
        if self._dynsym is None:
            raise ElfError(f"{self.path}: no dynamic symbol table (not a shared object?)")
        link = self._sections[self._dynsym[6]]
        self._strtab = (link[4], link[5])  # offset, size

    def _string(self, offset: int) -> bytes:
        start = self._strtab[0] + offset
        end = self._m.find(b"\0", start, self._strtab[0] + self._strtab[1])
        return self._m[start:end if end >= 0 else start]

    def _symbols(self) -> Iterator[tuple]:
        """(name, info, other, shndx) of every dynamic symbol."""
        off, size, entsize = self._dynsym[4], self._dynsym[5], self._dynsym[9] or 24
        for i in range(1, size // entsize):
            name, info, other, shndx = struct.unpack_from("<IBBH", self._m, off + i * entsize)
            yield name, info, other, shndx

    def dynamic(self, tag: int) -> list:
        """The string values of every DT_<tag> entry (DT_NEEDED, DT_SONAME, DT_RUNPATH...)."""
        if self._dynamic is None:
            return []
        off, size = self._dynamic[4], self._dynamic[5]
        out = []
        for i in range(size // 16):
            t, v = struct.unpack_from("<qQ", self._m, off + 16 * i)
            if t == 0:
                break
            if t == tag:
                out.append(self._string(v).decode("utf-8", "replace"))
        return out

    def needed(self) -> list:
        return self.dynamic(DT_NEEDED)

    def undefined(self) -> list:
        """Names of the symbols the file imports strongly (weak imports may stay unresolved)."""
        return [self._string(n).decode("utf-8", "replace") for n, info, _, shndx in self._symbols()
                if shndx == 0 and n and info >> 4 == STB_GLOBAL]

    def _defined_index(self, i: int) -> bool:
        off, entsize = self._dynsym[4], self._dynsym[9] or 24
        _, info, other, shndx = struct.unpack_from("<IBBH", self._m, off + i * entsize)
        return shndx != 0 and info >> 4 in (STB_GLOBAL, STB_WEAK) and other & 3 in (STV_DEFAULT, STV_PROTECTED)

    def exports(self, name: str) -> bool:
        """Whether the file defines and exports `name` (what the dynamic linker would bind)."""
        key = name.encode()
        if self._gnu_hash is None:
            return key in self._export_set()
        m, off = self._m, self._gnu_hash[4]
        nbuckets, symoffset, bloom_size, _ = struct.unpack_from("<4I", m, off)
        if nbuckets == 0:
            return False
        buckets = off + 16 + 8 * bloom_size
        chains = buckets + 4 * nbuckets
        h = gnu_hash(key)
        i, = struct.unpack_from("<I", m, buckets + 4 * (h % nbuckets))
        if i == 0:
            return False
        sym_off, entsize = self._dynsym[4], self._dynsym[9] or 24
        while True:
            h2, = struct.unpack_from("<I", m, chains + 4 * (i - symoffset))
            if (h | 1) == (h2 | 1):
                n, = struct.unpack_from("<I", m, sym_off + i * entsize)
                if self._string(n) == key and self._defined_index(i):
                    return True
            if h2 & 1:
                return False
            i += 1

    def _export_set(self) -> set:
        if not hasattr(self, "_exports"):
            self._exports = {self._string(n) for i, (n, info, other, shndx) in enumerate(self._symbols(), 1)
                             if n and self._defined_index(i)}
        return self._exports


def read_needed(path: str) -> Optional[list]:
    """DT_NEEDED of `path`, or None when it is not a readable 64-bit ELF shared object."""
    try:
        with ElfFile(path) as f:
            return f.needed()
    except (OSError, ElfError):
        return None
