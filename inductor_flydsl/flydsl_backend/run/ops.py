"""The torch custom ops that Inductor's generated code calls to run a FlyDSL GEMM.

``torch.ops.inductor_flydsl.{mm,addmm,bmm,grouped_mm,scaled_mm,scaled_mm_bias,
gemm_epilogue}_out`` are
out-variant ops (generated code calls their implementations directly, as
``inductor_flydsl_direct.<op>_out``, see ``direct.py``): they write into the buffer
Inductor allocated (``out``), launch on the current stream and never synchronize the
host; they allocate nothing except a split-K config's fp32 workspace, which comes from
torch's caching allocator on that stream (a CUDA-graph capture gives it the graph's
private pool). Generated code passes ``out`` by
keyword (schemas cannot have keyword-only tensors, so it is an ordinary argument). Their
fake implementations do nothing, so tracing, the FX graph cache and CUDA-graph capture
see a plain in-place op. Generated code imports ``direct.py`` itself, so a cached graph
that calls them runs in any process where the package is installed; the registered ops
(``torch.ops.inductor_flydsl.<op>_out.default``, :data:`OPS`) serve tests, scripts and
tracing.

A call whose operands (or split-K workspace: ``gemm_dense.workspace_reason``) reach past
the kernel's int32 offsets (possible only for a candidate at a size larger than any seen
at compile time) is computed with ATen into ``out`` instead; an empty ``out`` returns at
once. Each launch goes through the kernel runner (``kernel_runner``): built once in a
build worker, launched through a FlyDSL compiled function, launch errors raised.

**Warm launches are bound** (``kernel_runner.BoundLaunch``): the dense ops key each call
by (op, config, scalars, every operand's shape, strides and dtype, device); the first call
of a key takes the full path (runtime check, span checks, the template's argument
packing, the runner) and binds it, later calls write only the operands' pointers and the
stream and launch. A split-K config keeps the full path (its workspace is allocated per
call).

**A failure at run time never raises in the user's forward**: a FlyDSL kernel that does
not build, load or launch when generated code calls the op (for instance after an
FX-graph-cache hit, in a process where the build fails, or a module that cannot load
inside a graph capture) is computed with ATen into ``out`` (grouped: ``torch._grouped_mm``;
MX, which no ATen kernel takes on every torch and GPU: the operands dequantized on the
device, then a float32 matmul), with one warning per kernel and process,
``stats()['runtime_fallbacks']`` and a refusal recorded in the tuning DB.
While Inductor benchmarks a candidate (:func:`strict_launches`), failures raise, so the
candidate is excluded instead.

The config arrives as JSON text and is validated (``GemmConfig.from_json``) before it
reaches kernel generation. The real implementation refuses to launch unless the runner's
device runtime accepts the device (on ROCm: the ROCm 7 runtime and a supported arch
verified; FlyDSL would abort the process otherwise).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
from collections.abc import Callable, Iterator

import torch

from . import kernel_runner as _kernel_runner

NAMESPACE = "inductor_flydsl"
log = logging.getLogger("inductor_flydsl")


class FlydslRuntimeUnavailable(RuntimeError):
    pass


@functools.cache
def _parse_config(config: str, template: str):  # the template's config
    from ...template_loader import load_template

    data = json.loads(config)
    if isinstance(data, dict):  # a self-describing config's variant (loaded_variants.py)
        data.pop("variant", None)
    return load_template(template).GemmConfig.from_json(data)


@functools.cache
def template_of(op: str, config: str) -> str:
    """The template whose kernel ``op``'s call launches: the one a self-describing config
    names (``loaded_variants.py``), if a registered template launches ``op``, else the
    first that does (a config text from a DB is never trusted further than that)."""
    from ..specs import registry

    specs = registry.for_custom_op(op)
    try:
        data = json.loads(config)
        named = data.get("variant", {}).get("template") if isinstance(data, dict) else None
    except (ValueError, AttributeError):
        named = None
    return next((s.name for s in specs if s.name == named), specs[0].name)


def _runner(device: torch.device):
    """The launch runner, once its device runtime accepts ``device`` (a ROCm 7 GPU of a
    supported arch; FlyDSL would abort the process otherwise)."""
    from .kernel_runner import runner

    current = runner()
    reasons = current.runtime.reasons(device)
    if reasons:
        raise FlydslRuntimeUnavailable("FlyDSL kernel not launched: " + "; ".join(reasons))
    return current


# ---- failures at run time ----------------------------------------------------------------
_strict: contextvars.ContextVar[bool] = contextvars.ContextVar("inductor_flydsl_strict",
                                                               default=False)


@contextlib.contextmanager
def strict_launches() -> Iterator[None]:
    """Inside the block (Inductor benchmarking or validating a candidate) a FlyDSL
    failure raises, so the candidate is excluded; outside it, the op falls back to ATen.
    A kernel the benchmark's graph captures is pinned only until the block ends
    (``kernel_runner.transient_pins``: that graph is dropped inside it)."""
    token = _strict.set(True)
    try:
        with _kernel_runner.transient_pins():
            yield
    finally:
        _strict.reset(token)


def _fall_back(op: str, config: str, out: torch.Tensor, exc: Exception) -> None:
    """Warn once per (op, config) and process, count and record a run-time fallback."""
    from ...telemetry.user_warnings import warn_once

    reason = f"{type(exc).__name__}: {exc}"
    warn_once(f"runtime:{op}:{config}",
              f"inductor_flydsl: the FlyDSL {op} kernel {config} failed at run time and "
              f"is computed with ATen instead ({reason})")
    try:
        from ...inductor.adapter import plugin_state
        from ...provenance.software import current_software

        state = plugin_state.current()
        if state is not None:
            state.stats.bump("runtime_fallbacks")
            from ...provenance.device import describe_device

            state.tuning_db.record_refusal(describe_device(out.device), current_software(),
                                           f"{op} (FlyDSL at run time)",
                                           f"config {config}: {reason}"[:250])
    except Exception as record_exc:  # recording must not fail the forward either
        log.debug("inductor_flydsl: run-time fallback not recorded: %s", record_exc)


FALLBACK_ERRORS = (RuntimeError, ValueError, OSError)  # FlydslLaunchError is a RuntimeError


@contextlib.contextmanager
def _or_computed_by_torch(op: str, config: str, out: torch.Tensor,
                          compute: Callable[[], None]) -> Iterator[None]:
    """The block launches the FlyDSL kernel; a run-time failure in it raises inside
    :func:`strict_launches` (Inductor benchmarking: the candidate is excluded), and
    anywhere else is warned about and recorded once (:func:`_fall_back`) and ``compute``
    writes the same result into ``out`` with torch: every op's failure policy, here."""
    try:
        yield
    except FALLBACK_ERRORS as exc:
        if _strict.get():
            raise
        _fall_back(op, config, out, exc)
        compute()
