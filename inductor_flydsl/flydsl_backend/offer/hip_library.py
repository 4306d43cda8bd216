"""Which HIP runtime torch loaded, and whether FlyDSL will use that one (issue 50).

FlyDSL's runtime (``libfly_jit_runtime.so``) and the plugin (``ctypes``) ask for the HIP
runtime by its ROCm 7 soname, ``libamdhip64.so.7`` (:data:`HIP_LIBRARY`). The dynamic
linker hands back a library already in the process whose file name *or* ``DT_SONAME``
is that name, so what torch loaded decides which runtime everything uses. Where torch's
HIP library comes from, by how torch was installed (read in PyTorch's wheel repair,
``.ci/manywheel/repair_wheel.py``, December 2026):

- **PyTorch's ROCm wheels up to ROCm 7.2** (``download.pytorch.org/whl/rocm*``): ROCm's
  libraries are copied into ``torch/lib`` under their bare names (``libamdhip64.so``),
  the NEEDED entries of torch's own libraries rewritten to them, their ``DT_SONAME``
  left as ROCm set it (``libamdhip64.so.7`` in a ROCm 7 wheel, ``.so.6`` in a ROCm 6
  one). ROCm 7 wheel: the soname matches, FlyDSL and the plugin get torch's copy, one
  runtime. ROCm 6 wheel: no match; asking for ``libamdhip64.so.7`` would load a second
  runtime from a system ROCm 7 (or fail): refused before anything is loaded.
- **TheRock-based ROCm wheels (ROCm 7.14 and later)**: nothing bundled; torch's RPATH
  points at the ``rocm`` pip packages (``_rocm_sdk_core/lib/libamdhip64.so.7``): one
  runtime, found by its file name.
- **ROCm's docker images and source builds**: torch links ``/opt/rocm/lib/libamdhip64.so.7``
  itself: one runtime.

So the check is made on the process itself, not on how torch was installed: the HIP
libraries mapped into it (``/proc/self/maps``) and the ``DT_SONAME`` of torch's
(:func:`hip_runtime_reasons`), before FlyDSL's runtime or the plugin loads anything.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

HIP_LIBRARY = "libamdhip64.so.7"  # the soname FlyDSL's runtime and the plugin bind
_HIP_STEM = "libamdhip64.so"
_PT_LOAD, _PT_DYNAMIC, _DT_NULL, _DT_STRTAB, _DT_SONAME = 1, 2, 0, 5, 14


@dataclass(frozen=True)
class MappedHip:
    """A HIP runtime file mapped into the process: its path as mapped, the file it is,
    and its ``DT_SONAME`` (None when it cannot be read)."""

    path: str
    real: str
    soname: str | None


def elf_soname(path: str) -> str | None:
    """The ``DT_SONAME`` of a 64-bit little-endian ELF shared library, or None (no
    soname, not such a file, unreadable). Reads the program headers only: the dynamic
    segment, and the string table through the load segment that holds it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    try:
        phoff, = struct.unpack_from("<Q", data, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
        loads, dynamic = [], None
        for i in range(phnum):
            kind, _, offset, vaddr, _, filesz, _, _ = struct.unpack_from(
                "<IIQQQQQQ", data, phoff + i * phentsize)
            if kind == _PT_LOAD:
                loads.append((vaddr, offset, filesz))
            elif kind == _PT_DYNAMIC:
                dynamic = (offset, filesz)
        if dynamic is None:
            return None
        strtab = soname = None
        for at in range(dynamic[0], dynamic[0] + dynamic[1], 16):
            tag, value = struct.unpack_from("<qQ", data, at)
            if tag == _DT_NULL:
                break
            if tag == _DT_STRTAB:
                strtab = value
            elif tag == _DT_SONAME:
                soname = value
        if strtab is None or soname is None:
            return None
        base = next((offset + strtab - vaddr for vaddr, offset, size in loads
                     if vaddr <= strtab < vaddr + size), None)
        if base is None:
            return None
        end = data.index(b"\0", base + soname)
        return data[base + soname:end].decode("utf-8", "replace")
    except (struct.error, ValueError):
        return None


def mapped_hip_libraries(maps: str) -> list[MappedHip]:
    """The HIP runtime files in ``maps`` (``/proc/<pid>/maps``' text), one per file."""
    seen: dict[str, MappedHip] = {}
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not os.path.basename(fields[5]).startswith(_HIP_STEM):
            continue
        path = fields[5].strip()
        real = os.path.realpath(path)
        if real not in seen:
            seen[real] = MappedHip(path, real, elf_soname(real))
    return list(seen.values())


def hip_runtime_reasons(maps: str) -> list[str]:
    """Why FlyDSL must not be loaded into a process with these mappings: more than one
    HIP runtime mapped already, or torch's one not serving :data:`HIP_LIBRARY` (asking
    for it would map a second runtime, whose streams and devices are not torch's)."""
    found = mapped_hip_libraries(maps)
    if len(found) > 1:
        return [f"{len(found)} HIP runtimes are mapped ({', '.join(m.path for m in found)}): "
                f"FlyDSL's runtime uses {HIP_LIBRARY}, torch's streams are not valid in "
                "another; make torch's ROCm runtime the one FlyDSL loads (one ROCm 7 "
                "installation)"]
    if found and found[0].soname is not None and found[0].soname != HIP_LIBRARY \
            and os.path.basename(found[0].path) != HIP_LIBRARY:
        only = found[0]
        return [f"torch's HIP runtime {only.path} is {only.soname}, not {HIP_LIBRARY}: "
                "FlyDSL would load a second HIP runtime beside it; install a torch built "
                "for ROCm 7 (its wheel bundles libamdhip64.so.7)"]
    return []


def process_maps() -> str:
    """This process's ``/proc/self/maps`` ("" where there is none)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return maps.read()
    except OSError:
        return ""
