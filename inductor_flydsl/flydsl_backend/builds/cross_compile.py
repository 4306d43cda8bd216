"""Cross-compile one FlyDSL template config on the CPU and report its ISA resources.

FlyDSL is steered by process-global environment variables (``FLYDSL_GPU_ARCH``,
``COMPILE_ONLY``, ``FLYDSL_DUMP_IR``, ``FLYDSL_DUMP_DIR``, ``ROCM_PATH``,
``FLYDSL_RUNTIME_ENABLE_CACHE``). :func:`compile_config` sets them for the duration of
one compile and restores them afterwards, under a process-wide lock. FlyDSL 0.5 reads
them at each compile, not at import, so one process may compile for several archs in a
row (tested by ``tests/flydsl``). Compilation is single-threaded MLIR work: run
:func:`compile_config` in worker processes (e.g. a ``ProcessPoolExecutor``) for
parallelism; threads only serialize on the lock.
"""

import contextlib
import io
import os
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ... import settings
from ...isa.stats import parse_isa
from ...template_loader import load_template, template_source_hash
from .toolchain import rocm_path_for_compile

ISA_FILE_NAME = "22_final_isa.s"
_ENV_LOCK = threading.Lock()


_STAT_FIELDS = (
    "vgprs",
    "agprs",
    "total_vgprs",
    "sgprs",
    "lds_bytes",
    "scratch_bytes",
    "vgpr_spills",
    "sgpr_spills",
    "max_workgroup_size",
    "mfma_counts",
)


@dataclass
class CompileResult:
    """Outcome of one cross-compile.

    ``ok`` is False when the config is invalid, compilation raised, or the compiler
    printed an ``error:`` diagnostic (LDS over the arch limit is only a diagnostic: code
    is still emitted, and the resource fields then show the overshoot). Resource
    fields are None when no ISA was produced.
    """

    template: str
    source_hash: str
    config: dict[str, Any]
    arch: str
    dtype: str
    layout: str
    op: str
    ok: bool
    error: str | None = None
    vgprs: int | None = None
    agprs: int | None = None
    total_vgprs: int | None = None
    sgprs: int | None = None
    lds_bytes: int | None = None
    scratch_bytes: int | None = None
    vgpr_spills: int | None = None
    sgpr_spills: int | None = None
    max_workgroup_size: int | None = None
    mfma_counts: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    isa_path: str | None = None
    # Set by compile-check --emulate: the ISA emulator's run (GemmEmulation.to_json()).
    emulation: dict[str, Any] | None = None
    # The main K loop of the ISA: instruction mix and llvm-mca estimate
    # (loop_analysis.LoopAnalysis.to_json()); None when no ISA was produced.
    loop_analysis: dict[str, Any] | None = None
    # The fused epilogue compiled in (canonical EpilogueSpec JSON; "" = none).
    epilogue: str = ""
    # A build for a launch (prebuild.build_here): the compiled module's text and its host
    # entry point, turned into a compiled function by the launching process.
    artifact: str | None = None
    entry: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def compile_env(values: dict[str, str]):
    """FlyDSL's compile settings are process environment variables: set ``values`` for
    one compile, under the one lock every compile of this process takes, then restore."""
    with _ENV_LOCK, settings.overridden(values):
        yield


