"""A tuning DB as a report: winners, speedups, failures, compile catalog and coverage.

Speedup of a problem's winner is measured against a baseline taken from the same
problem's results (status ``ok``):

- ``aten/triton``: the faster of ATen and Triton, whenever the problem has an ATen or
  Triton result (on CPU that is ATen's ``_mkl_linear``). A winner that is itself ATen or
  Triton then has speedup 1.0;
- ``best non-winner``: when neither was measured, the fastest candidate other than the
  winner.

Geomeans are given per (device, family, baseline) only: speedups over different
baselines, on different devices, or of dense, grouped (mixture-of-experts,
``grouped_mm``) and scaled (MXFP8/MXFP4/FP8 ``scaled_mm``) GEMMs are not averaged
together; grouped GEMMs have their own table, one row per token routing they were
measured under, and so do scaled GEMMs.

Confidence (schema version 2): each winner is ``high``, ``low`` (measured on a busy machine,
or not separated from the runner-up beyond the noise) or unknown (recorded before version
2). The report counts the low-confidence winners, shows them in the winners tables flagged
``low (not in geomean)``, lists them again with the reason, and leaves them out of every
geomean (a note says how many were left out).

The ``baseline`` column says which was used. Coverage lists the problems recorded as
misses that still have no winner for the same device and software: shapes a shipped DB
silently lacks at run time.

Predicted against measured (``performance/comparison.py``): every FlyDSL time measured on
an MI300/MI350 beside the performance model's prediction for the same config and shape,
with the error and, per problem, Spearman's rank correlation; one line when the DB holds
no such measurement.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import pandas as pd
except ModuleNotFoundError as exc:  # the [report] extra: say how to get it
    raise ModuleNotFoundError(
        f"inductor_flydsl.report needs pandas and matplotlib ({exc.name} is missing): "
        "pip install pandas matplotlib (or, in a checkout of inductor-flydsl: pip install "
        "'.[report]')", name=exc.name) from exc

from .db import report_queries as queries
from .db.open import Database
from .performance.comparison import MIN_RANK_POINTS, Comparison, compare
from .performance.config_names import config_label
from .vllm_op_report import vllm_op_section, vllm_op_summary, vllm_op_table

BASELINE_ATEN_TRITON = "aten/triton"
BASELINE_NON_WINNER = "best non-winner"

PROBLEM_COLUMNS = [
    "device", "arch", "family", "problem", "op", "m", "n", "k", "batch", "dtype", "layout",
    "winner_backend", "winner", "winner_ms", "candidates", "ok_candidates", "baseline",
    "baseline_backend", "baseline_name", "baseline_ms", "speedup", "confidence",
    "winner_iqr_ms", "winner_repeats", "runner_up_ms", "confidence_reason", "problem_id",
    "device_id", "software_id", "torch"]


def _frame(table: queries.Table) -> pd.DataFrame:
    columns, rows = table
    return pd.DataFrame(rows, columns=columns)


def _device_label(row: Any) -> str:
    return f"{row['arch']} {row['device_name']} ({row['compute_units']})"


def geomean(values: pd.Series) -> float:
    finite = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    return math.exp(sum(math.log(v) for v in finite) / len(finite)) if finite else math.nan


def _baseline(group: pd.DataFrame, winner_candidate: str) -> tuple[str, pd.Series | None]:
    ok = group[(group["status"] == "ok") & group["time_ms"].notna()]
    if ok["backend"].isin(["aten", "triton"]).any():
        pool, kind = ok[ok["backend"].isin(["aten", "triton"])], BASELINE_ATEN_TRITON
    else:
        pool, kind = ok[ok["candidate_id"] != winner_candidate], BASELINE_NON_WINNER
    if pool.empty:
        return kind, None
    return kind, pool.sort_values(["time_ms", "candidate_id"]).iloc[0]


GROUPED_OPS = frozenset({"grouped_mm", "scaled_grouped_mm", "grouped_gemm"})


SCALED_OPS = frozenset({"scaled_mm", "scaled_mm_v2"})


def family_of(op: str) -> str:
    """``grouped`` for grouped (mixture-of-experts) GEMMs, ``scaled`` for scaled
    low-precision ones (MX block-scaled MXFP8/MXFP4, FP8), else ``dense``."""
    if op in GROUPED_OPS:
        return "grouped"
    return "scaled" if op in SCALED_OPS else "dense"


def problem_table(db: Database) -> pd.DataFrame:
    """One row per (device, software, problem) with a winner."""
    winners = _frame(queries.winners(db))
    if winners.empty:
        return pd.DataFrame(columns=PROBLEM_COLUMNS)
    results = _frame(queries.results(db))
    grouped = dict(list(results.groupby(["device_id", "software_id", "problem_id"])))
    rows = []
    for w in winners.to_dict("records"):
        key = (w["device_id"], w["software_id"], w["problem_id"])
        group = grouped.get(key, results.iloc[0:0])
        kind, base = _baseline(group, w["winner_candidate"])
        base_ms = float(base["time_ms"]) if base is not None else math.nan
        speedup = base_ms / w["winner_ms"] if base is not None and w["winner_ms"] else math.nan
        rows.append({**w, "device": _device_label(w), "family": family_of(w["op"]),
                     "candidates": len(group),
                     "ok_candidates": int((group["status"] == "ok").sum()),
                     "baseline": kind,
                     "baseline_backend": base["backend"] if base is not None else None,
                     "baseline_name": base["name"] if base is not None else None,
                     "baseline_ms": base_ms, "speedup": speedup})
    table = pd.DataFrame(rows)[PROBLEM_COLUMNS]
    return table.sort_values(["device", "op", "m", "n", "k", "problem"]).reset_index(drop=True)


@dataclass
class Report:
    db_path: str
    problems: pd.DataFrame
    wins: pd.DataFrame  # device, backend, wins
    geomeans: pd.DataFrame  # device, baseline, problems, geomean_speedup
    failed_candidates: pd.DataFrame
    catalog: pd.DataFrame
    misses: pd.DataFrame  # every missed problem with `tuned`
    sweep: pd.DataFrame  # device, status, items
    # the model's predictions beside the FlyDSL times measured on MI300/MI350
    comparison: Comparison = field(default_factory=Comparison)
    # the shipped predicted short lists' best config per shape, AITER's published best beside
    shipped_predictions: pd.DataFrame = field(default_factory=pd.DataFrame)
    # vLLM's own op against the winner, per problem that measured it (vllm_op_report.py)
    vllm_ops: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def low_confidence(self) -> pd.DataFrame:
        """Winners recorded low-confidence (noisy), listed apart in the report."""
        if self.problems.empty:
            return self.problems
        return self.problems[self.problems["confidence"] == "low"]

    @property
    def missed_untuned(self) -> pd.DataFrame:
        return self.misses[~self.misses["tuned"]] if not self.misses.empty else self.misses

    def coverage(self) -> dict[str, int]:
        missed = self.misses
        return {"problems_tuned": len(self.problems),
                "missed_problems": len(missed),
                "missed_now_tuned": int(missed["tuned"].sum()) if not missed.empty else 0,
                "missed_untuned": len(self.missed_untuned)}

    def summary(self) -> dict[str, Any]:
        groups = [{"device": r.device, "family": r.family, "baseline": r.baseline,
                   "problems": int(r.problems),
                   "geomean_speedup": None if math.isnan(r.geomean_speedup)
                   else float(r.geomean_speedup)} for r in self.geomeans.itertuples()]
        # one headline figure only when every problem shares a device and a baseline
        overall = groups[0]["geomean_speedup"] if len(groups) == 1 else None
        return {"db": self.db_path, "problems": len(self.problems),
                "geomean_speedup": overall, "geomeans": groups,
                "wins": {f"{r.device}|{r.backend}": int(r.wins)
                         for r in self.wins.itertuples()},
                "failed_candidates": len(self.failed_candidates),
                "low_confidence_winners": len(self.low_confidence),
                "confident_winners": int((self.problems["confidence"] == "high").sum())
                if not self.problems.empty else 0,
                "catalog_rows": int(self.catalog["configs"].sum())
                if not self.catalog.empty else 0,
                **self.coverage(),
                "predicted_vs_measured": self.comparison.to_json(),
                "vllm_ops": vllm_op_summary(self.vllm_ops),
                "shipped_predictions": self.shipped_predictions.to_dict("records")}


GEOMEAN_COLUMNS = ["device", "family", "baseline", "problems", "geomean_speedup"]
LOW_FLAG = "low (not in geomean)"


def geomean_table(problems: pd.DataFrame) -> pd.DataFrame:
    """Geomean speedup per (device, family, baseline) over the winners that are not
    low-confidence: a noisy winner's speedup is not a measurement to average."""
    counted = problems[problems["confidence"] != "low"]
    if counted.empty:
        return pd.DataFrame(columns=GEOMEAN_COLUMNS)
    return (counted.groupby(["device", "family", "baseline"])
            .agg(problems=("speedup", "size"), geomean_speedup=("speedup", geomean))
            .reset_index())[GEOMEAN_COLUMNS]