# False: every call takes the full path (scripts/bench_launch.py compares the two)
BIND_LAUNCHES = True


def _dense(op: str, config: str, sources: tuple, key: tuple, a: torch.Tensor,
           b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, alpha: float,
           beta: float, epilogue: tuple | None = None) -> None:
    """One dense-template call: the bound launch of ``key`` if there is one, else the
    full path (which binds it); ATen on a run-time failure outside benchmarking."""

    def with_torch() -> None:
        if epilogue is None:
            _aten_into(a, b, bias, out, alpha, beta)
        else:
            from ...problems.epilogue_spec import EpilogueSpec

            spec = EpilogueSpec.from_json(epilogue[0])
            _reference_into(spec, a, b, _epilogue_extras(spec, epilogue[1]), out)

    with _or_computed_by_torch(op, config, out, with_torch):
        bound = _kernel_runner.runner().bound(key) if BIND_LAUNCHES else None
        if bound is not None and bound(sources, out):
            return
        with _kernel_runner.binding(key, sources) if BIND_LAUNCHES else \
                contextlib.nullcontext():
            if epilogue is None:
                _checked_launch(op, a, b, bias, out, alpha, beta, config)
            else:
                _epilogue_launch(a, b, out, config, *epilogue)


def _checked_launch(op: str, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
                    out: torch.Tensor, alpha: float, beta: float, config: str) -> None:
    runner = _runner(out.device)
    from ...template_loader import load_template

    name = template_of(op, config)
    template = load_template(name)
    if out.numel() == 0:
        return  # M or N is 0 (a dynamic batch that came out empty): nothing to write
    parsed = _parse_config(config, name)
    if (_over_int32_span(template.MAX_SPAN_ELEMENTS, a, b, out)
            or (parsed.split_k > 1 and template.workspace_reason(parsed, *out.shape[-2:]))
            or template.counters_reason(parsed, *out.shape[-2:])):  # issue 43: in-launch split-K
        _aten_into(a, b, bias, out, alpha, beta)
        return
    template.launch(a, b, bias, out, alpha, beta, parsed, runner=runner)


