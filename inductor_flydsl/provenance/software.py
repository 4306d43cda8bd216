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

from ..problems.keys import stable_id

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
    checkout = Path(__file__).resolve().parents[2] / "templates"
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
    """The full stack of a process. The id keys the rows a process writes; whether a
    recorded row still holds for another stack is decided per backend (``validity.py``).
    ``blas`` is the GPU BLAS library ATen prefers (empty on a process without a GPU: a
    CPU build's BLAS is fixed by the torch build), and enters the id only when set, so
    CPU rows keep the ids they had before the field existed."""

    torch: str
    triton: str
    flydsl: str
    templates: str
    blas: str = ""

    @property
    def id(self) -> str:
        fields = asdict(self)
        if not self.blas:
            del fields["blas"]
        return stable_id(fields)

    def as_row(self) -> dict[str, object]:
        return {"id": self.id, **asdict(self)}


_source_hashes: dict[tuple[str, int, int], str] = {}
# The source files of each template (its own, the dense kernel it builds on, the fused
# epilogue code): its hash covers them all, so a change to shared code invalidates the
# records of every template that uses it.
TEMPLATE_SOURCES: dict[str, tuple[str, ...]] = {
    "gemm_dense": ("gemm_dense", "fused_epilogue"),
    "gemm_grouped": ("gemm_grouped", "gemm_dense", "fused_epilogue"),
    "gemm_mx": ("gemm_mx", "gemm_dense", "fused_epilogue"),
}


def _file_hash(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _source_hashes:
        _source_hashes[key] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return _source_hashes[key]


def template_source_hash(name: str) -> str | None:
    """First 16 hex digits of the sha256 of ``templates/<name>.py`` (what a FlyDSL
    candidate records as its ``template_hash``), or None when there is no such template.
    A template built from others' code (``TEMPLATE_SOURCES``) hashes the digests of all
    its sources. Cached by each file's mtime and size, so an edited template is hashed
    again."""
    root = templates_dir()
    if root is None or not name.isidentifier():
        return None
    digests = [_file_hash(root / f"{part}.py") for part in TEMPLATE_SOURCES.get(name, (name,))]
    if any(d is None for d in digests):
        return None
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256(" ".join(digests).encode()).hexdigest()[:16]  # type: ignore[arg-type]


def gpu_blas() -> str:
    """The BLAS library ATen's GPU GEMMs use (``hipblaslt``, ``cublas``, ...), or "" in a
    process without a GPU."""
    try:
        if not torch.cuda.is_available():
            return ""
        return str(torch.backends.cuda.preferred_blas_library()).rsplit(".", 1)[-1].lower()
    except Exception:  # a torch build without the query: the build decides
        return ""


@functools.cache
def current_software() -> SoftwareInfo:
    return SoftwareInfo(
        torch=torch.__version__,
        triton=_dist_version("triton", "pytorch-triton-rocm", "pytorch-triton"),
        flydsl=_dist_version("flydsl"),
        templates=template_version(),
        blas=gpu_blas(),
    )
