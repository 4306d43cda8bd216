"""Locate an AMDGPU-capable ld.lld and provide a ROCM_PATH for FlyDSL cross-compiles.

FlyDSL links the final code object with ``$ROCM_PATH/llvm/bin/ld.lld``. On a host
without ROCm we build a stand-in directory whose ``llvm/bin/ld.lld`` points at any lld
that knows the AMDGPU target: Debian/Ubuntu ``lld-NN``, an ``ld.lld`` on PATH, or the
PyPI ``ziglang`` package (``zig ld.lld``).
"""

import glob
import importlib.util
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from ... import settings

FIX_HINT = (
    "install an AMDGPU-capable lld, e.g. `apt-get install lld-19` (Debian/Ubuntu) "
    "or `pip install ziglang`"
)


class ToolchainError(RuntimeError):
    """No linker usable for AMDGPU code objects was found."""




def cache_root() -> Path:
    """Directory for this package's caches (``INDUCTOR_FLYDSL_CACHE_DIR`` overrides)."""
    return settings.CACHE_DIR.value() or Path.home() / ".cache" / "inductor_flydsl"


def _supports_amdgpu(ld_lld: list[str]) -> bool:
    """lld links AMDGPU when built with that target; `-m elf64_amdgpu` probes it."""
    try:
        proc = subprocess.run(
            [*ld_lld, "-m", "elf64_amdgpu", "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "LLD" in proc.stdout


def _debian_candidates() -> list[str]:
    def version(path: str) -> int:
        digits = path.split("llvm-")[-1].split("/")[0]
        return int(digits) if digits.isdigit() else 0

    return sorted(glob.glob("/usr/lib/llvm-*/bin/ld.lld"), key=version, reverse=True)


def _zig_binary() -> str | None:
    spec = importlib.util.find_spec("ziglang")
    if spec is None or spec.origin is None:
        return None
    zig = Path(spec.origin).parent / "zig"
    return str(zig) if zig.is_file() else None


@lru_cache(maxsize=1)
def find_ld_lld() -> tuple[str, ...] | None:
    """Command (argv prefix) of an AMDGPU-capable ld.lld, or None."""
    candidates: list[list[str]] = []
    rocm = os.environ.get("ROCM_PATH", "/opt/rocm")
    candidates.append([str(Path(rocm) / "llvm" / "bin" / "ld.lld")])
    candidates += [[path] for path in _debian_candidates()]
    on_path = shutil.which("ld.lld")
    if on_path:
        candidates.append([on_path])
    zig = _zig_binary()
    if zig:
        candidates.append([zig, "ld.lld"])
    for command in candidates:
        if (len(command) > 1 or Path(command[0]).is_file()) and _supports_amdgpu(command):
            return tuple(command)
    return None


def _has_real_rocm(path: Path) -> bool:
    return (path / "llvm" / "bin" / "ld.lld").is_file() and (path / "lib").is_dir()


def _write_stub(stub: Path, command: tuple[str, ...]) -> None:
    """Create ``stub/llvm/bin/ld.lld`` atomically (safe with concurrent processes)."""
    bindir = stub / "llvm" / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    target = bindir / "ld.lld"
    tmp = bindir / f".ld.lld.{os.getpid()}"
    if len(command) == 1:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(command[0])
    else:
        quoted = " ".join(f"'{part}'" for part in command)
        tmp.write_text(f'#!/bin/sh\nexec {quoted} "$@"\n')
        tmp.chmod(0o755)
    os.replace(tmp, target)


def _stub_matches(stub: Path, command: tuple[str, ...]) -> bool:
    target = stub / "llvm" / "bin" / "ld.lld"
    if len(command) == 1:
        return target.is_symlink() and os.readlink(target) == command[0]
    return target.is_file() and all(part in target.read_text() for part in command)


def rocm_path_for_compile() -> str:
    """A ROCM_PATH under which FlyDSL finds a working ``llvm/bin/ld.lld``.

    Uses ``$ROCM_PATH`` or ``/opt/rocm`` when it is a real ROCm install, else a stand-in
    directory under :func:`cache_root`. Raises :class:`ToolchainError` naming the fix.
    """
    for candidate in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if candidate and _has_real_rocm(Path(candidate)):
            return candidate
    command = find_ld_lld()
    if command is None:
        raise ToolchainError(f"no AMDGPU-capable ld.lld found; {FIX_HINT}")
    stub = cache_root() / "rocm_stub"
    if not _stub_matches(stub, command):
        _write_stub(stub, command)
    return str(stub)
