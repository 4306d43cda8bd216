"""Predicted against measured: the model's time beside every FlyDSL time a sweep measured.

For every FlyDSL result (status ``ok``, with a time) recorded on a ROCm device whose arch
the model knows (gfx950, gfx942), the model predicts the same config on the same shape
(the problem rebuilt from its stored spec, its catalog figures as ``ranking.rank`` uses
them) on the :class:`DeviceSpec` of the recorded device: the one whose name the device's
name contains (``AMD Instinct MI300X``), else the arch's reference product. A device
whose compute-unit count differs from that spec's (a partitioned GPU) is predicted as
the whole product, and the row says so.

Per row: measured and predicted microseconds, ``error = predicted / measured - 1`` and the
bound; per problem (device, software, problem) Spearman's rank correlation between the
measured and the predicted times of its configs (3 or more predicted); overall the
points, median absolute error, worst ratio and median rank correlation. The measured time
is what the benchmark returned (``measured_ms``), else the time Inductor selected with.

Nothing here raises for a row: a config the catalog lacks, a shape the kernel cannot take
or a spec that no longer parses gives the row ``predicted_us = None`` and a ``note``.
Every predicted figure is a prediction (docs/performance-model.md).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..db.errors import DBError
from ..db.report_queries import flydsl_measurements
from .config_names import config_label
from .devices import DEFAULT_DEVICE, DEVICES, DeviceSpec

NO_MEASUREMENTS = ("No FlyDSL measurement on an MI300/MI350 (ROCm gfx942/gfx950) in this "
                   "DB: nothing to compare the model's predictions with.")
NO_CATALOG_ROW = "no prediction: the compile catalog has no figures for this config"
MIN_RANK_POINTS = 3
# a problem's catalog variant, (template, op, dtype, layout): which template serves an op
# is the backend's knowledge, handed in (``flydsl_backend/offer/offering.model_variant``)
VariantOf = Callable[[Any], tuple[str, str, str, str]]


@dataclass
class Comparison:
    """Every compared row, the per-problem rank correlations and the overall figures."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    overall: dict[str, Any] = field(default_factory=dict)
    note: str = NO_MEASUREMENTS  # the one line shown when there are no rows

    @property
    def empty(self) -> bool:
        return not self.rows

    def to_json(self) -> dict[str, Any]:
        if self.empty:
            return {"kind": "predicted", "points": 0, "note": self.note}
        return {"kind": "predicted", **self.overall, "problems": self.problems,
                "rows": self.rows}