def _span(t: torch.Tensor) -> int:
    return sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1


def _over_int32_span(limit: int, *tensors: torch.Tensor) -> bool:
    """True when an operand reaches past the kernel's int32 offsets. Compile-time
    eligibility checks this at the problem's size; a dynamic-M candidate meets sizes
    only at run time, so every launch checks (integer arithmetic, no device work)."""
    return any(_span(t) > limit for t in tensors)


def _aten_into(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None,
               out: torch.Tensor, alpha: float, beta: float) -> None:
    """The same result with ATen, for a call outside the kernel's range."""
    if a.dim() == 3:
        torch.bmm(a, b, out=out)
        if alpha != 1.0:
            out.mul_(alpha)
    elif bias is not None:
        torch.addmm(bias.expand_as(out), a, b, beta=beta, alpha=alpha, out=out)
    else:
        torch.mm(a, b, out=out)
        if alpha != 1.0:
            out.mul_(alpha)


def mm_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
           alpha: float = 1.0) -> None:
    key = ("mm", config, alpha, a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
           out.shape, out.stride(), out.dtype, out.device)
    _dense("mm", config, (a, b, out), key, a, b, None, out, alpha, 0.0)


def addmm_out(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
              config: str, alpha: float = 1.0, beta: float = 1.0) -> None:
    key = ("addmm", config, alpha, beta, a.shape, a.stride(), a.dtype, b.shape, b.stride(),
           b.dtype, out.shape, out.stride(), out.dtype, bias.shape, bias.stride(),
           bias.dtype, out.device)
    _dense("addmm", config, (a, b, out, bias), key, a, b, bias, out, alpha, beta)


def bmm_out(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
            alpha: float = 1.0) -> None:
    key = ("bmm", config, alpha, a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype,
           out.shape, out.stride(), out.dtype, out.device)
    _dense("bmm", config, (a, b, out), key, a, b, None, out, alpha, 0.0)


def grouped_mm_out(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor, out: torch.Tensor,
                   config: str) -> None:
    """``out = torch._grouped_mm(a, b, offs)`` (2-D A, 3-D B) with the grouped template;
    rows past ``offs[-1]`` are left as they are. ``offs`` is read on the GPU only."""
    with _or_computed_by_torch("grouped_mm", config, out,
                               lambda: out.copy_(torch._grouped_mm(a, b, offs=offs))):
        runner = _runner(out.device)
        from ...template_loader import load_template

        if out.numel() == 0:
            return
        # operands past the int32 offsets (checked at compile time for the problem's
        # size) are computed with ATen by the template's launch
        name = template_of("grouped_mm", config)
        load_template(name).launch(a, b, offs, out, _parse_config(config, name),
                                   runner=runner)


