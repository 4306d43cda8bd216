"""The template registry: what each FlyDSL template is and does, in one spec.

A :class:`TemplateSpec` says which problems a template serves (and how: a choice in
Inductor's GEMM selections, or an eager op override), which custom op launches its
kernels, its config space (DEFAULT and EXHAUSTIVE lists, the one config compiled for
every non-main variant), its eligibility, the configs it offers a problem, the catalog
variant the performance model is told about, the emulator driver that checks a compiled
kernel, and the sweep's item kind that exercises it. The backend asks the registry
instead of branching on template or op names: offering (``offering.py``), the provider,
the choice classes, the compile catalog (``compile-check``), the emulator's checks and
the launch (which template a config names) all look a spec up here.

The shipped templates' specs are the modules of this package (:data:`BUILTIN`, each its
``SPEC``); a package named in ``INDUCTOR_FLYDSL_TEMPLATE_PACKAGES`` adds its own (its
``TEMPLATE_SPECS`` list; its kernel modules are found by ``template_loader``): a new
template is one spec plus its kernel file. A package that does not load is warned about
once and skipped (the shipped templates are still offered); one template name declared
twice is refused. Specs are loaded by module name on first use, so this module imports
nothing of the backend (the layer test sees no arrow up).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ... import settings

if TYPE_CHECKING:
    from ...problems.problem import Problem
    from ..cross_compile import CompileResult

# how a template serves its ops
CHOICE = "choice"  # a choice in Inductor's selections (autotuned, recorded)
EAGER_OVERRIDE = "eager_override"  # an eager op override (torch._native), dispatched by gate

BUILTIN = ("inductor_flydsl.flydsl_backend.specs.gemm_dense",
           "inductor_flydsl.flydsl_backend.specs.gemm_grouped",
           "inductor_flydsl.flydsl_backend.specs.gemm_mx")


class UnknownTemplate(ValueError):
    """A template name no spec registers (a DB row, a config text or an argument)."""


@dataclass(frozen=True)
class TemplateSpec:
    """One template: every fact the backend needs about it, as data and callables.

    ``serves(problem)`` says whether the template computes ``problem`` at all (its op and
    operand kinds); ``reasons(problem, offsets=, arch=)`` why it cannot take this one
    (empty: eligible); ``configs(problem, arch, search_space, limit)`` the configs it
    offers, best first before the model; ``model_variant(problem)`` the ``(op, dtype,
    layout)`` of the catalog rows that describe its kernels for ``problem`` (what the
    performance model ranks by); ``launch_variant(op, problem, epilogue)`` the
    ``(dtype, layout, op)`` a custom op's call builds; ``kernel_op(selection, problem,
    inputs)`` which custom op (``direct.<op>_out``) a selection's choice launches;
    ``search_space(name)`` the configs of ``DEFAULT``/``EXHAUSTIVE`` before the resource
    model; ``representative()`` the config compiled once for every non-main variant;
    ``emulate(result, seed)`` the emulator's verdict on a compiled kernel; ``sweep_ops``
    the sweep item ops whose selections it competes in."""

    name: str
    serves_as: str
    selections: tuple[str, ...]
    custom_ops: tuple[str, ...]
    main_variant: tuple[str, str, str]  # (dtype, layout, op): every config compiled
    serves: Callable[[Problem], bool]
    reasons: Callable[..., list[str]]
    configs: Callable[[Problem, str, str, int], list[Any]]
    model_variant: Callable[[Problem], tuple[str, str, str]]
    launch_variant: Callable[[str, Problem, str], tuple[str, str, str]]
    kernel_op: Callable[[str, Problem, int], str]
    search_space: Callable[[str], list[Any]]
    representative: Callable[[], Any]
    emulate: Callable[[CompileResult, int], dict[str, Any]]
    resource_reasons: Callable[[Any, str, str], list[str]]  # (config, dtype, arch)
    sweep_ops: tuple[str, ...] = ()
    # an arch the template has no kernels for is still listed by compile-check, rejected
    # with the reason (MX on gfx942: no scaled MFMAs), when it is one of these
    listed_archs: tuple[str, ...] = field(default=())
    # compile-check: the configs of ``space`` a (dtype) variant compiles (default: all),
    # and whether a variant is a main one (all its configs compiled; default: only
    # ``main_variant``)
    variant_configs: Callable[[list[Any], str], list[Any]] | None = None
    is_main_variant: Callable[[str, str, str], bool] | None = None

    def configs_of_variant(self, space: list[Any], dtype: str) -> list[Any]:
        return space if self.variant_configs is None else self.variant_configs(space, dtype)

    def main(self, dtype: str, layout: str, op: str) -> bool:
        if self.is_main_variant is not None:
            return self.is_main_variant(dtype, layout, op)
        return (dtype, layout, op) == self.main_variant

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"template spec name {self.name!r} is not an identifier")
        if self.serves_as not in (CHOICE, EAGER_OVERRIDE):
            raise ValueError(f"template {self.name}: serves_as must be {CHOICE!r} or "
                             f"{EAGER_OVERRIDE!r}, not {self.serves_as!r}")


_lock = threading.Lock()
_by_module: dict[str, list[TemplateSpec]] = {}  # the specs each loaded module declared


def _load(module_name: str, attribute: str) -> list[TemplateSpec]:
    module = importlib.import_module(module_name)
    found = getattr(module, attribute, None)
    if found is None:
        raise ImportError(f"{module_name} has no {attribute}")
    specs = list(found) if isinstance(found, (list, tuple)) else [found]
    bad = [s for s in specs if not isinstance(s, TemplateSpec)]
    if bad:
        raise TypeError(f"{module_name}.{attribute} holds {bad[0]!r}, not a TemplateSpec")
    return specs


def _modules() -> list[str]:
    """The spec modules in force: the built-in ones, then every package the setting names
    now (a package named earlier in this process and no longer is not consulted)."""
    return [*BUILTIN, *settings.TEMPLATE_PACKAGES.value()]


def _ensure_loaded(modules: list[str]) -> None:
    """Load the specs of ``modules`` not loaded yet (once per module)."""
    with _lock:
        for module_name in modules:
            if module_name in _by_module:
                continue
            attribute = "SPEC" if module_name in BUILTIN else "TEMPLATE_SPECS"
            try:
                _by_module[module_name] = _load(module_name, attribute)
            except Exception as exc:
                if module_name in BUILTIN:
                    raise
                # a user's template package that does not load: its templates are not
                # offered (said once), the shipped ones are (never a failed compile)
                from ...telemetry.user_warnings import warn_once

                warn_once(f"template-package:{module_name}",
                          f"inductor_flydsl: template package {module_name} "
                          f"(INDUCTOR_FLYDSL_TEMPLATE_PACKAGES) not loaded: "
                          f"{type(exc).__name__}: {exc}")
                _by_module[module_name] = []


def specs() -> tuple[TemplateSpec, ...]:
    """Every spec in force, the shipped templates first; a template name declared twice
    is a ValueError."""
    modules = _modules()
    _ensure_loaded(modules)
    found: dict[str, TemplateSpec] = {}
    for module_name in modules:
        for spec in _by_module[module_name]:
            if found.setdefault(spec.name, spec) is not spec:
                raise ValueError(f"template {spec.name!r} is registered twice "
                                 f"({module_name} declares it again)")
    return tuple(found.values())


def names() -> tuple[str, ...]:
    return tuple(s.name for s in specs())


def spec(name: str) -> TemplateSpec:
    """The spec of template ``name`` (:class:`UnknownTemplate` if none)."""
    found = {s.name: s for s in specs()}
    if name not in found:
        raise UnknownTemplate(f"unknown template {name!r}; use one of {', '.join(found)}")
    return found[name]


def serving(problem: Problem) -> list[TemplateSpec]:
    """The Inductor-choice specs that compute ``problem``, in registration order."""
    return [s for s in specs() if s.serves_as == CHOICE and s.serves(problem)]


def selections() -> tuple[str, ...]:
    """Every Inductor selection some template offers choices to."""
    return tuple(dict.fromkeys(n for s in specs() if s.serves_as == CHOICE
                               for n in s.selections))


def for_custom_op(op: str) -> list[TemplateSpec]:
    """The specs whose kernels the custom op ``op`` launches."""
    return [s for s in specs() if op in s.custom_ops]


def primary(problem: Problem) -> TemplateSpec:
    """The first spec that computes ``problem`` (the shipped template of its op), for
    callers that describe a problem by one template (``explain``, ``predict``)."""
    found = serving(problem)
    if not found:
        raise UnknownTemplate(f"no template computes {getattr(problem, 'op', problem)!r}")
    return found[0]
