"""Our fastest offered config against AMD's FlyDSL split-K HGEMM, both predicted by the model.

For every shape where AITER's tuner picked its FlyDSL kernel on MI355X (gfx950, 256 CUs,
no bias, bf16 out: ``aiter/configs/**/*bf16_tuned_gemm.csv`` of ROCm/aiter) among

* the shipped predicted short lists' reference shapes (``scripts/build_predicted_db.py``:
  the dense suite and the Llama-3 / Mixtral linear layers), and
* small-N, large-K decode shapes (MoE experts, attention projections: ``EXTRA_SHAPES``),

AMD's winning kernel (``aiter/ops/flydsl/kernels/splitk_hgemm.py`` with the configuration
its name gives) is cross-compiled here for that (N, K) (``scripts/aiter_reference.py
compile``, imported from the user's clone, never copied; ISA cached under ``--out``) and
predicted from its own ISA; ours is the best predicted config among those a compile
offers (the pruned DEFAULT candidates, ranked by the model from the shipped catalog).
Both go through the same model and device, so the model's bias cancels in the ratio.

    python scripts/decode_comparison.py --aiter-git AITER_GIT --out DIR \\
        [--timing graph|eager] [--markdown FILE] [--json FILE]

Prints one line per shape (ours, AMD's, ours / AMD's, AITER's measured time of AMD's
kernel) and the geomean of the ratio for M <= 64 and for M >= 128. Every time is a
PREDICTION except the ``aiter_measured_us`` column (AMD's published measurement).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from aiter_reference import (  # noqa: E402
    REFERENCE_COMMIT,
    AiterGit,
    config_from_name,
    config_id,
)
from build_predicted_db import (  # noqa: E402
    fastest_rows,
    is_bf16_tuned_table,
    reference_problems,
)

from inductor_flydsl.flydsl_backend.offer.offering import (  # noqa: E402
    MAX_CANDIDATES,
    model_variant,
    pruned_configs,
)
from inductor_flydsl.performance.config_names import config_label  # noqa: E402
from inductor_flydsl.performance.devices import device_spec  # noqa: E402
from inductor_flydsl.performance.kernel_profile import profile_from_isa  # noqa: E402
from inductor_flydsl.performance.model import predict  # noqa: E402
from inductor_flydsl.performance.ranking import rank  # noqa: E402
from inductor_flydsl.performance.traffic import GemmShape, model_shape  # noqa: E402
from inductor_flydsl.problems.problem import synthetic_problem  # noqa: E402
from inductor_flydsl.provenance.timing_modes import GRAPH, check_timing_mode  # noqa: E402

ARCH, DEVICE = "gfx950", "MI355X"
DECODE_MAX_M = 64
# Small N, large K at decode (issue 43): MoE expert and attention projections.
EXTRA_SHAPES = ((1, 64, 7168), (32, 128, 6144), (4, 256, 6144), (64, 512, 7168))


def aiter_winners(repo: AiterGit) -> dict[tuple[int, int, int], dict[str, object]]:
    """AITER's fastest gfx950 / 256-CU row per (M, N, K) (no bias, bf16 out)."""
    best = fastest_rows((rel, repo.show(rel)) for rel in repo.files()
                        if is_bf16_tuned_table(rel))
    return {key: {"us": us, "kernel": row.get("kernelName") or "", "source": rel}
            for key, (us, row, rel) in best.items()}


def amd_isa(repo: AiterGit, out: Path, kernel: str, n: int, k: int, m: int) -> Path:
    """The ISA of AMD's kernel ``kernel`` compiled for (N, K) (cached under ``out``)."""
    ident = f"{config_id(config_from_name(kernel))}__N{n}_K{k}"
    path = out / "isa" / f"{ident}.s"
    if path.exists():
        return path
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "aiter_reference.py"), "compile",
         "--aiter-git", str(repo.git_dir), "--commit", repo.commit, "--out", str(out),
         "--id", ident, "--kernel-name", kernel, "--N", str(n), "--K", str(k), "--M", str(m),
         "--no-mca"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": pythonpath})
    if done.returncode or not path.exists():
        raise RuntimeError(f"compiling AMD's {kernel} for N={n} K={k} failed:\n"
                           f"{(done.stderr or done.stdout)[-1500:]}")
    return path


