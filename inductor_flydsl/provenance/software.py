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
_sibling_imports: dict[tuple[str, int, int], tuple[str, ...]] = {}


def template_file(name: str) -> Path | None:
    """``<name>.py`` in the shipped templates, else in a package of
    ``INDUCTOR_FLYDSL_TEMPLATE_PACKAGES`` (extra templates); None when there is none."""
    if not name.isidentifier():
        return None
    roots = [templates_dir()]
    from .. import settings

    for package in settings.TEMPLATE_PACKAGES.value():
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            roots.append(Path(next(iter(spec.submodule_search_locations))))
    for root in roots:
        if root is not None and (root / f"{name}.py").is_file():
            return root / f"{name}.py"
    return None


def _siblings(path: Path) -> tuple[str, ...]:
    """The template files ``path`` imports with ``from . import x`` / ``from .x import``,
    in the order it imports them (cached by the file's mtime and size)."""
    import ast

    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _sibling_imports:
        found: list[str] = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found += [node.module] if node.module else [a.name for a in node.names]
        _sibling_imports[key] = tuple(dict.fromkeys(found))
    return _sibling_imports[key]


def _source_files(name: str) -> list[Path] | None:
    """The files of :func:`template_sources`, in its order; None when one is missing."""
    first = template_file(name)
    if first is None:
        return None
    root = first.parent  # a template's siblings are files of its own package
    files: list[Path] = []
    todo = [name]
    while todo:
        path = root / f"{todo.pop(0)}.py"
        if path in files:
            continue
        if not path.is_file():
            return None
        files.append(path)
        todo += _siblings(path)
    return files


def template_sources(name: str) -> tuple[str, ...] | None:
    """The template files ``name``'s code comes from: itself, then every template file it
    imports, transitively, breadth first in import order (``gemm_grouped`` imports
    ``gemm_dense``, which imports ``fused_epilogue``). None when a file is missing."""
    files = _source_files(name)
    return None if files is None else tuple(path.stem for path in files)


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
    A template built from others' code (:func:`template_sources`: the template files it
    imports) hashes the digests of all its sources. Cached by each file's mtime and size,
    so an edited template is hashed again."""
    files = _source_files(name)
    if files is None:
        return None
    digests = [_file_hash(path) for path in files]
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
