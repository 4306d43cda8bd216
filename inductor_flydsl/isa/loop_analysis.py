"""Static analysis of a compiled kernel's main K loop (final AMDGPU ISA, no GPU needed).

:func:`find_main_loop` takes the backward-branch loop of the assembly (a label whose
range ends in a branch back to it) that holds the most MFMA instructions, and returns
its instructions without the back branch. :func:`instruction_mix` counts what one trip
issues (MFMAs by mnemonic, LDS reads and writes with their byte widths, global/buffer
loads and the direct-to-LDS ones, VALU, SALU, waits, barriers).

:func:`mca_estimate` runs ``llvm-mca-22 -mtriple=amdgcn -mcpu=ARCH -iterations=100`` on
the loop body: cycles per trip, divided by the MFMAs of the trip times the model's
cycles per MFMA, gives the *ratio* (1.0 = MFMA-bound, higher = instruction overhead).
The cycles per MFMA are measured, not assumed: llvm-mca runs a block of the same MFMA
alone with independent destinations. It is a single-wave, latency-blind model; it shows
instruction overhead, not memory latency or the overlap of waves. Without
``llvm-mca-22`` (Debian's ``llvm-22``), or when it fails, the estimate is absent with a
one-line reason; nothing raises. llvm-mca-22 hangs on some loops with 64-bit MADs: after
:data:`MCA_TIMEOUT_S` those are modelled as two VALU ops and the estimate counts them
(``mad64_substituted``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..emulator.program import strip_comment

LLVM_MCA = "llvm-mca-22"
MCA_ITERATIONS = 100
MCA_TIMEOUT_S = 20.0  # a loop takes well under a second; longer means llvm-mca hung
INSTALL_HINT = "install Debian's llvm-22 (scripts/install.sh does)"
NO_LOOP = "no main loop: no backward-branch loop with MFMA instructions in the ISA"

_LABEL_RE = re.compile(r"^([.\w$]+):")
_BRANCH_RE = re.compile(r"^(s_cbranch_\w+|s_branch)\s+([.\w$]+)")
_MFMA_PREFIXES = ("v_mfma", "v_smfmac")
_REG_RANGE_RE = re.compile(r"^([va])\[(\d+):(\d+)\]$")
_WIDTH_RE = re.compile(r"_[bui](8|16|32|64|96|128)")
_SOPP = ("s_nop", "s_setprio", "s_sleep", "s_sethalt", "s_trap", "s_endpgm", "s_icache_inv",
         "s_cbranch", "s_branch", "s_setpc", "s_swappc", "s_getpc", "s_sendmsg", "s_ttracedata")
_SMEM = ("s_load", "s_buffer_load", "s_store", "s_buffer_store", "s_dcache", "s_scratch",
         "s_memtime", "s_memrealtime", "s_atc_probe")
_VMEM_LOADS = ("global_load", "buffer_load", "flat_load", "scratch_load")
_VMEM_STORES = ("global_store", "buffer_store", "flat_store", "scratch_store", "global_atomic",
                "buffer_atomic", "flat_atomic")


@dataclass(frozen=True)
class MainLoop:
    """The main loop of an ISA: its label and its instructions (back branch dropped)."""

    label: str
    instructions: tuple[str, ...]

    @property
    def mfma_count(self) -> int:
        return sum(1 for line in self.instructions if _is_mfma(mnemonic(line)))


@dataclass
class LoopAnalysis:
    """JSON-able result; ``mca`` is None with ``mca_unavailable`` saying why."""

    main_loop: bool
    reason: str | None = None
    label: str | None = None
    instructions: int = 0
    mix: dict[str, Any] = field(default_factory=dict)
    mca: dict[str, Any] | None = None
    mca_unavailable: str | None = None
    # the kernel's instructions outside the main loop (run once per workgroup)
    outside_instructions: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ---------------------------------------------------------------------------
# Finding the loop
# ---------------------------------------------------------------------------


def mnemonic(line: str) -> str:
    return line.split(None, 1)[0] if line else ""


def _is_mfma(name: str) -> bool:
    return name.startswith(_MFMA_PREFIXES)


def _statements(text: str) -> list[str]:
    """Labels and instructions of the listing, in order (directives and comments dropped,
    the kernel's metadata sections never reach an instruction)."""
    out = []
    in_metadata = False
    for raw in text.splitlines():
        line = strip_comment(raw)
        if line.startswith((".amdgpu_metadata", ".end_amdgpu_metadata")):
            in_metadata = line.startswith(".amdgpu_metadata")
            continue
        if not line or in_metadata:
            continue
        label = _LABEL_RE.match(line)
        if label:
            out.append(label.group(0))
            rest = line[label.end():].strip()
            line = rest
            if not line:
                continue
        if line.startswith("."):
            continue
        out.append(line)
    return out


def find_main_loop(text: str) -> MainLoop | None:
    """The backward-branch loop holding the most MFMAs, or None when there is none.

    A loop is a label and the statements up to a later branch to that label. The body
    keeps every instruction in that range except the back branch itself (inner labels
    are dropped; inner branches are kept and counted as ``other``).
    """
    statements = _statements(text)
    labels: dict[str, int] = {}
    best: MainLoop | None = None
    best_mfma = 0
    for index, line in enumerate(statements):
        if line.endswith(":") and _LABEL_RE.match(line):
            labels[line[:-1]] = index
            continue
        branch = _BRANCH_RE.match(line)
        if branch is None or branch.group(2) not in labels:
            continue  # a forward branch (or to an unknown label)
        body = tuple(s for s in statements[labels[branch.group(2)] + 1:index]
                     if not s.endswith(":"))
        loop = MainLoop(branch.group(2), body)
        if loop.mfma_count > best_mfma:
            best, best_mfma = loop, loop.mfma_count
    return best


# ---------------------------------------------------------------------------
# Instruction mix
# ---------------------------------------------------------------------------


def lds_access_bytes(name: str) -> int | None:
    """Bytes one lane moves with a ``ds_read*``/``ds_write*`` (``ds_write2*`` counts both)."""
    width = _WIDTH_RE.search(name)
    if width is None:
        return None
    size = int(width.group(1)) // 8
    return 2 * size if re.match(r"ds_(read|write|load|store)2", name) else size


def _category(name: str, line: str) -> str:
    if _is_mfma(name):
        return "mfma"
    if name.startswith(("ds_read", "ds_load")):
        return "ds_read"
    if name.startswith(("ds_write", "ds_store")):
        return "ds_write"
    if name.startswith(_VMEM_LOADS):
        return "vmem_load"
    if name.startswith(_VMEM_STORES):
        return "vmem_store"
    if name.startswith("s_waitcnt"):
        return "s_waitcnt"
    if name == "s_barrier":
        return "s_barrier"
    if name.startswith("v_"):
        return "valu"
    if name.startswith("s_") and not name.startswith(_SOPP + _SMEM):
        return "salu"
    return "other"


def _is_direct_to_lds(name: str, line: str) -> bool:
    operands = line.split(None, 1)[1] if " " in line else ""
    return "_lds_" in name or bool(re.search(r"(^|[\s,])lds($|[\s,])", operands))


def instruction_mix(instructions: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """Counts per category for one loop trip.

    ``ds_read``/``ds_write`` map mnemonic to count; ``ds_write_bytes`` maps the byte width
    of one lane's write to a count, and ``ds_write_min_bytes`` is the narrowest (None
    without LDS writes). ``vmem_load_lds`` counts the direct-to-LDS loads among
    ``vmem_load``.
    """
    mfma: Counter[str] = Counter()
    ds_read: Counter[str] = Counter()
    ds_write: Counter[str] = Counter()
    widths: Counter[int] = Counter()
    counts: Counter[str] = Counter()
    direct = 0
    for line in instructions:
        name = mnemonic(line)
        kind = _category(name, line)
        counts[kind] += 1
        if kind == "mfma":
            mfma[name] += 1
        elif kind == "ds_read":
            ds_read[name] += 1
        elif kind == "ds_write":
            ds_write[name] += 1
            size = lds_access_bytes(name)
            if size is not None:
                widths[size] += 1
        elif kind == "vmem_load" and _is_direct_to_lds(name, line):
            direct += 1
    return {
        "total": len(instructions),
        "mfma": dict(sorted(mfma.items())),
        "mfma_total": counts["mfma"],
        "ds_read": dict(sorted(ds_read.items())),
        "ds_read_total": counts["ds_read"],
        "ds_write": dict(sorted(ds_write.items())),
        "ds_write_total": counts["ds_write"],
        "ds_write_bytes": {str(k): v for k, v in sorted(widths.items())},
        "ds_write_min_bytes": min(widths) if widths else None,
        "vmem_load": counts["vmem_load"],
        "vmem_load_lds": direct,
        "vmem_store": counts["vmem_store"],
        "valu": counts["valu"],
        "salu": counts["salu"],
        "s_waitcnt": counts["s_waitcnt"],
        "s_barrier": counts["s_barrier"],
        "other": counts["other"],
    }


# ---------------------------------------------------------------------------
# llvm-mca
# ---------------------------------------------------------------------------


class McaUnavailable(Exception):
    """llvm-mca is missing or failed; the message is the one-line reason."""


class McaHang(McaUnavailable):
    """llvm-mca did not finish (LLVM 22 hangs on some gfx950 loops, see _MAD64_RE)."""


def find_llvm_mca() -> str | None:
    return shutil.which(LLVM_MCA)


def _one_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
    return first[:limit]


def run_mca(body: str, arch: str, *, iterations: int = MCA_ITERATIONS) -> float:
    """Total cycles llvm-mca gives ``body`` (assembly text) over ``iterations`` trips."""
    tool = find_llvm_mca()
    if tool is None:
        raise McaUnavailable(f"{LLVM_MCA} not on PATH; {INSTALL_HINT}")
    try:
        proc = subprocess.run(
            [tool, "-mtriple=amdgcn", f"-mcpu={arch}", f"-iterations={iterations}"],
            input=body, capture_output=True, text=True, timeout=MCA_TIMEOUT_S, check=False,
            env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:
        raise McaHang(f"{LLVM_MCA} -mcpu={arch} did not finish in {MCA_TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise McaUnavailable(f"{LLVM_MCA} failed: {exc}") from exc
    match = re.search(r"^Total Cycles:\s+(\d+)", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or match is None:
        reason = _one_line(proc.stderr or proc.stdout) or f"exit code {proc.returncode}"
        raise McaUnavailable(f"{LLVM_MCA} -mcpu={arch} failed: {reason}")
    return float(match.group(1))


def _mca_body(instructions: tuple[str, ...] | list[str]) -> str:
    """What llvm-mca is fed: the loop's instructions without branches (whose targets are
    not in the fed text)."""
    return "\n".join(line for line in instructions if not _BRANCH_RE.match(line)) + "\n"


# llvm-mca-22 never finishes (an endless in-order stall) on some gfx950 loops with the
# two-uop (VALU + SALU) v_mad_u64_u32/v_mad_i64_i32 next to ds_reads and MFMAs; found on
# the pre-rework template's TN/TT loops. When it hangs, each such MAD is modelled as
# two one-cycle VALU ops with the same vector registers (a 32-bit MAD writing the low
# half, a move writing the high half); the estimate then says how many were substituted.
_MAD64_RE = re.compile(r"^v_mad_[ui]64_[ui]32\s+v\[(\d+):(\d+)\],\s*[^,]+,\s*([^,]+),\s*([^,]+),"
                       r"\s*([^,\s]+)\s*$")
_PAIR_RE = re.compile(r"^([vs])\[(\d+):(\d+)\]$")


def _mad64_surrogate(line: str) -> str | None:
    match = _MAD64_RE.match(line)
    if match is None:
        return None
    lo, hi, a, b, c = match.groups()
    pair = _PAIR_RE.match(c)
    c_lo, c_hi = (f"{pair[1]}{pair[2]}", f"{pair[1]}{pair[3]}") if pair else (c, "0")
    return f"v_mad_u32_u24 v{lo}, {a}, {b}, {c_lo}\nv_mov_b32 v{hi}, {c_hi}"


def _without_mad64(body: str) -> tuple[str, int]:
    lines, count = [], 0
    for line in body.splitlines():
        surrogate = _mad64_surrogate(line)
        count += surrogate is not None
        lines.append(surrogate or line)
    return "\n".join(lines) + "\n", count


def _loop_cycles(body: str, arch: str) -> tuple[float, int]:
    """Total cycles of ``body``, and how many 64-bit MADs had to be substituted (0 unless
    llvm-mca hung on the body as it is)."""
    try:
        return run_mca(body, arch), 0
    except McaHang as hang:
        surrogate, count = _without_mad64(body)
        if count == 0:
            raise
        try:
            return run_mca(surrogate, arch), count
        except McaHang:
            raise hang from None


def _independent_block(line: str, copies: int) -> str:
    """``copies`` of one MFMA with disjoint destination/accumulator registers (each its
    own chain) and sources that none of them writes."""
    name, _, operands = line.partition(" ")
    parts = [p.strip() for p in operands.split(",")]
    if len(parts) < 4:
        raise McaUnavailable(f"cannot read MFMA operands of {line!r}")
    dst = _REG_RANGE_RE.match(parts[0])
    if dst is None:
        raise McaUnavailable(f"cannot read MFMA destination of {line!r}")
    width = int(dst.group(3)) - int(dst.group(2)) + 1
    sources = []
    base = 256 - 16  # sources at the top of the VGPR file, clear of the destinations
    for src in parts[1:3]:
        reg = _REG_RANGE_RE.match(src)
        if reg is None:
            sources.append(src)
            continue
        size = int(reg.group(3)) - int(reg.group(2)) + 1
        sources.append(f"v[{base}:{base + size - 1}]")
        base += 8
    copies = max(1, min(copies, (256 - 16) // width))
    lines = []
    for i in range(copies):
        reg = f"{dst.group(1)}[{i * width}:{i * width + width - 1}]"
        lines.append(" ".join([name, ", ".join([reg, *sources, reg, *parts[4:]])]))
    return "\n".join(lines) + "\n"


@functools.cache
def model_cycles_per_mfma(arch: str, line: str, copies: int = 16) -> float:
    """llvm-mca's cycles per MFMA for ``line``'s instruction alone (independent chains)."""
    block = _independent_block(line, copies)
    n = block.count("\n")
    return run_mca(block, arch) / (MCA_ITERATIONS * n)


def mca_estimate(loop: MainLoop, arch: str) -> dict[str, Any]:
    """llvm-mca's cycles per trip of ``loop`` and its ratio to the MFMA-bound time.

    Raises :class:`McaUnavailable` (one-line reason) when llvm-mca is missing or fails.
    """
    if loop.mfma_count == 0:
        raise McaUnavailable("the loop has no MFMA instructions")
    total, substituted = _loop_cycles(_mca_body(loop.instructions), arch)
    cycles = total / MCA_ITERATIONS
    first_of: dict[str, str] = {}
    for line in loop.instructions:
        if _is_mfma(mnemonic(line)):
            first_of.setdefault(mnemonic(line), line)
    # Two decimals: llvm-mca's pipeline fill adds ~1/1600 to the block's figure (4.001).
    per_kind = {name: round(model_cycles_per_mfma(arch, sample), 2)
                for name, sample in first_of.items()}
    counts = Counter(mnemonic(line) for line in loop.instructions if _is_mfma(mnemonic(line)))
    bound = sum(per_kind[name] * count for name, count in counts.items())
    return {
        "tool": LLVM_MCA,
        "iterations": MCA_ITERATIONS,
        "cycles_per_trip": round(cycles, 2),
        "mfma_per_trip": loop.mfma_count,
        "model_cycles_per_mfma": round(bound / loop.mfma_count, 3),
        "model_cycles_by_mfma": dict(sorted(per_kind.items())),
        "ratio": round(cycles / bound, 3),
        # 64-bit MADs modelled as two VALU ops because llvm-mca hung on them (see _MAD64_RE)
        "mad64_substituted": substituted,
    }


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def outside_loop_instructions(text: str, loop: MainLoop) -> int:
    """Instructions of the kernel outside ``loop`` (its back branch counts as the loop's)."""
    instructions = sum(1 for s in _statements(text) if not s.endswith(":"))
    return max(instructions - len(loop.instructions) - 1, 0)


def analyze_isa(text: str, arch: str, *, mca: bool = True) -> LoopAnalysis:
    """Main loop, its instruction mix and (with ``mca``) the llvm-mca estimate."""
    loop = find_main_loop(text)
    if loop is None:
        return LoopAnalysis(main_loop=False, reason=NO_LOOP,
                            mca_unavailable="no main loop to estimate")
    result = LoopAnalysis(main_loop=True, label=loop.label, instructions=len(loop.instructions),
                          mix=instruction_mix(loop.instructions),
                          outside_instructions=outside_loop_instructions(text, loop))
    if not mca:
        result.mca_unavailable = "llvm-mca not requested"
        return result
    try:
        result.mca = mca_estimate(loop, arch)
    except McaUnavailable as exc:
        result.mca_unavailable = str(exc)
    return result