@contextlib.contextmanager
def _capture_fds(sink: Path):
    """Send fds 1 and 2 to ``sink``: LLVM prints diagnostics from C++, bypassing sys.std*."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(sink, "wb") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _compiler_errors(log: str) -> list[str]:
    return [line.strip() for line in log.splitlines() if "error:" in line]


def find_isa(root: Path) -> Path | None:
    found = sorted(root.rglob(ISA_FILE_NAME), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _analyze_loop(isa_text: str, arch: str) -> dict[str, Any]:
    from ...isa.loop_analysis import analyze_isa

    try:
        return analyze_isa(isa_text, arch).to_json()
    except Exception as exc:  # the analysis must never fail a compile
        return {"main_loop": False, "reason": f"loop analysis failed: {type(exc).__name__}: "
                f"{exc}", "mca": None, "mca_unavailable": "loop analysis failed"}


def prepare_compile(template_name: str, config: Any, *, arch: str, dtype: str, layout: str,
                    op: str, epilogue: str = "") -> tuple[CompileResult, Any, tuple | None]:
    """For one variant: its (not yet ok) :class:`CompileResult`, a fresh launcher and the
    example arguments to compile it with; the launcher is None and ``result.error`` says
    why when the config is invalid (or refuses ``epilogue``, a fused ``EpilogueSpec``'s
    canonical JSON: only templates that take one, e.g. ``gemm_dense``, get it)."""
    template = load_template(template_name)
    config_json = config if isinstance(config, dict) else config.to_json()
    result = CompileResult(template=template_name,
                           source_hash=template_source_hash(template_name),
                           config=dict(config_json), arch=arch, dtype=dtype, layout=layout,
                           op=op, ok=False, epilogue=epilogue)
    fused = {"epilogue": epilogue} if epilogue else {}
    try:
        cfg = template.GemmConfig.from_json(dict(config_json))
        launcher = template.make_launcher(cfg, dtype=dtype, layout=layout, op=op, arch=arch,
                                          **fused)
        args = template.example_args(cfg, dtype=dtype, layout=layout, op=op, **fused)
    except ValueError as exc:
        result.error = f"invalid: {exc}"
        return result, None, None
    return result, launcher, args


def compile_config(
    template_name: str,
    config: Any,
    *,
    arch: str,
    dtype: str,
    layout: str,
    op: str,
    dump_dir: str | os.PathLike | None = None,
    analyze_loop: bool = True,
    epilogue: str = "",
) -> CompileResult:
    """Cross-compile one config of a template for ``arch`` and parse its final ISA.

    ``config`` is the template's config object or its JSON dict. Invalid configs and
    compiler failures give ``ok=False`` with the error text; a missing linker raises
    :class:`~inductor_flydsl.flydsl_backend.builds.toolchain.ToolchainError`. With
    ``dump_dir`` every FlyDSL stage is kept in a fresh subdirectory of it
    (``isa_path`` points at the ISA); without it the dump is deleted. With
    ``analyze_loop`` the ISA's main loop is analysed (``loop_analysis``; see
    :mod:`..isa.loop_analysis`); an analysis failure is recorded there, never raised.
    ``epilogue`` (canonical JSON of an ``EpilogueSpec``, ``""``: none) compiles the
    variant with that epilogue fused (``gemm_dense``; a refusal is an ``invalid:`` error).
    """
    result, launcher, args = prepare_compile(template_name, config, arch=arch, dtype=dtype,
                                             layout=layout, op=op, epilogue=epilogue)
    if launcher is None:
        return result
    rocm_path = rocm_path_for_compile()

    with contextlib.ExitStack() as stack:
        if dump_dir is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="flydsl-isa-")))
        else:
            Path(dump_dir).mkdir(parents=True, exist_ok=True)
            root = Path(tempfile.mkdtemp(prefix=f"{template_name}-{arch}-", dir=dump_dir))
        env = {
            "FLYDSL_GPU_ARCH": arch,
            "COMPILE_ONLY": "1",
            "FLYDSL_DUMP_IR": "1",
            "FLYDSL_DUMP_DIR": str(root),
            "ROCM_PATH": rocm_path,
            "FLYDSL_RUNTIME_ENABLE_CACHE": "0",
        }
        start = time.perf_counter()
        log_path = root / "compiler_output.log"
        with compile_env(env), _capture_fds(log_path):
            try:
                launcher(*args)
            except Exception as exc:  # compiler errors surface as many exception types
                tail = "".join(traceback.format_exception(exc)[-3:])
                result.error = f"compile failed: {type(exc).__name__}: {exc}\n{tail}"
        result.compile_seconds = round(time.perf_counter() - start, 3)
        # LLVM reports e.g. LDS over the arch limit as a diagnostic yet still emits code.
        errors = sorted(set(_compiler_errors(log_path.read_text(errors="replace"))))
        if errors and result.error is None:
            result.error = "compiler diagnostics: " + "; ".join(errors)
        isa = find_isa(root)
        if isa is None:
            result.error = result.error or f"compile produced no {ISA_FILE_NAME}"
            return result
        isa_text = isa.read_text()
        stats = parse_isa(isa_text)
        if analyze_loop:
            result.loop_analysis = _analyze_loop(isa_text, arch)
        if dump_dir is not None:
            result.isa_path = str(isa)
    # Figures are kept even with diagnostics: they show by how much a limit was missed.
    for name in _STAT_FIELDS:
        setattr(result, name, getattr(stats, name))
    result.ok = result.error is None
    return result