def build_report(db: Database, db_path: str = "") -> Report:
    problems = problem_table(db)
    if problems.empty:
        wins = pd.DataFrame(columns=["device", "backend", "wins"])
        geomeans = pd.DataFrame(columns=GEOMEAN_COLUMNS)
    else:
        wins = (problems.groupby(["device", "winner_backend"]).size()
                .reset_index(name="wins").rename(columns={"winner_backend": "backend"})
                .sort_values(["device", "wins", "backend"], ascending=[True, False, True]))
        geomeans = geomean_table(problems)
    failed = _frame(queries.failed_candidates(db))
    catalog = _frame(queries.catalog_summary(db))
    misses = _frame(queries.misses(db))
    if not misses.empty:
        misses["tuned"] = misses["tuned"].astype(bool)
    sweep = _frame(queries.sweep_summary(db))
    from .flydsl_backend.offer.offering import model_variant

    return Report(db_path=db_path, problems=problems, wins=wins, geomeans=geomeans,
                  failed_candidates=failed, catalog=catalog, misses=misses, sweep=sweep,
                  comparison=compare(db, variant_of=model_variant),
                  shipped_predictions=shipped_prediction_table(),
                  vllm_ops=vllm_op_table(problems, _frame(queries.results(db))))


SHIPPED_PREDICTION_COLUMNS = ["device", "label", "shape", "config", "predicted_us", "bound",
                              "aiter_best_us", "aiter_best_kernel", "aiter_source", "current"]


