"""Read an AMDGPU code object (the ELF a HIP runtime is handed by ``hipModuleLoadData``)
as the assembly listing :func:`.program.parse_program` reads, with LLVM's tools
(``llvm-objdump`` and ``llvm-readelf`` of an LLVM that knows the target, e.g. Debian's
llvm-22 for gfx950):

* the kernel's instructions (``llvm-objdump -d``), each branch's numeric offset replaced
  by a label placed at its target;
* its kernel descriptor as ``.amdhsa_*`` directives (``llvm-objdump -D`` of the
  ``<kernel>.kd`` symbol in ``.rodata``);
* its code-object metadata (``llvm-readelf --notes``: the same YAML the assembler
  writes in ``.amdgpu_metadata``), and ``.amdgcn_target``.

So the emulator runs the very bytes a GPU would, not a listing from the compiler's side.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from .errors import AsmError

LLVM_VERSIONS = (22, 21, 20)
_INSN_RE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]+):[0-9A-Fa-f ]+(?:<(\S+)\+0x([0-9a-f]+)>"
                      r"|<(\S+)>)?\s*$")
_BRANCH_RE = re.compile(r"^s_c?branch\w*\b")  # s_branch, s_cbranch_*: a label operand


def llvm_tool(name: str) -> str:
    """``llvm-<name>-NN`` (the newest of :data:`LLVM_VERSIONS` on PATH) or ``llvm-<name>``."""
    for version in LLVM_VERSIONS:
        found = shutil.which(f"llvm-{name}-{version}")
        if found:
            return found
    found = shutil.which(f"llvm-{name}")
    if found:
        return found
    raise AsmError(f"llvm-{name} not found (install Debian's llvm-22)")


def _run(args: list[str]) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise AsmError(f"{Path(args[0]).name} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def metadata(path: Path) -> dict[str, Any]:
    """The code object's AMDGPU metadata (``amdhsa.kernels``, ``amdhsa.target``, ...)."""
    notes = _run([llvm_tool("readelf"), "--notes", str(path)])
    start = notes.find("---")
    end = notes.find("\n...", start)
    if start < 0 or end < 0:
        raise AsmError("the code object has no AMDGPU metadata note")
    return yaml.safe_load(notes[start:end])


def kernel_args(image: bytes) -> dict[str, tuple[list[tuple[int, int]], int]]:
    """Per kernel name: its arguments' ``(offset, size)`` and the kernarg segment size."""
    with tempfile.TemporaryDirectory(prefix="code-object-") as tmp:
        path = Path(tmp) / "kernel.hsaco"
        path.write_bytes(image)
        meta = metadata(path)
    out = {}
    for kernel in meta.get("amdhsa.kernels") or []:
        args = [(int(a[".offset"]), int(a[".size"])) for a in kernel.get(".args", [])]
        out[str(kernel[".name"])] = (args, int(kernel[".kernarg_segment_size"]))
    return out


def _arch(meta: dict[str, Any]) -> str:
    target = str(meta.get("amdhsa.target", ""))
    match = re.search(r"(gfx\w+)", target)
    if match is None:
        raise AsmError(f"the code object names no gfx target ({target!r})")
    return match.group(1).split(":")[0]


def _instructions(disassembly: str, kernel: str) -> list[str]:
    """The kernel's instruction lines, branch targets as labels ``.Lat_<offset>``."""
    rows: list[tuple[int, str]] = []
    targets: set[int] = set()
    inside = False
    for line in disassembly.splitlines():
        if line.endswith(">:") and "<" in line:
            inside = line.rstrip(":").split("<", 1)[1].rstrip(">") == kernel
            continue
        if not inside:
            continue
        match = _INSN_RE.match(line)
        if match is None:
            continue
        text, address = match.group(1), int(match.group(2), 16)
        if _BRANCH_RE.match(text):
            symbol, offset = match.group(3) or match.group(5), match.group(4)
            if symbol != kernel:
                raise AsmError(f"branch out of {kernel}: {line.strip()}")
            target = int(offset, 16) if offset else 0
            targets.add(target)
            text = f"{text.split()[0]} .Lat_{target}"
        rows.append((address, text))
    if not rows:
        raise AsmError(f"no instructions of {kernel} in the code object")
    base = rows[0][0]
    lines = []
    for address, text in rows:
        if address - base in targets:
            lines.append(f".Lat_{address - base}:")
        lines.append(f"\t{text}")
    return lines


def _descriptor(rodata: str, kernel: str) -> list[str]:
    match = re.search(rf"\.amdhsa_kernel {re.escape(kernel)}\n(.*?)\.end_amdhsa_kernel",
                      rodata, re.S)
    if match is None:
        raise AsmError(f"no kernel descriptor {kernel}.kd in the code object")
    return [f".amdhsa_kernel {kernel}", *match.group(1).strip().splitlines(),
            ".end_amdhsa_kernel"]


def assembly(image: bytes, kernel: str | None = None) -> str:
    """The listing of ``kernel`` (default: the first) in the code object ``image``."""
    with tempfile.TemporaryDirectory(prefix="code-object-") as tmp:
        path = Path(tmp) / "kernel.hsaco"
        path.write_bytes(image)
        meta = metadata(path)
        kernels = meta.get("amdhsa.kernels") or []
        if not kernels:
            raise AsmError("the code object's metadata lists no kernel")
        chosen = next((k for k in kernels if kernel in (None, k.get(".name"))), None)
        if chosen is None:
            raise AsmError(f"no kernel {kernel!r} in the code object")
        name, arch = str(chosen[".name"]), _arch(meta)
        objdump = llvm_tool("objdump")
        text = _run([objdump, "-d", f"--mcpu={arch}", str(path)])
        rodata = _run([objdump, "-D", f"--mcpu={arch}", "-j", ".rodata", str(path)])
    doc = yaml.safe_dump({"amdhsa.kernels": [chosen], "amdhsa.version": [1, 2]},
                         sort_keys=False)
    return "\n".join([
        f'\t.amdgcn_target "amdgcn-amd-amdhsa--{arch}"', "\t.text", f"{name}:",
        *_instructions(text, name), ".Lfunc_end0:", "\t.rodata",
        *_descriptor(rodata, name), "\t.amdgpu_metadata", doc.rstrip(),
        "\t.end_amdgpu_metadata", ""])
