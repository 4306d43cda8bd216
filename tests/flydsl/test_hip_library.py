"""One HIP runtime in practice (issue 50): FlyDSL and the plugin ask for
``libamdhip64.so.7``, and the dynamic linker hands back the library torch already loaded
when its file name or ``DT_SONAME`` is that name. Checked with real ``dlopen`` calls in
child processes, on the stand-in HIP library (tests/fake_hip) laid out as each kind of
torch install lays out its HIP runtime (``hip_library.py``): a ROCm 7 wheel's bundled
``torch/lib/libamdhip64.so`` (soname ``libamdhip64.so.7``), a ROCm 6 wheel's (soname
``.so.6``), and a system ROCm 7 (``/opt/rocm/lib/libamdhip64.so.7``) on the loader path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.offer.hip_library import (
    HIP_LIBRARY,
    elf_soname,
    hip_runtime_reasons,
    mapped_hip_libraries,
)
from tests.fake_hip.harness import SOURCE, VERSION_SCRIPT, build_library

CHILD = """
import ctypes, json, sys
from inductor_flydsl.flydsl_backend.offer.hip_library import (
    HIP_LIBRARY, hip_runtime_reasons, mapped_hip_libraries, process_maps)
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # what torch's libtorch_hip loads
before = hip_runtime_reasons(process_maps())
ctypes.CDLL(HIP_LIBRARY)  # what FlyDSL's runtime and the plugin ask for
print(json.dumps({"before": before, "after": hip_runtime_reasons(process_maps()),
                  "mapped": [m.path for m in mapped_hip_libraries(process_maps())]}))
"""


def _library(tmp: Path, where: str, soname: str) -> Path:
    """The stand-in HIP library at ``tmp/where`` with DT_SONAME ``soname``."""
    target = tmp / where
    target.parent.mkdir(parents=True, exist_ok=True)
    if soname == HIP_LIBRARY:
        shutil.copy(build_library(tmp / "built"), target)
    else:
        subprocess.run([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC",
                        f"-Wl,-soname,{soname}", f"-Wl,--version-script={VERSION_SCRIPT}",
                        "-o", str(target), str(SOURCE), "-lpthread"], check=True)
    return target


def _child(torch_hip: Path, system_rocm: Path) -> dict:
    env = {**os.environ, "LD_LIBRARY_PATH": str(system_rocm)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(torch_hip)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("hip-layouts")
    return {
        "rocm7_wheel": _library(tmp, "wheel7/torch/lib/libamdhip64.so", HIP_LIBRARY),
        "rocm6_wheel": _library(tmp, "wheel6/torch/lib/libamdhip64.so", "libamdhip64.so.6"),
        "system": _library(tmp, "opt/rocm/lib/libamdhip64.so.7", HIP_LIBRARY),
    }


def test_the_soname_is_read_from_the_elf_file(layouts: dict[str, Path]) -> None:
    assert elf_soname(str(layouts["rocm7_wheel"])) == HIP_LIBRARY
    assert elf_soname(str(layouts["rocm6_wheel"])) == "libamdhip64.so.6"
    assert elf_soname(sys.executable) is None  # an executable: no soname
    assert elf_soname(__file__) is None  # not ELF


def test_a_rocm7_wheels_bundled_runtime_is_the_one_flydsl_gets(
        layouts: dict[str, Path]) -> None:
    """torch/lib/libamdhip64.so with soname .so.7: asking for libamdhip64.so.7 returns it,
    although a system ROCm 7 is on the loader path: one runtime."""
    seen = _child(layouts["rocm7_wheel"], layouts["system"].parent)
    assert seen == {"before": [], "after": [], "mapped": [str(layouts["rocm7_wheel"])]}


def test_a_system_rocm_torch_maps_one_runtime(layouts: dict[str, Path]) -> None:
    seen = _child(layouts["system"], layouts["system"].parent)
    assert seen == {"before": [], "after": [], "mapped": [str(layouts["system"])]}


def test_a_rocm6_wheel_is_refused_before_a_second_runtime_is_loaded(
        layouts: dict[str, Path]) -> None:
    """A ROCm 6 wheel's runtime does not answer to libamdhip64.so.7: the check refuses
    (eligibility asks it before any dlopen); what the dlopen would have done is shown by
    doing it: two runtimes mapped."""
    seen = _child(layouts["rocm6_wheel"], layouts["system"].parent)
    (before,) = seen["before"]
    assert "is libamdhip64.so.6, not libamdhip64.so.7" in before
    assert len(seen["mapped"]) == 2 and "2 HIP runtimes are mapped" in seen["after"][0]


def test_mappings_of_one_file_under_two_names_are_one_runtime(
        layouts: dict[str, Path], tmp_path: Path) -> None:
    alias = tmp_path / "libamdhip64.so.7"
    alias.symlink_to(layouts["system"])
    maps = "".join(f"7f00-7f01 r-xp 00000000 08:01 42 {p}\n"
                   for p in (layouts["system"], alias))
    assert [m.real for m in mapped_hip_libraries(maps)] == [str(layouts["system"])]
    assert hip_runtime_reasons(maps) == []