def shipped_prediction_table() -> pd.DataFrame:
    """Per shape of the shipped predicted short lists (``performance/short_lists.py``):
    the model's best config and its predicted time, and AITER's published best time for
    the shape where AITER's tuned tables have it (never a measurement of this project)."""
    from .performance.short_lists import shipped_stored_lists

    rows = [r for r in shipped_stored_lists() if r.get("rank") == 1]
    if not rows:
        return pd.DataFrame(columns=SHIPPED_PREDICTION_COLUMNS)
    return pd.DataFrame(rows)[SHIPPED_PREDICTION_COLUMNS]


def load_report(path: str | os.PathLike[str]) -> Report:
    from .db.open import open_db

    db = open_db(path, writable=False)
    try:
        return build_report(db, str(path))
    finally:
        db.close()


# ---- rendering ------------------------------------------------------------------------
def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame, columns: list[str] | None = None,
                   headers: list[str] | None = None) -> str:
    columns = columns or list(frame.columns)
    headers = headers or columns
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in frame[columns].itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def render_markdown(report: Report, plot_path: str | None = None) -> str:
    s = report.summary()
    geo = s["geomean_speedup"]
    out = [f"# Tuning report: `{report.db_path}`", "",
           f"- problems with a winner: **{s['problems']}**",
           f"- geomean speedup of the winner over its baseline: **{_headline(report, geo)}**",
           f"- candidates that failed (status != ok): {s['failed_candidates']}",
           f"- low-confidence winners (noisy): **{s['low_confidence_winners']}** of "
           f"{s['problems']} ({s['confident_winners']} confident, "
           f"{s['problems'] - s['confident_winners'] - s['low_confidence_winners']} unknown: "
           "recorded before confidence was measured)",
           f"- missed problems without a winner: **{s['missed_untuned']}** of "
           f"{s['missed_problems']} missed", "",
           "Baseline: `aten/triton` = the faster of ATen and Triton (whichever were "
           "measured); `best non-winner` = the fastest other candidate, when neither was.",
           ""]
    out += ["## Winners per problem", ""]
    if report.problems.empty:
        out += ["No winners recorded.", ""]
    else:
        flagged = report.problems.copy()
        flagged["confidence"] = flagged["confidence"].map(
            lambda c: LOW_FLAG if c == "low" else c)
        if s["low_confidence_winners"]:
            out += [f"{s['low_confidence_winners']} of {s['problems']} winners are "
                    f"low-confidence: shown flagged `{LOW_FLAG}`, listed with the reason "
                    "below, and left out of the geomean.", ""]
        out += [markdown_table(
            flagged[flagged["family"] == "dense"],
            ["device", "problem", "winner_backend", "winner", "winner_ms", "baseline",
             "baseline_backend", "baseline_ms", "speedup", "candidates", "confidence",
             "winner_iqr_ms"],
            ["device", "problem", "backend", "winner", "winner ms", "baseline",
             "baseline backend", "baseline ms", "speedup", "candidates", "confidence",
             "IQR ms"]), ""]
        out += _grouped_section(flagged[flagged["family"] == "grouped"])
        out += _scaled_section(flagged[flagged["family"] == "scaled"])
        out += _noisy_section(report)
        out += vllm_op_section(report.vllm_ops, markdown_table)
        out += ["## Wins per backend", "", markdown_table(report.wins), ""]
        out += ["## Geomean speedup", ""]
        if report.geomeans.empty:
            out += ["No geomean: every winner is low-confidence (noisy). Re-measure them "
                    "on a quiet machine with `inductor-flydsl sweep --remeasure-noisy`.", ""]
        else:
            out += [markdown_table(report.geomeans), ""]
        if s["low_confidence_winners"] and not report.geomeans.empty:
            out += [f"Left out of the geomean: {s['low_confidence_winners']} low-confidence "
                    "winner(s).", ""]
    if plot_path:
        out += [f"![speedup per problem]({plot_path})", ""]
    out += ["## Candidates that failed validation or compilation", ""]
    if report.failed_candidates.empty:
        out += ["None.", ""]
    else:
        failed = report.failed_candidates.copy()
        failed["error"] = failed["error"].fillna("").map(
            lambda e: (e.strip().splitlines() or [""])[0][:100])
        out += [markdown_table(failed, ["arch", "problem", "backend", "name", "status",
                                        "error"]), ""]
    if not report.catalog.empty:
        out += ["## FlyDSL compile catalog", "", markdown_table(report.catalog), ""]
    out += _predicted_section(report.comparison)
    out += _shipped_predictions_section(report.shipped_predictions)
    cov = report.coverage()
    out += ["## Coverage", "",
            f"- problems tuned (winners): {cov['problems_tuned']}",
            f"- problems recorded as misses: {cov['missed_problems']} "
            f"({cov['missed_now_tuned']} tuned since, {cov['missed_untuned']} still untuned)",
            ""]
    if not report.missed_untuned.empty:
        out += ["Missed problems with no winner (tune them with "
                "`inductor-flydsl sweep --from-misses`):", "",
                markdown_table(report.missed_untuned,
                               ["arch", "problem", "count", "last_seen", "problem_id"]), ""]
    if not report.sweep.empty:
        out += ["## Sweep status", "", markdown_table(report.sweep), ""]
    return "\n".join(out)


