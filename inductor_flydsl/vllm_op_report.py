"""The report's table of vLLM's own GEMM ops against the winners of their selections.

Under vLLM with the plugin on, each static ``vllm::rocm_unquantized_gemm`` is one
selection with vLLM's op among its choices (``inductor/vllm/vllm_choices.py``, backend
``vllm``). Per such problem: vLLM's measured time, the winner and its time, and how much
slower vLLM's hand-written dispatch is there (``vllm / winner``: 1.0 where it won).
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is the [report] extra: imported where a table is made
    import pandas as pd

VLLM_BACKEND = "vllm"
COLUMNS = ["device", "problem", "vllm_ms", "winner_backend", "winner", "winner_ms",
           "vllm_over_winner", "confidence"]


def vllm_op_table(problems: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """One row per problem with a winner and an ok result of vLLM's op."""
    import pandas as pd

    if problems.empty or results.empty:
        return pd.DataFrame(columns=COLUMNS)
    ours = results[(results["backend"] == VLLM_BACKEND) & (results["status"] == "ok")
                   & results["time_ms"].notna()]
    if ours.empty:
        return pd.DataFrame(columns=COLUMNS)
    fastest = ours.groupby(["device_id", "software_id", "problem_id"])["time_ms"].min()
    rows = []
    for row in problems.to_dict("records"):
        vllm_ms = fastest.get((row["device_id"], row["software_id"], row["problem_id"]))
        if vllm_ms is None or not row["winner_ms"]:
            continue
        rows.append({**{k: row[k] for k in ("device", "problem", "winner_backend", "winner",
                                            "winner_ms", "confidence")},
                     "vllm_ms": float(vllm_ms),
                     "vllm_over_winner": float(vllm_ms) / float(row["winner_ms"])})
    return pd.DataFrame(rows, columns=COLUMNS)


def vllm_op_summary(table: pd.DataFrame) -> dict[str, Any]:
    if table.empty:
        return {"problems": 0, "vllm_wins": 0, "geomean_vllm_over_winner": None}
    ratios = [v for v in table["vllm_over_winner"] if math.isfinite(v) and v > 0]
    geo = statistics.geometric_mean(ratios) if ratios else None
    return {"problems": len(table),
            "vllm_wins": int((table["winner_backend"] == VLLM_BACKEND).sum()),
            "geomean_vllm_over_winner": geo}


def vllm_op_section(table: pd.DataFrame, markdown_table: Any) -> list[str]:
    """The report's section (nothing when no problem has a result of vLLM's op)."""
    if table.empty:
        return []
    s = vllm_op_summary(table)
    geo = s["geomean_vllm_over_winner"]
    return ["## vLLM's own GEMM op against the winner", "",
            "Selections made from vLLM's `rocm_unquantized_gemm` (vLLM's hand-written "
            "dispatch: its skinny kernels, AITER's GEMMs or `F.linear`) with vLLM's op as one "
            f"choice. vLLM's op won **{s['vllm_wins']}** of {s['problems']}; where it lost, "
            "`vllm / winner` is how much slower it is (geomean over all: "
            + ("-" if geo is None else f"{geo:.3f}x") + ").", "",
            markdown_table(table, COLUMNS, ["device", "problem", "vLLM ms", "winner backend",
                                            "winner", "winner ms", "vllm / winner",
                                            "confidence"]), ""]