def _mx_launch(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
               scale_b: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor,
               config: str) -> None:
    from ...numerics.mx import mx_product_into, scale_b_layout

    # B's scales per row (nt) or per 32x32 block (nt_b32: vLLM's MXFP8 weights)
    layout = scale_b_layout(b.shape[1], scale_b)
    # no ATen kernel takes these MX operands on every torch and GPU: torch computes the
    # fallback by dequantizing on the device, then one float32 matmul
    op = "scaled_mm" if bias is None else "scaled_mm_bias"
    with _or_computed_by_torch(op, config, out, lambda: mx_product_into(
            a, b, scale_a, scale_b, bias, out, layout=layout)):
        runner = _runner(out.device)
        from ...template_loader import load_template

        if out.numel() == 0:
            return
        name = template_of(op, config)
        load_template(name).launch(a, b, scale_a, scale_b, bias, out,
                                   _parse_config(config, name), runner=runner,
                                   layout=layout)


def scaled_mm_out(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                  scale_b: torch.Tensor, out: torch.Tensor, config: str) -> None:
    """``out = (a * 2^scale_a) @ (b * 2^scale_b)`` for MX operands (FP8/FP4 with E8M0
    scales per 32 K elements) with the MX template (gfx950)."""
    _mx_launch(a, b, scale_a, scale_b, None, out, config)


def scaled_mm_bias_out(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                       scale_b: torch.Tensor, bias: torch.Tensor, out: torch.Tensor,
                       config: str) -> None:
    """:func:`scaled_mm_out` plus a length-N bias."""
    _mx_launch(a, b, scale_a, scale_b, bias, out, config)


def gemm_epilogue_out(a: torch.Tensor, b: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor,
                      x2: torch.Tensor, x3: torch.Tensor, out: torch.Tensor, config: str,
                      epilogue: str) -> None:
    """``out = epilogue(a @ b, x0..)`` with the epilogue fused into the dense template's
    store (``epilogue_spec``; the operand slots past the epilogue's are ignored). The
    epilogue arrives as JSON and is validated before it reaches kernel generation."""
    extras = (x0, x1, x2, x3)[:_operand_count(epilogue)]
    key = ("gemm_epilogue", config, epilogue, out.device,
           *[(t.shape, t.stride(), t.dtype) for t in (a, b, out, *extras)])
    # the sources are the epilogue's own operands: generated code fills the unused slots
    # with another tensor (two sources at one address could not be bound)
    _dense("gemm_epilogue", config, (a, b, out, *extras), key, a, b, None, out, 1.0, 0.0,
           epilogue=(epilogue, extras))


@functools.cache
def _operand_count(epilogue: str) -> int:
    """How many of the four operand slots the epilogue (its JSON) reads; a text that does
    not parse counts four (the full path then refuses it)."""
    from ...problems.epilogue_spec import EpilogueSpec

    try:
        return len(EpilogueSpec.from_json(epilogue).operands)
    except (ValueError, TypeError, KeyError):
        return 4


def _epilogue_extras(spec, operands: tuple) -> list[torch.Tensor]:
    """The epilogue's operand tensors as the kernel takes them (a col or row operand
    flattened); the operand slots past the epilogue's are dropped."""
    return [t.reshape(-1) if o.kind in ("col", "row") else t
            for t, o in zip(operands, spec.operands, strict=False)]


def _reference_into(spec, a: torch.Tensor, b: torch.Tensor, extras: list,
                    out: torch.Tensor) -> None:
    """The epilogue's result in fp32 torch ops, into ``out`` (a call the kernel cannot
    take)."""
    from ...problems.epilogue_spec import reference

    out.copy_(reference(spec, a.float() @ b.float(), extras))