# ---- statistics -----------------------------------------------------------------------
def average_ranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values``; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's over average ranks); None under
    ``MIN_RANK_POINTS`` points or when either side is constant."""
    if len(x) != len(y) or len(x) < MIN_RANK_POINTS:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return cov / math.sqrt(vx * vy)


# ---- devices and configs --------------------------------------------------------------
def model_device(arch: str, name: str, compute_units: int | None
                 ) -> tuple[DeviceSpec, str | None] | None:
    """The spec the model predicts a recorded device with, and a note when the recorded
    compute units differ from it; None for an arch the model does not know."""
    base = arch.split(":", 1)[0]
    if base not in DEFAULT_DEVICE:
        return None
    specs = [s for s in DEVICES.values() if s.arch == base]
    squashed = "".join(name.upper().split())
    named = sorted((s for s in specs if s.name in squashed), key=lambda s: -len(s.name))
    by_units = [s for s in specs if s.compute_units == compute_units]
    if named:
        spec = named[0]
    elif len(by_units) == 1:
        spec = by_units[0]
    else:
        spec = DEVICES[DEFAULT_DEVICE[base]]
    note = None
    if compute_units and compute_units != spec.compute_units:
        note = (f"device has {compute_units} CUs, predicted as a whole {spec.name} "
                f"({spec.compute_units})")
    return spec, note


def template_config(config: dict[str, Any]) -> dict[str, int]:
    """The template's own config fields of a recorded FlyDSL config (its integers:
    ``template``, ``template_hash``, ``epilogue`` are recorded beside them)."""
    return {k: v for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool)}


# ---- the comparison -------------------------------------------------------------------
def _measured_us(row: dict[str, Any]) -> float | None:
    for key in ("measured_ms", "time_ms"):
        value = row.get(key)
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            return float(value) * 1e3
    return None


class _Predictor:
    """Rebuilds each problem once and predicts its configs; failures become notes."""

    def __init__(self, variant_of: VariantOf, catalog: Path | None) -> None:
        self.variant_of = variant_of
        self.catalog = catalog
        self._problems: dict[str, Any] = {}

    def problem(self, problem_id: str, spec: str) -> Any:
        if problem_id not in self._problems:
            from ..problems.problem import Problem

            try:
                self._problems[problem_id] = Problem.from_spec(json.loads(spec))
            except (ValueError, TypeError) as exc:
                self._problems[problem_id] = f"no prediction: stored spec unreadable ({exc})"
        return self._problems[problem_id]

    def predict(self, row: dict[str, Any], spec: DeviceSpec, config: dict[str, Any]
                ) -> tuple[Any, str | None, str | None]:
        """(prediction or None, the catalog variant its figures came from, note)."""
        problem = self.problem(row["problem_id"], row["spec"])
        if isinstance(problem, str):
            return None, None, problem
        try:
            from .model import predict
            from .ranking import catalog_profile
            from .traffic import model_shape

            template, op, dtype, layout = self.variant_of(problem)
            found = catalog_profile(template_config(config), arch=spec.arch,
                                    template=template, op=op, dtype=dtype, layout=layout,
                                    catalog=self.catalog)
            if found is None:
                return None, None, NO_CATALOG_ROW
            profile, borrowed = found
            return predict(profile, model_shape(problem), spec), borrowed, None
        except Exception as exc:  # the model never fails the report: the row says why
            return None, None, f"no prediction: {type(exc).__name__}: {exc}"


def compare(db: Any, *, variant_of: VariantOf, catalog: Path | None = None) -> Comparison:
    """Predicted against measured for every FlyDSL time in ``db`` (a sqlite-utils
    Database) recorded on a ROCm device of an arch the model knows; ``variant_of`` gives
    a problem's catalog variant (the backend's ``offering.model_variant``)."""
    predictor = _Predictor(variant_of, catalog)
    rows: list[dict[str, Any]] = []
    try:
        measured = flydsl_measurements(db)
    except DBError as exc:  # a DB the report can read otherwise: say so, go on
        return Comparison(note=f"No comparison: the DB's results could not be read ({exc}).")
    for raw in measured:
        chosen = model_device(str(raw["arch"] or ""), str(raw["device_name"] or ""),
                              raw["compute_units"])
        measured_us = _measured_us(raw)
        if chosen is None or measured_us is None:
            continue
        spec, device_note = chosen
        try:
            config = json.loads(raw["config"] or "{}")
        except (json.JSONDecodeError, TypeError):
            config = {}
        config = config if isinstance(config, dict) else {}
        prediction, borrowed, note = predictor.predict(raw, spec, config)
        notes = [n for n in (note, device_note) if n]
        if "epilogue" in config and prediction is not None:
            notes.append("GEMM only: the fused epilogue is not modelled")
        if borrowed:
            notes.append(f"figures of {borrowed}")
        predicted_us = prediction.us if prediction is not None else None
        rows.append({
            "device": f"{raw['arch']} {raw['device_name']} ({raw['compute_units']})",
            "model_device": spec.name, "problem": raw["problem"],
            "config": config_label(config, str(raw["name"])), "candidate": raw["name"],
            "measured_us": measured_us, "predicted_us": predicted_us,
            "error": predicted_us / measured_us - 1 if predicted_us is not None else None,
            "bound": prediction.bound if prediction is not None else None,
            "figures_from": borrowed, "note": "; ".join(notes),
            "device_id": raw["device_id"], "software_id": raw["software_id"],
            "problem_id": raw["problem_id"], "candidate_id": raw["candidate_id"]})
    return summarize(rows)


def summarize(rows: list[dict[str, Any]]) -> Comparison:
    """The per-problem rank correlations and overall figures of compared ``rows``."""
    if not rows:
        return Comparison()
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["device_id"], row["software_id"], row["problem_id"]),
                          []).append(row)
    problems = []
    for members in groups.values():
        scored = [r for r in members if r["predicted_us"] is not None]
        rho = spearman([r["measured_us"] for r in scored], [r["predicted_us"] for r in scored])
        first = members[0]
        problems.append({
            "device": first["device"], "model_device": first["model_device"],
            "problem": first["problem"], "configs": len(members), "predicted": len(scored),
            "rank_correlation": rho,
            "median_abs_error": statistics.median(abs(r["error"]) for r in scored)
            if scored else None,
            "device_id": first["device_id"], "software_id": first["software_id"],
            "problem_id": first["problem_id"]})
    scored = [r for r in rows if r["predicted_us"] is not None]
    rhos = [p["rank_correlation"] for p in problems if p["rank_correlation"] is not None]
    overall: dict[str, Any] = {
        "points": len(scored), "no_prediction": len(rows) - len(scored),
        "median_abs_error": statistics.median(abs(r["error"]) for r in scored)
        if scored else None,
        "worst_ratio": None, "worst": None,
        "within_2x": sum(0.5 <= r["error"] + 1 <= 2 for r in scored),
        "median_rank_correlation": statistics.median(rhos) if rhos else None,
        "ranked_problems": len(rhos), "problems": len(problems)}
    if scored:
        worst = max(scored, key=lambda r: abs(math.log(r["error"] + 1)))
        overall["worst_ratio"] = worst["error"] + 1
        overall["worst"] = f"{worst['problem']}: {worst['config']}"
    return Comparison(rows=rows, problems=problems, overall=overall, note="")
