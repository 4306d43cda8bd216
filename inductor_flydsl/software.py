"""The software stack a tuning result belongs to: torch, triton, flydsl and templates.

Versions come from package metadata, so triton and flydsl are never imported here (a
triton import on a CPU build of torch, or a FlyDSL import, costs seconds).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .keys import stable_id

# Bump when the meaning of a recorded candidate changes without its template source
# changing (e.g. how configs are encoded).
TEMPLATE_FORMAT_VERSION = 1
TEMPLATES_PACKAGE = "inductor_flydsl_templates"


def _dist_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "none"


def templates_dir() -> Path | None:
    """The installed ``inductor_flydsl_templates`` package, else a source checkout's
    ``templates/`` next to the package."""
    spec = importlib.util.find_spec(TEMPLATES_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    checkout = Path(__file__).resolve().parent.parent / "templates"
    return checkout if (checkout / "gemm_dense.py").is_file() else None


@functools.cache
def template_version() -> str:
    """``v<format>-<sha256 of every template source, first 12 hex>``."""
    digest = hashlib.sha256()
    root = templates_dir()
    if root is not None:
        for path in sorted(root.glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return f"v{TEMPLATE_FORMAT_VERSION}-{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class SoftwareInfo:
    torch: str
    triton: str
    flydsl: str
    templates: str

    @property
    def id(self) -> str:
        return stable_id(asdict(self))

    def as_row(self) -> dict[str, object]:
        return {"id": self.id, **asdict(self)}


@functools.cache
def current_software() -> SoftwareInfo:
    return SoftwareInfo(
        torch=torch.__version__,
        triton=_dist_version("triton", "pytorch-triton-rocm", "pytorch-triton"),
        flydsl=_dist_version("flydsl"),
        templates=template_version(),
    )
