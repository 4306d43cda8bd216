"""What ``inductor-flydsl explain`` says of a GEMM: whether FlyDSL serves it and why not
(``flydsl_backend/offer/eligibility.py``), and the configs a compile would offer, in its order,
each with the model's prediction (``flydsl_backend/offer/offering.py``)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from ..flydsl_backend.offer.eligibility import arch_reasons, problem_reasons, runtime_reasons
from ..flydsl_backend.offer.offering import configs_per_problem, offer
from ..performance.config_names import config_key
from ..performance.ranking import device_for
from ..problems.problem import Problem


@dataclass
class Explanation:
    op: str
    problem: str
    arch: str
    eligible: bool
    reasons: list[str] = field(default_factory=list)
    configs: list[dict[str, int]] = field(default_factory=list)
    search_space: str = "DEFAULT"
    # with predictions in ``configs``: what they are (never measurements)
    model: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


FLYDSL_REQUIREMENT = "flydsl>=0.5,<0.6"  # pyproject.toml's (x86-64 Linux wheels only)
# what ``offered`` means, in the legend and the headline alike (``inductor/autotune/lookup.py``'s
# ``preselected``; the sweep sets INDUCTOR_FLYDSL_TOP_K=0, ``sweep/runner.py``)
OFFERED_TRUE = "benchmarked by a compile with no record (the model's top-k, INDUCTOR_FLYDSL_TOP_K)"
OFFERED_FALSE = ("never benchmarked by a compile with no record, offered only so that a "
                 "record of it is served (`inductor-flydsl sweep` measures every config)")


def flydsl_import_reason() -> str | None:
    """Why ``import flydsl`` fails in this Python, and how to fix it; None when it
    imports. Whatever the shape, FlyDSL serves nothing without it."""
    try:
        importlib.import_module("flydsl")
    except ModuleNotFoundError as exc:
        if exc.name == "flydsl":
            return (f"the flydsl package is not installed in this Python ({exc}): install "
                    f"it with pip install '{FLYDSL_REQUIREMENT}' (wheels for x86-64 Linux)")
        return (f"the flydsl package cannot be imported ({exc}): reinstall it with pip "
                f"install --force-reinstall '{FLYDSL_REQUIREMENT}'")
    except Exception as exc:  # a broken install raises whatever its modules raise
        return (f"the flydsl package cannot be imported ({type(exc).__name__}: {exc}): "
                f"reinstall it with pip install --force-reinstall '{FLYDSL_REQUIREMENT}'")
    return None


PREDICTION_KEYS = ("predicted_us", "tflops", "roofline_share", "bound", "offered",
                   "figures_from", "short_list")


def config_fields(entry: dict[str, Any]) -> dict[str, int]:
    """An explained config without its prediction: the template config itself."""
    return {k: v for k, v in entry.items() if k not in PREDICTION_KEYS}


def explained_configs(problem: Problem, arch: str, search_space: str) -> list[dict[str, Any]]:
    """The configs a compile offers, in its order (``offering.offer``, which ranks them
    once): with the performance model, each with its prediction and ``offered`` (True:
    benchmarked when no record exists; False: offered only so that a record of it is
    served, never benchmarked by a compile without one); without it, the pruned
    configs."""
    offered = offer(problem, arch, search_space=search_space, limit=configs_per_problem())
    if not offered.preselected or not offered.ranked:
        return [c.to_json() for c in offered.configs]
    by_key = {config_key(r.config.to_json()): r for r in offered.ranked}
    out = []
    for index, config in enumerate(offered.configs):
        row: dict[str, Any] = config.to_json()
        entry = by_key.get(config_key(row))
        p = entry.prediction if entry is not None else None
        row.update({"predicted_us": round(p.us, 2) if p else None,
                    "tflops": round(p.tflops, 1) if p else None,
                    "roofline_share": round(p.roofline_share, 2) if p else None,
                    "bound": p.bound if p else None,
                    "offered": index < offered.preselected})
        if entry is not None and entry.borrowed_from:
            row["figures_from"] = entry.borrowed_from
        if entry is not None and entry.stored:
            row["short_list"] = "shipped, predicted"
        out.append(row)
    return out


def explain(problem: Problem, arch: str, *, search_space: str = "DEFAULT",
            check_runtime: bool = False) -> Explanation:
    missing = flydsl_import_reason()
    reasons = [missing] if missing else []
    if check_runtime:  # its own "not installed" line says what ``missing`` says
        reasons += [r for r in runtime_reasons()
                    if not (missing and r.startswith("the flydsl package"))]
    reasons += arch_reasons(arch)
    reasons += problem_reasons(problem, arch=arch)
    configs = []
    if not reasons:
        configs = explained_configs(problem, arch, search_space)
        if not configs:
            reasons.append("no config of the search space fits this shape "
                           "(K must be a multiple of a tile_k that is <= K)")
    model = None
    if any("predicted_us" in c for c in configs):
        model = {"kind": "predicted", "device": device_for(arch).name,
                 "order": "the model's top-k (fastest predicted first), then the rest of "
                 "the pruned list", "offered": f"True: {OFFERED_TRUE}; False: {OFFERED_FALSE}",
                 "doc": "docs/performance-model.md"}
    return Explanation(op=problem.op, problem=problem.summary(), arch=arch,
                       eligible=not reasons, reasons=reasons, configs=configs,
                       search_space=search_space.upper(), model=model)
