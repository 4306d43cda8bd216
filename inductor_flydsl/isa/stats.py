"""Parse the AMDGPU assembly FlyDSL writes (``22_final_isa.s``) into resource figures."""

import re
from collections import Counter
from dataclasses import dataclass, field

_METADATA_KEYS = {
    "vgprs": ".vgpr_count",
    "agprs": ".agpr_count",
    "sgprs": ".sgpr_count",
    "vgpr_spills": ".vgpr_spill_count",
    "sgpr_spills": ".sgpr_spill_count",
    "lds_bytes": ".group_segment_fixed_size",
    "scratch_bytes": ".private_segment_fixed_size",
    "max_workgroup_size": ".max_flat_workgroup_size",
}
_MFMA_RE = re.compile(r"^\s*(v_mfma_\w+|v_smfmac_\w+)", re.MULTILINE)


@dataclass(frozen=True)
class IsaStats:
    """Resource usage of the first kernel in an ISA file.

    ``vgprs``/``agprs`` are the metadata counts; ``total_vgprs`` is the unified
    register-file footprint per lane (AGPRs start at the 4-aligned ``accum_offset``
    after the VGPRs), the figure to hold against the 512 limit.
    """

    kernel: str
    vgprs: int
    agprs: int
    total_vgprs: int
    sgprs: int
    vgpr_spills: int
    sgpr_spills: int
    lds_bytes: int
    scratch_bytes: int
    max_workgroup_size: int
    mfma_counts: dict[str, int] = field(default_factory=dict)

    @property
    def spills(self) -> int:
        return self.vgpr_spills + self.sgpr_spills


def _int_after(key: str, text: str) -> int:
    match = re.search(re.escape(key) + r":?\s+(\d+)", text)
    if match is None:
        raise ValueError(f"ISA has no {key} entry")
    return int(match.group(1))


def parse_isa(text: str) -> IsaStats:
    """Read the kernel metadata and count MFMA instructions of an assembly listing."""
    name = re.search(r"^\s*\.name:\s+(\S+)", text, re.MULTILINE)
    if name is None:
        raise ValueError("ISA has no kernel metadata (.name)")
    values = {attr: _int_after(key, text) for attr, key in _METADATA_KEYS.items()}
    # Unified register file (gfx90a+): AGPRs start at accum_offset, the 4-aligned VGPR
    # count. `.amdhsa_next_free_vgpr` is not usable: LLVM 0.5-era output can report 257
    # for a kernel with 78 VGPRs and no AGPRs.
    total = values["vgprs"]
    if values["agprs"]:
        accum = re.search(r"\.amdhsa_accum_offset\s+(\d+)", text)
        offset = int(accum.group(1)) if accum else -(-values["vgprs"] // 4) * 4
        total = offset + values["agprs"]
    return IsaStats(
        kernel=name.group(1),
        total_vgprs=total,
        mfma_counts=dict(Counter(_MFMA_RE.findall(text))),
        **values,
    )
