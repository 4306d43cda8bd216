"""Build ``tuning_db/mi355x_predicted.db``: the performance model's short lists for MI355X.

For every reference shape (the 15-shape dense BF16 suite; the Llama-3 8B, Llama-3 70B and
Mixtral 8x7B linear layers at decode (M = 1, 16, 64) and prefill (M = 2048, 8192) token
counts; the Mixtral 8x7B and DeepSeek-V3 (8-way expert parallel) routed-expert grouped
GEMMs at 256, 2048 and 16384 routed tokens), the model ranks every eligible DEFAULT config
from the shipped compile catalog and the best ``STORED_RANKS`` are stored, marked
``predicted`` (``inductor_flydsl/performance/short_lists.py``). With ``--aiter-git`` (a
clone of ROCm/aiter), each dense shape also gets AITER's published best time on gfx950
with 256 CUs (any kernel: asm, hipBLASLt, FlyDSL) from its tuned BF16 GEMM tables, with
the file and commit, where AITER has the shape (no bias, bf16 output).

    python scripts/build_predicted_db.py [--aiter-git AITER/.git] [--out FILE]

The file is rebuilt from scratch; ``tests/performance/test_short_lists.py`` checks that the
shipped one was written by the running model version (rebuild after any model change).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from inductor_flydsl.db.pack import pack_db
from inductor_flydsl.flydsl_backend.offer.eligibility import problem_reasons
from inductor_flydsl.flydsl_backend.offer.offering import (
    MAX_CANDIDATES,
    model_variant,
    pruned_configs,
)
from inductor_flydsl.performance.devices import device_spec
from inductor_flydsl.performance.ranking import rank
from inductor_flydsl.performance.short_lists import (
    STORED_RANKS,
    stored_version,
    write_short_lists,
)
from inductor_flydsl.performance.traffic import model_shape
from inductor_flydsl.problems.problem import Problem, synthetic_problem
from inductor_flydsl.sweep.presets import (
    LLAMA3_8B,
    LLAMA3_70B,
    MIXTRAL_8X7B,
    MOE_DEEPSEEK_V3_EP8,
    MOE_MIXTRAL_8X7B,
    MOE_TOKENS,
    dense_bf16_shapes,
)

ROOT = Path(__file__).resolve().parents[1]
DEVICE, ARCH = "MI355X", "gfx950"
DECODE_M, PREFILL_M = (1, 16, 64), (2048, 8192)


def reference_problems() -> list[tuple[str, Problem]]:
    out: list[tuple[str, Problem]] = []
    for m, n, k in dense_bf16_shapes():
        out.append(("dense-bf16-suite",
                    synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt")))
    for model, layers in (("llama3-8b", LLAMA3_8B), ("llama3-70b", LLAMA3_70B),
                          ("mixtral-8x7b", MIXTRAL_8X7B)):
        for name, n, k in layers:
            for m in (*DECODE_M, *PREFILL_M):
                phase = "decode" if m in DECODE_M else "prefill"
                out.append((f"{model} {name} {phase}",
                            synthetic_problem("mm", m, n, k, dtype="bfloat16", layout="nt")))
    for model, layers in (("mixtral-8x7b moe", MOE_MIXTRAL_8X7B),
                          ("deepseek-v3 ep8 moe", MOE_DEEPSEEK_V3_EP8)):
        for name, groups, n, k, _top_k in layers:
            for tokens in MOE_TOKENS:
                out.append((f"{model} {name}", synthetic_problem(
                    "grouped_mm", tokens, n, k, dtype="bfloat16", layout="nt", batch=groups)))
    seen: set[str] = set()
    unique = []
    for label, problem in out:  # a shape shared by several models keeps its first label
        if problem.id not in seen:
            seen.add(problem.id)
            unique.append((label, problem))
    return unique


def is_bf16_tuned_table(path: str) -> bool:
    """Whether ``path`` is one of AITER's tuned BF16 GEMM tables (``aiter/configs/``)."""
    name = path.rsplit("/", 1)[-1]
    return (path.startswith("aiter/configs/") and path.endswith(".csv") and "bf16" in name
            and "tuned" in name and "untuned" not in name)


