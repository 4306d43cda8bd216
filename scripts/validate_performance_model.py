"""Validate the performance model against published MI355X measurements of FlyDSL kernels.

The measured points are AMD AITER's tuned GEMM tables (ROCm/aiter ``aiter/configs/``:
microseconds per (M, N, K) on gfx950 with 256 CUs, the best kernel among asm, hipBLASLt,
CK and FlyDSL, each timed as its profiler device time: ``aiter/test_common.py``'s
perftest) whose winner is a FlyDSL kernel whose name gives its configuration:

- BF16 (``*bf16_tuned_gemm.csv``): AITER's split-K HGEMM
  (``aiter/ops/flydsl/kernels/splitk_hgemm.py``), manifest from
  ``scripts/aiter_reference.py``;
- FP8 per-token/per-channel (``*a8w8_bpreshuffle*tuned_gemm*.csv``): AITER's preshuffle
  GEMM (``aiter/ops/flydsl/kernels/preshuffle_gemm.py``), manifest from
  ``scripts/aiter_fp8_reference.py`` (entries with ``"kernel": "fp8_preshuffle"``).

Each kernel is compiled for gfx950 on this machine from AMD's source in a local clone;
nothing of AMD's is part of this project. A manifest (JSON) lists each compiled config:
its ``config``, its ISA files per (N, K) (``isa`` for ``compiled_for``,
``isa/<id>__N<n>_K<k>.s`` for the others) and its ``rows`` (M, N, K, us, source_file).

For each row the model predicts from the kernel's own ISA (``profile_from_isa``) on the
MI355X spec in the ``kernel`` timing mode (a kernel's own duration, which is what AITER
publishes; ``--timing`` for another): split-K HGEMM takes no workgroup swizzle and adds
split-K partials with atomics in the output dtype; the preshuffle GEMM runs 4 waves,
walks M tiles fastest (grid x = M) and keeps ``lds_stage`` LDS stages. No row of these
tables set anything in the model (docs/performance-model.md says which rows did).

    python scripts/validate_performance_model.py --manifest DIR/manifest.json \\
        [--manifest FP8_DIR/manifest.json] [--markdown docs-table.md] [--csv out.csv]

Prints the table (one line per row), then a JSON summary: the median absolute error,
the worst ratio, the share within 2x, Spearman's rank correlation within each (N, K)
that has several configs, and the same figures per kernel family, per bound, per stage
count and for the fastest kernels (measured at most ``--fast-us``, 3.1 us by default).
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
from inductor_flydsl.performance.model import KERNEL_TIMING, MODEL_TIMINGS, predict
from inductor_flydsl.performance.traffic import GemmShape


def _isa_for(entry: dict, n: int, k: int, base: Path) -> Path | None:
    built = entry["compiled_for"]
    if (built["N"], built["K"]) == (n, k):
        return Path(entry["isa"])
    for other in entry.get("other_NK_compiles", []):
        if (other["N"], other["K"]) == (n, k) and not other.get("error"):
            return base / "isa" / f"{other['id']}.s"
    return None


FP8_PRESHUFFLE = "fp8_preshuffle"
M_FASTEST = 1 << 20  # a swizzle group taller than any grid: M tiles walk fastest


def _profiles(entry: dict, path: Path, cache: dict) -> object:
    if path not in cache:
        c = entry["config"]
        if entry.get("kernel") == FP8_PRESHUFFLE:
            # 4 waves; A through lds_stage LDS buffers, B straight to registers in the same
            # pipeline step (no deeper register prefetch); grid x is the M tiles
            cache[path] = profile_from_isa(
                path.read_text(), "gfx950", tile_m=c["tile_m"], tile_n=c["tile_n"],
                tile_k=c["tile_k"], stages=c["lds_stage"], group_m=M_FASTEST, waves=4,
                a_dtype="e4m3", source=path.name)
        else:
            cache[path] = profile_from_isa(
                path.read_text(), "gfx950", tile_m=c["tile_m"], tile_n=c["tile_n"],
                tile_k=c["tile_k"], stages=c["stages"], group_m=1, split_k=c["split_k"],
                waves=c["block_m_warps"] * c["block_n_warps"] * c["block_k_warps"],
                split_k_reduction="atomic", source=path.name)
    return cache[path]


def _stages_of(entry: dict) -> int:
    c = entry["config"]
    return int(c["lds_stage"] if entry.get("kernel") == FP8_PRESHUFFLE else c["stages"])


def _figures(points: list[dict]) -> dict:
    ratios = [pt["predicted_us"] / pt["measured_us"] for pt in points]
    worst = [max(r, 1 / r) for r in ratios]
    return {"points": len(points),
            "median_abs_error": round(statistics.median(abs(r - 1) for r in ratios), 3),
            "median_ratio": round(statistics.median(ratios), 3),
            "min_ratio": round(min(ratios), 2), "max_ratio": round(max(ratios), 2),
            "within_2x": round(sum(w <= 2 for w in worst) / len(worst), 3)}


def _grouped(points: list[dict], key: str) -> dict:
    groups: dict[object, list[dict]] = {}
    for pt in points:
        groups.setdefault(pt[key], []).append(pt)
    return {str(k): _figures(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}


def _points(manifest: Path, device: object, timing: str, cache: dict
            ) -> tuple[list[dict], int]:
    """(one point per 256-CU row of ``manifest`` whose ISA exists, rows without ISA)."""
    points = []
    skipped = 0
    for entry in json.loads(manifest.read_text()):
        for row in entry["rows"]:
            if row.get("cu_num") != 256:
                continue
            m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
            path = _isa_for(entry, n, k, manifest.parent)
            if path is None or not path.exists():
                skipped += 1
                continue
            profile = _profiles(entry, path, cache)
            shape = GemmShape(m, n, k, bias=str(row.get("bias")) == "True")
            p = predict(profile, shape, device, timing)
            measured = float(row["us"])
            points.append({"config": entry["id"].removeprefix("aiter_"),
                           "kernel": entry.get("kernel", "bf16_splitk"),
                           "stages": _stages_of(entry), "M": m, "N": n,
                           "K": k, "measured_us": measured, "predicted_us": round(p.us, 2),
                           "error": round(p.us / measured - 1, 3), "bound": p.bound,
                           "source": row["source_file"].rsplit("/", 1)[-1]})
    return points, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, action="append", required=True,
                        help="a manifest.json (repeatable: BF16 and FP8)")
    parser.add_argument("--device", default="MI355X")
    parser.add_argument("--timing", default=KERNEL_TIMING, choices=MODEL_TIMINGS,
                        help="the timing mode predicted (default kernel: a kernel's own "
                             "duration, as AITER's tables publish it)")
    parser.add_argument("--fast-us", type=float, default=3.1,
                        help="rows measured at most this many us are summarised apart")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args(argv)
    device = device_spec(args.device)
    cache: dict = {}
    points: list[dict] = []
    skipped = 0
    for manifest in args.manifest:
        found, missing = _points(manifest, device, args.timing, cache)
        points += found
        skipped += missing
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
    fast = [pt for pt in points if pt["measured_us"] <= args.fast_us]
    summary = {
        "points": len(points), "skipped_no_isa": skipped,
        "median_abs_error": round(statistics.median(errors), 3),
        "worst_ratio": round(max(ratios), 2),
        "within_2x": round(sum(r <= 2 for r in ratios) / len(ratios), 3),
        "over_prediction_share": round(sum(pt["error"] > 0 for pt in points) / len(points),
                                       3),
        "spearman_within_nk_median": round(statistics.median(rhos), 3) if rhos else None,
        "nk_groups_ranked": len(rhos), "timing": args.timing, "device": device.name,
        "by_kernel": _grouped(points, "kernel"), "by_bound": _grouped(points, "bound"),
        "by_stages": _grouped(points, "stages"),
        "fastest": {"max_measured_us": args.fast_us,
                    **(_figures(fast) if fast else {"points": 0})},
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