def _headline(report: Report, geo: float | None) -> str:
    if geo is not None:
        return f"{geo:.3f}x"
    if report.geomeans.empty and not report.problems.empty:
        return "none: every winner is low-confidence"
    return "see per device and baseline below"


_FAMILY_COLUMNS = (["device", "problem", "winner_backend", "winner", "winner_ms",
                    "baseline_backend", "baseline_ms", "speedup", "candidates", "confidence"],
                   ["device", "problem", "backend", "winner", "winner ms", "baseline backend",
                    "baseline ms", "speedup", "candidates", "confidence"])


def _family_section(title: str, intro: str, rows: pd.DataFrame) -> list[str]:
    """A family's winners in their own table (nothing when it has none)."""
    if rows.empty:
        return []
    return [f"## {title}", "", intro, "", markdown_table(rows, *_FAMILY_COLUMNS), ""]


def _grouped_section(grouped: pd.DataFrame) -> list[str]:
    """Grouped (MoE) GEMM winners apart from dense ones: G groups over T tokens, one row
    per token routing measured (the plugin serves the best worst case over them)."""
    return _family_section(
        "Grouped GEMM (mixture-of-experts) winners",
        "Problems are `G x T x N x K` (G groups over T routed tokens); `routing=` names the "
        "token routing a sweep benchmarked (none: Inductor's near-uniform split). A compile "
        "is served the candidate with the best worst case over the routings recorded.",
        grouped)


def _scaled_section(scaled: pd.DataFrame) -> list[str]:
    """Scaled low-precision GEMM winners (MXFP8/MXFP4 block-scaled, FP8) apart from the
    bf16/fp16 ones: their speedups are over ATen's scaled GEMM, not over a dense one."""
    return _family_section(
        "Scaled GEMM (MXFP8 / MXFP4 / FP8) winners",
        "`scaled_mm` problems: the operands' element dtypes and the scales' dtype and shape "
        "are part of the key (E8M0 scales per 32 K elements: MX). Speedups are over ATen's "
        "`_scaled_mm` and counted in their own geomean.",
        scaled)