def fastest_rows(tables: Iterable[tuple[str, str]]
                 ) -> dict[tuple[int, int, int], tuple[float, dict[str, str], str]]:
    """AITER's fastest gfx950 / 256-CU row per (M, N, K) (no bias, bf16 out) in ``tables``
    (``(path, CSV text)`` of tuned BF16 tables): ``(us, row, path)``."""
    best: dict[tuple[int, int, int], tuple[float, dict[str, str], str]] = {}
    for path, text in tables:
        for row in csv.DictReader(io.StringIO(text)):
            try:
                if (row.get("gfx", "gfx950") != "gfx950" or int(row["cu_num"]) != 256
                        or row.get("bias", "False") != "False"
                        or "float32" in row.get("outdtype", "")):
                    continue
                key = (int(row["M"]), int(row["N"]), int(row["K"]))
                us = float(row["us"])
            except (KeyError, ValueError):
                continue
            if us > 0 and (key not in best or us < best[key][0]):
                best[key] = (us, row, path)
    return best


def aiter_best(git_dir: Path) -> tuple[dict[tuple[int, int, int], dict[str, object]], str]:
    """AITER's fastest published gfx950 / 256-CU time per (M, N, K) (no bias, bf16 out)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                              capture_output=True, text=True).stdout

    commit = git("rev-parse", "HEAD").strip()
    files = [f for f in git("ls-tree", "-r", "--name-only", commit).split()
             if is_bf16_tuned_table(f)]
    best = fastest_rows((name, git("show", f"{commit}:{name}")) for name in files)
    return {key: {"us": us, "kernel": row.get("kernelName") or row.get("libtype"),
                  "source": f"ROCm/aiter {name} @ {commit[:12]}"}
            for key, (us, row, name) in best.items()}, commit


def build_rows(aiter: dict[tuple[int, int, int], dict[str, object]]) -> tuple[list[dict], list]:
    device = device_spec(DEVICE)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    rows, problems = [], []
    for label, problem in reference_problems():
        if problem_reasons(problem, arch=ARCH):
            print(f"skip (FlyDSL not eligible): {label} {problem.summary()}", file=sys.stderr)
            continue
        template, op, dtype, layout = model_variant(problem)
        ranked = rank(pruned_configs(problem, ARCH, limit=MAX_CANDIDATES),
                      model_shape(problem), arch=ARCH, template=template, op=op, dtype=dtype,
                      layout=layout, device=device)
        ranked = [r for r in ranked if r.prediction is not None][:STORED_RANKS]
        if not ranked:
            continue
        problems.append(problem)
        published = aiter.get(problem.mnk) if problem.op == "mm" else None
        for index, entry in enumerate(ranked, 1):
            p = entry.prediction
            rows.append({
                "device": DEVICE, "arch": ARCH, "problem_id": problem.id,
                "shape": problem.summary(), "label": label, "rank": index,
                "config": json.dumps(entry.config.to_json(), sort_keys=True),
                "predicted_us": p.us, "tflops": round(p.tflops, 1),
                "roofline_share": round(p.roofline_share, 3), "bound": p.bound,
                "model_version": stored_version(), "kind": "predicted",
                "aiter_best_us": published["us"] if published else None,
                "aiter_best_kernel": published["kernel"] if published else None,
                "aiter_source": published["source"] if published else None,
                "recorded_at": now})
    return rows, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter-git", type=Path, default=None,
                        help="a ROCm/aiter clone's git dir, for AITER's published best times")
    parser.add_argument("--out", type=Path, default=ROOT / "tuning_db" / "mi355x_predicted.db")
    args = parser.parse_args(argv)
    aiter: dict = {}
    if args.aiter_git is not None:
        if not args.aiter_git.is_dir():
            parser.error(f"--aiter-git {args.aiter_git}: no such directory")
        aiter, commit = aiter_best(args.aiter_git)
        print(f"AITER {commit[:12]}: {len(aiter)} published gfx950 shapes", file=sys.stderr)
    rows, problems = build_rows(aiter)
    args.out.unlink(missing_ok=True)
    written = write_short_lists(args.out, rows, problems)
    verify_errors = pack_db(args.out)  # one self-contained file, verified
    if verify_errors:
        print(f"{args.out}: db verify finds {verify_errors[0]}", file=sys.stderr)
        return 1
    with_aiter = len({r["problem_id"] for r in rows if r["aiter_best_us"]})
    print(f"{args.out}: {len(problems)} shapes, {written} predicted rows (model and catalog "
          f"{stored_version()}); AITER's published best beside {with_aiter} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