def _epilogue_launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: str,
                     epilogue: str, operands: tuple) -> None:
    from ...problems.epilogue_spec import EpilogueSpec
    from ...template_loader import load_template

    runner = _runner(out.device)
    spec = EpilogueSpec.from_json(epilogue)
    extras = _epilogue_extras(spec, operands)
    if out.numel() == 0:
        return
    name = template_of("gemm_epilogue", config)
    template = load_template(name)
    if _over_int32_span(template.MAX_SPAN_ELEMENTS, a, b, out, *extras):
        _reference_into(spec, a, b, extras, out)
        return
    template.launch(a, b, None, out, 1.0, 0.0, _parse_config(config, name),
                    epilogue=spec.text(),
                    extras=tuple(extras), runner=runner)


# op -> (schema, implementation). Registered with ``torch.library.Library`` rather than
# ``torch.library.custom_op``: the dispatcher then calls the implementation directly
# (about 2 us a call here, against 25-50 us for custom_op's Python wrapper layers),
# which is part of every launch's host time and of every benchmark Inductor runs.
SCHEMAS: dict[str, tuple[str, object]] = {
    "mm": ("mm_out(Tensor a, Tensor b, Tensor(a2!) out, str config, float alpha=1.) -> ()",
           mm_out),
    "addmm": ("addmm_out(Tensor bias, Tensor a, Tensor b, Tensor(a3!) out, str config, "
              "float alpha=1., float beta=1.) -> ()", addmm_out),
    "bmm": ("bmm_out(Tensor a, Tensor b, Tensor(a2!) out, str config, float alpha=1.) -> ()",
            bmm_out),
    "grouped_mm": ("grouped_mm_out(Tensor a, Tensor b, Tensor offs, Tensor(a3!) out, "
                   "str config) -> ()", grouped_mm_out),
    "scaled_mm": ("scaled_mm_out(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, "
                  "Tensor(a4!) out, str config) -> ()", scaled_mm_out),
    "scaled_mm_bias": ("scaled_mm_bias_out(Tensor a, Tensor b, Tensor scale_a, "
                       "Tensor scale_b, Tensor bias, Tensor(a5!) out, str config) -> ()",
                       scaled_mm_bias_out),
    "gemm_epilogue": ("gemm_epilogue_out(Tensor a, Tensor b, Tensor x0, Tensor x1, "
                      "Tensor x2, Tensor x3, Tensor(a6!) out, str config, str epilogue) -> ()",
                      gemm_epilogue_out),
}


def _nothing(*args: object, **kwargs: object) -> None:
    """The fake implementation of every op: a plain in-place op, nothing allocated."""
    return None


_LIBRARY = torch.library.Library(NAMESPACE, "DEF")
for _schema, _impl in SCHEMAS.values():
    _name = _schema.split("(", 1)[0]
    _LIBRARY.define(_schema)
    _LIBRARY.impl(_name, _impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{_name}", _nothing, lib=_LIBRARY)

# op -> the registered operator (tests, scripts, graphs generated by earlier versions)
OPS = {op: getattr(getattr(torch.ops, NAMESPACE), f"{op}_out").default for op in SCHEMAS}

# What generated code and Inductor's benchmark call: the implementations themselves, without
# torch's dispatcher (a Python-implemented op costs several microseconds of boxing per
# call; generated code calls an op on already-checked buffers, so nothing is lost).
# Generated code reaches them through the plugin's own module ``direct.py``, which it
# imports itself; nothing is set on ``torch``.


@functools.cache
def scalar_arguments(op: str) -> tuple[str, ...]:
    """The arguments ``op`` takes after its config, in order, read from its schema
    (``alpha``; ``alpha, beta``; ``epilogue``; none)."""
    schema = SCHEMAS[op][0]
    after = schema.split("str config", 1)[1].split(")", 1)[0]
    return tuple(part.split("=")[0].split()[-1] for part in after.split(",") if part.strip())


def direct_call(op: str) -> Callable[..., None]:
    """The function generated code calls for ``op`` (``direct.<op>_out``)."""
    return SCHEMAS[op][1]  # type: ignore[return-value]
