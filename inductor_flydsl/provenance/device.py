"""Which device a GEMM runs on, as the tuning DB keys it: arch, name and compute units.

Arch is the gfx name on ROCm (``gfx950``), ``sm_XY`` on CUDA and ``<machine>-<ISA>`` on CPU
(``x86_64-AVX512``). The compute-unit count separates SKUs that share an arch (MI300X vs
MI300A, a partitioned GPU); on CPU it is the number of threads torch uses.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import asdict, dataclass

import torch

from ..problems.keys import stable_id


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu", "cuda" or "rocm"
    arch: str
    name: str
    compute_units: int

    @property
    def id(self) -> str:
        return stable_id(asdict(self))

    def as_row(self) -> dict[str, object]:
        return {"id": self.id, **asdict(self)}


@functools.cache
def _cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _describe_gpu(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip is not None:
        arch = str(getattr(props, "gcnArchName", "")).split(":", 1)[0] or "gfx-unknown"
        kind = "rocm"
    else:
        arch = f"sm_{props.major}{props.minor}"
        kind = "cuda"
    return DeviceInfo(kind=kind, arch=arch, name=props.name,
                      compute_units=int(props.multi_processor_count))


def describe_device(device: torch.device | str) -> DeviceInfo:
    """Describe ``device`` (``cpu`` or a CUDA/ROCm GPU) for the tuning DB."""
    dev = torch.device(device)
    if dev.type == "cpu":
        capability = torch.backends.cpu.get_cpu_capability()
        return DeviceInfo(kind="cpu", arch=f"{platform.machine()}-{capability}",
                          name=_cpu_model_name(), compute_units=torch.get_num_threads())
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return _describe_gpu(index)
    raise ValueError(f"inductor_flydsl does not know device type {dev.type!r}")


def rocm_arch(device: torch.device | str) -> str | None:
    """The gfx arch of a ROCm device, or None on any other device."""
    dev = torch.device(device)
    if dev.type != "cuda" or torch.version.hip is None or not torch.cuda.is_available():
        return None
    return describe_device(dev).arch
