"""Whether an ISA file of the dense GEMM template is the kernel ``emulate``'s arguments
describe: ``--op``, ``--dtype``, ``--layout`` and ``--config`` checked against what the
file itself says, so that a mismatch is refused with its reason instead of being run and
reported as a WRONG result or an LDS race of a kernel that is fine.

What the file says (FlyDSL's final ISA, ``22_final_isa.s``):

- the kernel's metadata (``.amdgpu_metadata``): the argument slots and their sizes (a
  tensor is a pointer and a layout struct of 4 bytes per dim and 8 per non-unit stride:
  the op's operands, 2-D or batched, with or without a bias), the workgroup size
  (``.reqd_workgroup_size``: 64 threads per wave of the config) and the static LDS
  (``.group_segment_fixed_size``: the template's ``lds_bytes`` of the tile and stages);
- its MFMA instructions: the template's ``MFMA_MNEMONIC`` per (arch, dtype);
- the operand layout is compiled in (which stride is 1) and is not in the ISA: FlyDSL's
  first dump, ``00_origin.mlir``, beside the file when it is where FlyDSL wrote it, has
  each operand's strides; an edited copy elsewhere leaves the layout unchecked, which
  :attr:`IsaMatch.unchecked` says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORIGIN_MLIR = "00_origin.mlir"
# one kernel argument of FlyDSL's first dump: %argN: !fly.memref<elem, space, shape:strides>
_MEMREF = re.compile(r"%arg(\d+): !fly\.memref<(\w+), \w+, ([^>]*)>")
_MLIR_DTYPES = {"bf16": "bf16", "f16": "fp16"}
OPS = ("mm", "addmm", "bmm")


@dataclass
class IsaMatch:
    mismatches: list[str] = field(default_factory=list)  # argument vs file, with the reason
    unchecked: list[str] = field(default_factory=list)  # what the file could not tell


def _slot_sizes(args: tuple) -> list[int]:
    """The kernel's argument slot sizes for the launcher's arguments, as FlyDSL lays them
    out: a tensor is an 8-byte pointer and its layout struct, a scalar 4 bytes."""
    import torch

    sizes = []
    for value in args:
        if isinstance(value, torch.Tensor):
            sizes += [8, 4 * value.dim() + 8 * sum(1 for s in value.stride() if s != 1)]
        else:
            sizes.append(4)
    return sizes


def _expected_launch(template: Any, config: Any, op: str, dtype: str,
                     layout: str) -> tuple[list[int], tuple]:
    """(argument slot sizes, block) of the launch ``emulate`` makes for these arguments,
    on a problem of one tile (the sizes do not depend on the shape)."""
    from ..emulator.gemm import make_operands

    a, b, bias, out = make_operands(op, dtype, layout, config.tile_m, config.tile_n,
                                    config.tile_k * max(config.split_k, 1), batch=2)
    workspace = template.split_k_workspace(config, out)
    counters = None
    if workspace is not None and getattr(config, "reduce_in_launch", 0):
        import torch

        counters = torch.zeros(template.MAX_COUNTERS, dtype=torch.int32)
    args = template.launcher_args(a, b, bias, out, 1.0, 1.0, workspace=workspace,
                                  counters=counters)
    kernel_args, _grid, block = template.kernel_launch(config, args)
    return _slot_sizes(kernel_args), tuple(block)


def _origin_layout(isa_path: Path) -> tuple[str, str] | None:
    """(layout, dtype) of the kernel from FlyDSL's first dump beside the ISA, or None."""
    origin = isa_path.parent / ORIGIN_MLIR
    try:
        text = origin.read_text(errors="replace")
    except OSError:
        return None
    operands = {int(n): (elem, layout) for n, elem, layout in _MEMREF.findall(text)}
    if 0 not in operands or 1 not in operands:
        return None
    letters = []
    for index in (0, 1):  # A (.., M, K), B (.., K, N)
        _, spec = operands[index]
        strides = [s.strip() for s in spec.partition(":")[2].strip("()").split(",")]
        if len(strides) < 2:
            return None
        letters.append("n" if strides[-1] == "1" else "t" if strides[-2] == "1" else "?")
    return "".join(letters), _MLIR_DTYPES.get(operands[0][0], operands[0][0])


def check_dense_isa(isa_path: Path, program: Any, template: Any, config: Any, *, op: str,
                    dtype: str, layout: str, arch: str) -> IsaMatch:
    """Every way the arguments differ from the kernel in the file (``program``: the parsed
    ISA), each naming the argument, what the file says and how it tells."""
    kernel = program.kernel
    found = IsaMatch()
    mnemonics = sorted({i.mnemonic for i in program.instructions
                        if i.mnemonic.startswith("v_mfma")})
    wanted = template.MFMA_MNEMONIC.get((arch, dtype))
    if wanted is not None and mnemonics and wanted not in mnemonics:
        other = [d for (a, d), name in template.MFMA_MNEMONIC.items()
                 if a == arch and name in mnemonics]
        found.mismatches.append(
            f"--dtype {dtype}: the ISA's MFMAs are {', '.join(mnemonics)}"
            + (f": it was built for --dtype {other[0]}" if other else "")
            + f" (--dtype {dtype} on {arch} uses {wanted})")
    slots = [int(a[".size"]) for a in kernel.args]
    expected, block = _expected_launch(template, config, op, dtype, layout)
    if slots != expected:
        fitting = [o for o in OPS if o != op
                   and _expected_launch(template, config, o, dtype, layout)[0] == slots]
        found.mismatches.append(
            f"--op {op}: the ISA's kernel takes {len(slots)} argument slots of sizes "
            f"{slots}; --op {op} passes {len(expected)} of sizes {expected}"
            + (f"; the ISA's are those of --op {fitting[0]}" if fitting else ""))
    threads = kernel.metadata.get(".reqd_workgroup_size") or [
        kernel.metadata.get(".max_flat_workgroup_size")]
    if threads and threads[0] and int(threads[0]) != block[0]:
        found.mismatches.append(
            f"--config: the ISA's workgroup has {int(threads[0])} threads "
            f"({int(threads[0]) // 64} wave(s) of 64), the config's waves_m={config.waves_m} x "
            f"waves_n={config.waves_n} make {block[0]}")
    lds = template.lds_bytes(config, layout, arch)
    if kernel.lds_bytes != lds:
        found.mismatches.append(
            f"--config: the ISA allocates {kernel.lds_bytes} bytes of LDS, the config "
            f"(tile_m={config.tile_m}, tile_n={config.tile_n}, tile_k={config.tile_k}, "
            f"stages={config.stages}) {lds} on {arch}: its tile or stages differ")
    origin = _origin_layout(isa_path)
    if origin is None:
        found.unchecked.append(
            f"--layout {layout}: the ISA does not record its operands' layout, and "
            f"FlyDSL's {ORIGIN_MLIR} (which does) is not beside it")
    elif origin[0] != layout:
        found.mismatches.append(
            f"--layout {layout}: the kernel was built for layout {origin[0]} (operand "
            f"strides in {isa_path.parent / ORIGIN_MLIR})")
    return found
