"""Upgrade benchmark: a DB recorded with one torch, then compiles with another.

The bench model (scripts/bench_compile.py's MLP) is compiled with ``max-autotune`` and the
plugin by THIS Python into an empty DB (the old stack). Then, with ``--other-python`` (a
second environment with another torch release), side by side in one run:

- default: ``torch.compile`` default mode (no autotuning);
- cold: max-autotune with the plugin on an empty DB (a full re-tune);
- upgraded: max-autotune with the plugin on a copy of the old stack's DB: no exact winner
  holds (ATen and C++ rows depend on torch), so each GEMM benchmarks its prior's short
  list (``inductor_flydsl/priors.py``).

Each compile runs in its own process with every cache of its own (bench_compile.py's
isolation); times are compile plus first call, the median over ``--repeat`` rounds.
``winners_agree_fraction`` is the share of problems whose winner recorded by the upgraded
compile (chosen from the prior's short list) is the cold re-tune's winner.

Cases: ``plain`` is the fp32 MLP with Inductor's CPU choices (ATen and the C++ template:
two per GEMM, so a short list of two plus ATen cuts nothing on CPU); ``flydsl`` is the
bf16 MLP with ``ATEN,CPP,FLYDSL`` and FlyDSL's candidates for gfx950 offered on this CPU
(``compile_model.py --offer-flydsl``): they are cross-compiled by the cold compile and
refused at launch (recorded failed), the cost of candidates that do not win. On a ROCm
machine run it with ``--device cuda`` and no offering: ATen, Triton and FlyDSL all race.

    python scripts/bench_upgrade.py --other-python /path/to/other/venv/bin/python
    python scripts/bench_upgrade.py --other-python .venv-torch-next/bin/python --json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_compile import run_child  # beside this script

CASES = {
    "plain": ["--dims", "256,512,384,192,64", "--batch", "32", "--dtype", "float32"],
    "flydsl": ["--dims", "256,512,384,192,64", "--batch", "32", "--dtype", "bfloat16",
               "--backends", "ATEN,CPP,FLYDSL", "--offer-flydsl", "gfx950"],
}


def torch_version(python: str) -> str:
    return subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def db_winners(db: Path, torch: str) -> dict[str, str]:
    """problem id -> winning candidate id, for the rows recorded with ``torch``."""
    from inductor_flydsl.db.open import open_db  # every DB connection is open_db's

    conn = open_db(db, writable=False)
    try:
        return dict(conn.execute(
            "select w.problem_id, w.candidate_id from winners w join software s"
            " on s.id = w.software_id where s.torch = ?", [torch]).fetchall())
    finally:
        conn.close()


def measure(case: str, model: list[str], other: str, repeat: int, root: Path,
            device: str) -> dict:
    new_torch = torch_version(other)
    times: dict[str, list[float]] = {"default": [], "cold": [], "upgraded": []}
    agree: list[float] = []
    prior_hits = problems = 0
    for i in range(repeat):
        step = f"[{case} {i + 1}/{repeat}]"
        old_db, cold_db, up_db = (root / f"{case}_{name}{i}.db"
                                  for name in ("old", "cold", "upgraded"))
        dev = ["--device", device]
        plugin = ["--mode", "max-autotune", "--plugin", *dev, *model]
        print(f"{step} recording with {sys.executable} ...", file=sys.stderr, flush=True)
        run_child([*plugin, "--db", str(old_db)], root / f"c_{case}_old{i}")
        shutil.copy(old_db, up_db)
        print(f"{step} {new_torch}: default mode ...", file=sys.stderr, flush=True)
        default = run_child(["--mode", "default", *dev, *model], root / f"c_{case}_def{i}",
                            other)
        print(f"{step} {new_torch}: cold max-autotune ...", file=sys.stderr, flush=True)
        cold = run_child([*plugin, "--db", str(cold_db)], root / f"c_{case}_cold{i}", other)
        print(f"{step} {new_torch}: upgraded (old DB, priors) ...", file=sys.stderr,
              flush=True)
        up = run_child([*plugin, "--db", str(up_db)], root / f"c_{case}_up{i}", other)
        times["default"].append(default["compile_s"])
        times["cold"].append(cold["compile_s"])
        times["upgraded"].append(up["compile_s"])
        cold_w, up_w = db_winners(cold_db, new_torch), db_winners(up_db, new_torch)
        problems = len(cold_w)
        agree.append(sum(up_w.get(p) == c for p, c in cold_w.items()) / max(1, problems))
        prior_hits = up["stats"]["prior_hits"]
    default_s, cold_s, up_s = (statistics.median(times[k])
                               for k in ("default", "cold", "upgraded"))
    return {"default_s": round(default_s, 3), "cold_s": round(cold_s, 3),
            "upgraded_s": round(up_s, 3),
            "upgraded_over_cold": round(up_s / cold_s, 3),
            "upgraded_over_default": round(up_s / default_s, 3),
            "winners_agree_fraction": round(statistics.mean(agree), 3),
            "problems": problems, "prior_hits": prior_hits, "times": times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other-python", required=True,
                        help="python of a second environment with another torch release")
    parser.add_argument("--case", default="all", choices=[*CASES, "all"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine "
                        "(then the flydsl case offers nothing: drop --offer-flydsl)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    old_torch, new_torch = torch_version(sys.executable), torch_version(args.other_python)
    if old_torch == new_torch:
        parser.error(f"both environments have torch {old_torch}: nothing is upgraded")
    chosen = list(CASES) if args.case == "all" else [args.case]
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_upgrade_") as tmp:
        for case in chosen:
            model = CASES[case]
            if args.device != "cpu":
                model = [a for a in model if a not in ("--offer-flydsl", "gfx950")]
                model = [a.replace("ATEN,CPP,FLYDSL", "ATEN,TRITON,FLYDSL") for a in model]
            results[case] = measure(case, model, args.other_python, args.repeat, Path(tmp),
                                    args.device)
    headline = results.get("flydsl") or results[chosen[0]]
    out = {"upgraded_over_cold": headline["upgraded_over_cold"],
           "upgraded_over_default": headline["upgraded_over_default"],
           "winners_agree_fraction": headline["winners_agree_fraction"],
           "headline_case": "flydsl" if "flydsl" in results else chosen[0],
           "old_torch": old_torch, "new_torch": new_torch, "repeat": args.repeat,
           "cases": results}
    if args.json:
        print(json.dumps(out))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"compile plus first call (s): recorded with torch {old_torch}, "
                        f"compiled with {new_torch}")
    for col in ("case", "default", "cold re-tune", "upgraded (priors)", "upgraded/cold",
                "upgraded/default", "winners agree", "prior hits"):
        table.add_column(col)
    for case, r in results.items():
        table.add_row(case, f"{r['default_s']:.2f}", f"{r['cold_s']:.2f}",
                      f"{r['upgraded_s']:.2f}", f"{r['upgraded_over_cold']:.2f}",
                      f"{r['upgraded_over_default']:.2f}",
                      f"{r['winners_agree_fraction']:.0%} of {r['problems']}",
                      str(r["prior_hits"]))
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