def _noisy_section(report: Report) -> list[str]:
    noisy = report.low_confidence
    if noisy.empty:
        return []
    return ["## Low-confidence winners (noisy)", "",
            "Measured on a busy machine, or not separated from the runner-up beyond the "
            "noise; a confident measurement replaces them "
            "(`inductor-flydsl sweep --remeasure-noisy`).", "",
            markdown_table(noisy, ["device", "problem", "winner_backend", "winner",
                                   "winner_ms", "winner_iqr_ms", "runner_up_ms",
                                   "confidence_reason"],
                           ["device", "problem", "backend", "winner", "winner ms",
                            "IQR ms", "runner-up ms", "why"]), ""]


PREDICTED_TITLE = "## Predicted (model) against measured: FlyDSL on MI300/MI350"
PREDICTED_COLUMNS = ["device", "model_device", "problem", "config", "candidate",
                     "measured_us", "predicted_us", "error", "bound", "figures_from", "note",
                     "device_id", "software_id", "problem_id", "candidate_id"]


def predicted_frame(comparison: Comparison) -> pd.DataFrame:
    """One row per compared FlyDSL result: measured and predicted microseconds, error."""
    if comparison.empty:
        return pd.DataFrame(columns=PREDICTED_COLUMNS)
    frame = pd.DataFrame(comparison.rows)[PREDICTED_COLUMNS]
    return frame.sort_values(["device", "problem", "measured_us", "config"]
                             ).reset_index(drop=True)


def _fraction(value: float | None, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}x"


def _predicted_section(comparison: Comparison) -> list[str]:
    """Every FlyDSL time measured on an MI300/MI350 beside the model's prediction."""
    out = [PREDICTED_TITLE, ""]
    if comparison.empty:
        return [*out, comparison.note, ""]
    o = comparison.overall
    mae = o["median_abs_error"]
    rho = o["median_rank_correlation"]
    out += ["Predicted figures are the performance model's **predictions** "
            "(docs/performance-model.md), never measurements: error = predicted / measured "
            "- 1; rank correlation = Spearman's between a problem's measured and predicted "
            f"times over its configs ({MIN_RANK_POINTS} or more predicted).", "",
            f"- points: **{o['points']}** predicted against measured"
            + (f" ({o['no_prediction']} with no prediction)" if o["no_prediction"] else ""),
            "- median absolute error: **" + ("-" if mae is None else f"{mae:.1%}") + "**",
            f"- worst ratio (predicted / measured): **{_ratio(o['worst_ratio'])}**"
            + (f" ({o['worst']})" if o["worst"] else "")
            + f"; {o['within_2x']} of {o['points']} within 2x",
            "- median rank correlation: **" + ("-" if rho is None else f"{rho:.3f}")
            + f"** over {o['ranked_problems']} of {o['problems']} problems", ""]
    problems = pd.DataFrame(comparison.problems)
    problems["median_abs_error"] = problems["median_abs_error"].map(_fraction)
    out += [markdown_table(problems, ["device", "model_device", "problem", "configs",
                                      "predicted", "rank_correlation", "median_abs_error"],
                           ["device", "model (predicted for)", "problem", "configs",
                            "predicted", "rank correlation", "median abs error"]), ""]
    rows = predicted_frame(comparison)
    rows["predicted_us"] = rows["predicted_us"].map(
        lambda v: "no prediction" if v is None or (isinstance(v, float) and math.isnan(v))
        else f"{v:.4g}")
    rows["error"] = rows["error"].map(lambda v: _fraction(v, signed=True))
    out += [markdown_table(rows, ["device", "problem", "config", "measured_us",
                                  "predicted_us", "error", "bound", "note"],
                           ["device", "problem", "config", "measured us",
                            "predicted us (model)", "error", "bound", "note"]), ""]
    return out