def shapes(winners: dict) -> list[tuple[str, tuple[int, int, int]]]:
    out, seen = [], set()
    candidates = [(label, p.mnk) for label, p in reference_problems() if p.op == "mm"]
    candidates += [("small-N decode", s) for s in EXTRA_SHAPES]
    for label, mnk in candidates:
        won = winners.get(mnk)
        if mnk in seen or won is None or not str(won["kernel"]).startswith("flydsl_gemm"):
            continue
        try:
            config_from_name(str(won["kernel"]))
        except Exception:  # a small_m kernel or another family: not compared
            continue
        seen.add(mnk)
        out.append((label, mnk))
    return out


def compare(repo: AiterGit, out: Path, timing: str) -> list[dict[str, object]]:
    device = device_spec(DEVICE)
    winners = aiter_winners(repo)
    rows = []
    for label, (m, n, k) in shapes(winners):
        won = winners[(m, n, k)]
        kernel = str(won["kernel"])
        cfg = config_from_name(kernel)
        isa = amd_isa(repo, out, kernel, n, k, m)
        amd_profile = profile_from_isa(
            isa.read_text(), ARCH, tile_m=cfg["tile_m"], tile_n=cfg["tile_n"],
            tile_k=cfg["tile_k"], stages=cfg["stages"], group_m=1, split_k=cfg["split_k"],
            waves=cfg["block_m_warps"] * cfg["block_n_warps"] * cfg["block_k_warps"],
            split_k_reduction="atomic", source=isa.name)
        amd = predict(amd_profile, GemmShape(m, n, k), device, timing=timing)
        problem = synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt")
        template, op, dtype, layout = model_variant(problem)
        ranked = rank(pruned_configs(problem, ARCH, limit=MAX_CANDIDATES),
                      model_shape(problem), arch=ARCH, template=template, op=op,
                      dtype=dtype, layout=layout, device=device, timing=timing)
        ours = next(r for r in ranked if r.prediction is not None)
        assert ours.prediction is not None
        rows.append({
            "shape": f"{m}x{n}x{k}", "M": m, "label": label,
            "ours_config": config_label(ours.config.to_json(), ""),
            "ours_us": round(ours.prediction.us, 2), "ours_bound": ours.prediction.bound,
            "amd_config": config_id(cfg).removeprefix("aiter_"),
            "amd_us": round(amd.us, 2), "amd_bound": amd.bound,
            "ratio": round(ours.prediction.us / amd.us, 3),
            "aiter_measured_us": won["us"]})
    return rows


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: list[dict[str, object]]) -> dict[str, object]:
    decode = [float(r["ratio"]) for r in rows if int(r["M"]) <= DECODE_MAX_M]
    large = [float(r["ratio"]) for r in rows if int(r["M"]) > DECODE_MAX_M]
    def fmt(v: float | None) -> float | None:
        return None if v is None else round(v, 3)
    return {"shapes": len(rows), "decode_shapes": len(decode),
            "decode_geomean": fmt(geomean(decode)), "decode_worst": fmt(max(decode, default=None)),
            "large_shapes": len(large), "large_geomean": fmt(geomean(large)),
            "large_worst": fmt(max(large, default=None)),
            "all_geomean": fmt(geomean(decode + large))}


def markdown(rows: list[dict[str, object]]) -> list[str]:
    columns = list(rows[0])
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter-git", type=Path, required=True, metavar="DIR",
                        help="a clone of ROCm/aiter (bare git dir or work tree)")
    parser.add_argument("--commit", default=REFERENCE_COMMIT, metavar="SHA")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="where AMD's compiled ISA is cached")
    parser.add_argument("--timing", default=GRAPH, help="graph (default) or eager")
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        timing = check_timing_mode(args.timing)
    except ValueError as exc:
        parser.error(f"--timing: {exc}")
    if timing == "cpu":
        parser.error("--timing: the model predicts a GPU: graph or eager")
    repo = AiterGit(args.aiter_git, args.commit)
    rows = compare(repo, args.out, timing)
    if not rows:
        print("no shape with an AITER FlyDSL winner", file=sys.stderr)
        return 1
    lines = markdown(rows)
    result = summary(rows)
    print(f"PREDICTED ({DEVICE}, timing mode {timing}); aiter_measured_us is AMD's "
          f"published measurement of its kernel")
    for line in lines:
        print(line)
    print(json.dumps(result, indent=2))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"timing": timing, "rows": rows, "summary": result},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
