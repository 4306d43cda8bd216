"""Validate the performance model against published MI355X measurements of FlyDSL kernels.

The measured points are AMD AITER's tuned BF16 GEMM tables (``aiter/configs/
*bf16_tuned_gemm.csv`` of ROCm/aiter: microseconds per (M, N, K) on gfx950 with 256 CUs,
the best kernel among asm, hipBLASLt and FlyDSL) whose winner is a FlyDSL kernel: its
name gives the tile, stages, split-K and waves. Each such kernel is AITER's own FlyDSL
GEMM (``aiter/ops/flydsl/kernels/splitk_hgemm.py``) compiled for gfx950 on this machine
with the listed configuration, by a driver that imports AMD's source from a local clone;
nothing of AMD's is part of this project. The manifest (JSON) lists each compiled
config: its ``config`` (tile_m/n/k, stages, split_k, block_m/n/k_warps), its ISA files per
(N, K) (``isa`` for ``compiled_for``, ``isa/<id>__N<n>_K<k>.s`` for the others) and its
``rows`` (M, N, K, us, source_file).

For each row the model predicts from the kernel's own ISA (``profile_from_isa``: AITER's
kernels take no workgroup swizzle and add split-K partials with atomics in the output
dtype) on the MI355X spec; nothing in the model was fitted to these rows.

    python scripts/validate_performance_model.py --manifest DIR/manifest.json \\
        [--markdown docs-table.md] [--csv out.csv]

Prints the table (one line per row), the median absolute error, the worst ratio, the
share within 2x and Spearman's rank correlation within each (N, K) that has several
configs.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

from inductor_flydsl.performance.comparison import spearman
from inductor_flydsl.performance.devices import device_spec
from inductor_flydsl.performance.kernel_profile import profile_from_isa
from inductor_flydsl.performance.model import predict
from inductor_flydsl.performance.traffic import GemmShape


def _isa_for(entry: dict, n: int, k: int, base: Path) -> Path | None:
    built = entry["compiled_for"]
    if (built["N"], built["K"]) == (n, k):
        return Path(entry["isa"])
    for other in entry.get("other_NK_compiles", []):
        if (other["N"], other["K"]) == (n, k) and not other.get("error"):
            return base / "isa" / f"{other['id']}.s"
    return None


def _profiles(entry: dict, path: Path, cache: dict) -> object:
    if path not in cache:
        c = entry["config"]
        cache[path] = profile_from_isa(
            path.read_text(), "gfx950", tile_m=c["tile_m"], tile_n=c["tile_n"],
            tile_k=c["tile_k"], stages=c["stages"], group_m=1, split_k=c["split_k"],
            waves=c["block_m_warps"] * c["block_n_warps"] * c["block_k_warps"],
            split_k_reduction="atomic", source=path.name)
    return cache[path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--device", default="MI355X")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    entries = json.loads(args.manifest.read_text())
    device = device_spec(args.device)
    base = args.manifest.parent
    cache: dict = {}
    points = []
    skipped = 0
    for entry in entries:
        for row in entry["rows"]:
            if row.get("cu_num") != 256:
                continue
            m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
            path = _isa_for(entry, n, k, base)
            if path is None or not path.exists():
                skipped += 1
                continue
            profile = _profiles(entry, path, cache)
            shape = GemmShape(m, n, k, bias=str(row.get("bias")) == "True")
            p = predict(profile, shape, device)
            measured = float(row["us"])
            points.append({"config": entry["id"].removeprefix("aiter_"), "M": m, "N": n,
                           "K": k, "measured_us": measured, "predicted_us": round(p.us, 2),
                           "error": round(p.us / measured - 1, 3), "bound": p.bound,
                           "source": row["source_file"].rsplit("/", 1)[-1]})
    if not points:
        print("no points: check --manifest", file=sys.stderr)
        return 1
    errors = [abs(pt["error"]) for pt in points]
    ratios = [max(pt["predicted_us"] / pt["measured_us"], pt["measured_us"]
                  / pt["predicted_us"]) for pt in points]
    by_nk: dict[tuple[int, int], list[dict]] = {}
    for pt in points:
        by_nk.setdefault((pt["N"], pt["K"]), []).append(pt)
    rhos = [r for group in by_nk.values()
            if (r := spearman([g["measured_us"] for g in group],
                                       [g["predicted_us"] for g in group])) is not None]
    summary = {
        "points": len(points), "skipped_no_isa": skipped,
        "median_abs_error": round(statistics.median(errors), 3),
        "worst_ratio": round(max(ratios), 2),
        "within_2x": round(sum(r <= 2 for r in ratios) / len(ratios), 3),
        "over_prediction_share": round(sum(pt["error"] > 0 for pt in points) / len(points),
                                       3),
        "spearman_within_nk_median": round(statistics.median(rhos), 3) if rhos else None,
        "nk_groups_ranked": len(rhos),
    }
    columns = list(points[0])
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(points)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(pt[c]) for c in columns) + " |" for pt in points]
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    for line in lines:
        print(line)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