def _shipped_predictions_section(table: pd.DataFrame) -> list[str]:
    if table.empty:
        return []
    shown = table.copy()
    shown["config"] = shown["config"].map(lambda text: config_label(json.loads(text), text))
    shown["predicted_us"] = shown["predicted_us"].map(lambda v: f"{v:.4g}")
    shown["aiter_best_kernel"] = shown["aiter_best_kernel"].map(
        lambda k: k if not isinstance(k, str) or len(k) <= 40 else k[:37] + "...")
    with_aiter = int(shown["aiter_best_us"].notna().sum())
    stale = int((~shown["current"].astype(bool)).sum())
    shown["current"] = shown["current"].map(lambda c: "" if c else "STALE (not used)")
    return ["## Predicted short lists shipped with the package (PREDICTED, not measured)", "",
            f"The performance model's best config per reference shape on "
            f"{', '.join(sorted(set(shown['device'])))} (`tuning_db/mi355x_predicted.db`: a "
            "compile with no record offers these configs first; never served as timings), "
            f"beside AITER's published best time for the shape (any kernel; {with_aiter} of "
            f"{len(shown)} shapes), with its source."
            + (f" {stale} rows were written by another model or catalog: stale, never "
               "used (rebuild with scripts/build_predicted_db.py)." if stale else ""), "",
            markdown_table(shown, SHIPPED_PREDICTION_COLUMNS,
                           ["device", "shape label", "shape", "best predicted config",
                            "predicted us (model)", "bound", "AITER published us",
                            "AITER kernel", "source", "note"]), ""]


def speedup_figure(report: Report) -> Any:
    """Horizontal bars: winner speedup over its baseline per problem, coloured by the
    winning backend, low-confidence winners hatched. The legend sits outside the axes, to
    the right, so it never covers a bar or its label (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    data = report.problems[report.problems["speedup"].notna()]
    multi_device = data["device"].nunique() > 1
    labels = [f"{r.problem} [{r.arch}]" if multi_device else r.problem
              for r in data.itertuples()]
    backends = sorted(data["winner_backend"].unique()) if not data.empty else []
    palette = plt.get_cmap("tab10")
    colors = {b: palette(i % 10) for i, b in enumerate(backends)}
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.35 * len(data) + 1.5)))
    if data.empty:
        ax.text(0.5, 0.5, "no problem with a baseline", ha="center", va="center")
        ax.set_axis_off()
        return fig
    low = (data["confidence"] == "low").tolist()
    speedups = data["speedup"].astype(float).tolist()
    ax.barh(range(len(data)), speedups, color=[colors[b] for b in data["winner_backend"]],
            hatch=["//" if is_low else "" for is_low in low], edgecolor="white")
    ax.set_yticks(range(len(data)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=0.8)
    smallest, largest = min(speedups), max(speedups)
    if largest > 10 * max(smallest, 1e-9):
        ax.set_xscale("log")  # noisy outliers would flatten every other bar
        ax.set_xlim(max(smallest, 1e-9) / 1.5, largest * 3)  # room for the value labels
    else:
        ax.set_xlim(0, max(largest, 1.0) * 1.2)
    for y, (value, is_low) in enumerate(zip(speedups, low, strict=True)):
        ax.text(value, y, f" {value:.3g}x" + (" (low)" if is_low else ""), va="center",
                fontsize=7)
    ax.set_xlabel("speedup of the winner over its baseline (x)")
    kinds = ", ".join(sorted(data["baseline"].unique()))
    ax.set_title(f"Winner speedup per problem (baseline: {kinds})", fontsize=10)
    handles = [Patch(color=colors[b], label=b) for b in backends]
    if any(low):
        handles.append(Patch(facecolor="lightgrey", hatch="//", edgecolor="dimgrey",
                             label="low confidence\n(not in geomean)"))
    ax.legend(handles=handles, title="winner", fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def plot_speedup(report: Report, path: str | os.PathLike[str]) -> Path:
    """:func:`speedup_figure` as a PNG at ``path`` (its folder is created)."""
    import matplotlib.pyplot as plt

    out = Path(path)
    fig = speedup_figure(report)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return out


def predicted_csv_path(path: str | os.PathLike[str]) -> Path:
    """Where :func:`write_csv` puts the predicted-against-measured rows: ``report.csv``
    -> ``report.predicted.csv``."""
    out = Path(path)
    return out.with_name(f"{out.stem}.predicted{out.suffix or '.csv'}")


def write_csv(report: Report, path: str | os.PathLike[str]) -> list[Path]:
    """The per-problem table at ``path`` and, when the DB holds FlyDSL times measured on
    an MI300/MI350, the predicted-against-measured rows beside it
    (:func:`predicted_csv_path`). Returns the files written."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    report.problems.to_csv(path, index=False)
    written = [Path(path)]
    if not report.comparison.empty:
        predicted = predicted_csv_path(path)
        predicted_frame(report.comparison).to_csv(predicted, index=False)
        written.append(predicted)
    return written
