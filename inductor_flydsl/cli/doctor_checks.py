"""What ``inductor-flydsl doctor`` finds on this machine, as sections of findings; a
finding with a ``problem`` is something the user asked for that cannot work (exit 1)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..db.open import SQLITE_VERSION, UnusableDB, open_db
from ..db.queries import version_and_winners
from ..db.user_path import missing_folder
from ..dependencies import requirement_of
from ..settings import (
    DB,
    DISPLAY_ONLY,
    ENV_DB,
    ENV_MODE,
    MODE,
    SHIPPED,
    Mode,
    settings_from_env,
)
from .doctor_dependencies import TITLE, dependency_states
from .doctor_settings import settings_in_effect


@dataclass(frozen=True)
class Finding:
    label: str
    value: str
    problem: str | None = None  # set: the user asked for something that cannot work


@dataclass
class Section:
    title: str
    findings: list[Finding] = field(default_factory=list)

    def add(self, label: str, value: str, problem: str | None = None) -> None:
        self.findings.append(Finding(label, value, problem))


def _version(*distributions: str) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def dependencies() -> Section:
    section = Section(TITLE)
    for state in dependency_states():
        section.add(state.label, state.value, state.problem)
    return section


def versions() -> Section:
    import torch

    from ..version import __version__

    section = Section("Versions")
    section.add("inductor-flydsl", __version__)
    section.add("python", f"{platform.python_version()} ({sys.executable})")
    build = ("ROCm " + torch.version.hip if torch.version.hip else
             "CUDA " + torch.version.cuda if torch.version.cuda else "CPU only")
    section.add("torch", f"{torch.__version__} ({build})")
    triton = _version("triton", "pytorch-triton-rocm", "pytorch-triton")
    section.add("triton", triton or "not installed")
    flydsl = _version("flydsl")
    if flydsl is None:
        section.add("flydsl", "not installed (pip install 'flydsl>=0.5,<0.6')")
    else:
        from ..flydsl_backend.builds import flydsl_runtime

        missing = flydsl_runtime.problems()
        section.add("flydsl", flydsl + ("" if not missing else
                                        " (internals this package uses are missing: "
                                        + "; ".join(missing) + ")"))
    section.add("sqlite", SQLITE_VERSION)
    return section


def toolchain() -> Section:
    from ..flydsl_backend.builds.toolchain import find_ld_lld
    from ..isa.loop_analysis import LLVM_MCA, find_llvm_mca

    section = Section("Toolchain (cross-compiles, explain --isa/--emulate, compile-check)")
    lld = find_ld_lld()
    section.add("ld.lld (AMDGPU)", " ".join(lld) if lld else
                "not found (apt-get install lld-19, or pip install ziglang)")
    mca = find_llvm_mca()
    section.add("llvm-mca", mca or f"{LLVM_MCA} not found on PATH (apt-get install llvm-22); "
                                   "explain --isa then gives no cycle estimate")
    return section


def runtime() -> tuple[Section, list[str]]:
    """The ROCm runtime and arch; also returns why FlyDSL kernels cannot run here."""
    import torch

    from ..flydsl_backend.offer.eligibility import SUPPORTED_ARCHS, runtime_reasons

    section = Section("ROCm runtime")
    reasons = runtime_reasons()
    if torch.version.hip is None:
        section.add("runtime", "none: torch is not a ROCm build")
    else:
        section.add("runtime", f"HIP {torch.version.hip}")
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            name = torch.cuda.get_device_name(index)
            arch = getattr(torch.cuda.get_device_properties(index), "gcnArchName", "?")
            section.add(f"GPU {index}", f"{name} ({arch})")
    else:
        section.add("GPU", "none visible")
    section.add("FlyDSL kernels", "can run here (supported: " + ", ".join(SUPPORTED_ARCHS)
                + ")" if not reasons else "cannot run here: " + "; ".join(reasons))
    return section, reasons


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _db_summary(path: Path, *, immutable: bool) -> str:
    db = open_db(path, writable=False, immutable=immutable)
    try:
        version, winners = version_and_winners(db)
    finally:
        db.close()
    return f"schema v{version or '?'}, {winners} winners"


def tuning_db() -> Section:
    section = Section("Tuning DB")
    try:
        settings = settings_from_env()
    except ValueError as exc:
        section.add("settings", f"cannot be read: {exc} (see Settings)")
        return section
    path = settings.db_path
    source = "env" if DB.text() else "default"
    mode_source = "env" if MODE.text() else "default"
    section.add("path", f"{path} ({source})")
    section.add("mode", f"{settings.mode.value} ({mode_source})")
    records = settings.mode is Mode.READWRITE
    no_folder = missing_folder(settings)
    if no_folder is not None:  # never created: compiles record nothing
        section.add("file", f"not used: {path.parent} does not exist",
                    f"{no_folder}: compiles will not use the DB")
        return section
    if path.exists():
        try:
            section.add("file", _db_summary(path, immutable=False))
        except UnusableDB as exc:
            section.add("file", f"unusable: {exc}", f"{exc}: compiles will not use it")
        writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
        why = "" if writable else " (the file or its folder is read-only here)"
    else:
        folder = _nearest_existing(path.parent)
        writable = folder.is_dir() and os.access(folder, os.W_OK)
        why = ("" if writable else f" ({folder} is not a folder)" if not folder.is_dir()
               else f" ({folder} cannot be written)")
        section.add("file", "does not exist yet" + (" (created by the first compile)"
                                                     if records and writable else ""))
    fix = f"set {ENV_DB} to a writable path, or {ENV_MODE}=readonly"
    section.add("writable", ("yes" if writable else "no" + why),
                None if writable or not records else
                f"mode readwrite records every autotune, but {path} cannot be written: {fix}")
    return section


def shipped() -> Section:
    from ..db.shipped import shipped_db_paths

    section = Section("Shipped DBs (tuning_db/)")
    paths = shipped_db_paths()
    if not paths:
        section.add("shipped", "none installed")
    for path in paths:
        try:
            summary = _db_summary(path, immutable=True)
        except UnusableDB as exc:
            summary = f"unusable: {exc}"
        section.add(path.name, f"{summary} ({path})")
    if not SHIPPED.value():
        section.add("layered", "no (INDUCTOR_FLYDSL_SHIPPED=0)")
    return section


def inductor_internals() -> tuple[Section, list[str]]:
    import sympy  # noqa: F401  (Inductor needs it: without it every name is "gone")

    from ..inductor.adapter import internals, internals_check

    section = Section("Inductor internals "
                      "(inductor_flydsl.inductor.adapter.internals_check.problems())")
    found = internals_check.problems()
    if not found:
        section.add("internals", f"all {len(internals.INTERNALS)} the plugin relies on hold")
    for line in found:
        section.add("changed", line, "the plugin stays off with this torch: " + line)
    return section, found


def settings_section() -> Section:
    section = Section("Settings (INDUCTOR_FLYDSL*)")
    for state in settings_in_effect():
        text = f"{state.value or '(empty)'} ({state.source}) - {state.meaning}"
        problem = None
        if state.problem:
            problem = f"{state.name}={state.value!r}: {state.problem}" + (
                " (its default is used; the plugin stays on)"
                if state.name in DISPLAY_ONLY else "")
        section.add(state.name, text, problem)
    return section


def compile_offer(flydsl_reasons: list[str], internals_found: list[str]) -> Section:
    """What ``torch.compile(mode="max-autotune")`` would offer for a GEMM here."""
    import torch

    from ..inductor.adapter import internals
    from ..inductor.autotune.compile_summary import single_choice_causes
    from ..inductor.autotune.gemm_backends import FLYDSL, backend_tokens

    config = internals.config
    section = Section("A max-autotune compile here would offer")
    tokens = set(backend_tokens())
    section.add("backends asked for", f"{config.max_autotune_gemm_backends} "
                "(TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS)")
    gpu = torch.cuda.is_available()
    section.add("ATen", "yes" if "ATEN" in tokens else "no (not in the backends)")
    if "TRITON" not in tokens:
        triton = "no (not in the backends)"
    elif not gpu:
        triton = "no (no GPU: Inductor's Triton GEMM templates run on GPUs only)"
    elif importlib.util.find_spec("triton") is None:
        triton = "no (triton is not installed)"
    else:
        triton = "yes"
    section.add("Triton", triton)
    if "CPP" in tokens:
        section.add("C++ (CPU)", "yes, for CPU tensors" if not gpu else
                    "for CPU tensors only")
    causes = single_choice_causes(gpu, torch.version.hip is not None)
    section.add("autotuned", "; ".join(f"no: {c}" for c in causes) if causes else
                "yes: a GEMM has several choices (on CPU, with freezing = True)")
    from ..flydsl_backend.autotune.provider import inductor_config_reasons

    config_reasons = inductor_config_reasons()
    requested = FLYDSL in tokens
    from ..flydsl_backend.builds.toolchain import find_ld_lld

    lld = [] if find_ld_lld() else ["no AMDGPU-capable ld.lld to link FlyDSL kernels"]
    why_not = flydsl_reasons + config_reasons + internals_found + lld
    if not requested:
        flydsl = "no (not requested: add FLYDSL to TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS)"
        if why_not:
            flydsl += "; and it could not run here: " + "; ".join(why_not)
        section.add("FlyDSL", flydsl)
    elif why_not:
        section.add("FlyDSL", "no: " + "; ".join(why_not),
                    "FlyDSL is requested (FLYDSL in the backends) but cannot be offered: "
                    + "; ".join(why_not))
    else:
        section.add("FlyDSL", "yes")
    return section


def _unchecked(title: str, exc: ImportError) -> Section:
    """A section whose check needs a required package that is missing (listed, with the
    fix, under Dependencies)."""
    requirement = requirement_of(exc)
    if requirement is None:
        raise exc
    section = Section(title)
    section.add("not checked", f"it needs {requirement.package} (see Dependencies)")
    return section


def collect() -> list[Section]:
    sections = [dependencies()]
    try:
        run_section, flydsl_reasons = runtime()
    except ImportError as exc:
        run_section, flydsl_reasons = _unchecked("ROCm runtime", exc), ["not checked"]
    try:
        internals_section, internals_found = inductor_internals()
    except ImportError as exc:
        internals_section, internals_found = _unchecked("Inductor internals", exc), []
    checks = [("Versions", versions), ("Toolchain", toolchain), ("ROCm runtime",
              lambda: run_section), ("Tuning DB", tuning_db),
              ("Shipped DBs", shipped), ("Inductor internals", lambda: internals_section),
              ("Settings", settings_section), ("A max-autotune compile here would offer",
                                               lambda: compile_offer(flydsl_reasons,
                                                                     internals_found))]
    for title, check in checks:
        try:
            sections.append(check())
        except ImportError as exc:
            sections.append(_unchecked(title, exc))
    return sections
