"""Compile-time benchmark: default mode vs cold max-autotune vs max-autotune with a warm DB.

Each measurement runs scripts/compile_model.py in its own process with every cache of its
own, so no cache carries over between runs; only the tuning DB carries over from the cold
run to the warm one:
- TORCHINDUCTOR_CACHE_DIR: Inductor's FX-graph, autotune and kernel caches;
- TMPDIR: Inductor's precompiled C++ header lives under the system temp dir
  (``torch._inductor.cpp_builder``, ``tempfile.gettempdir()``) whatever the cache dir says;
- TRITON_CACHE_DIR, XDG_CACHE_HOME: Triton's kernel cache and other per-user caches.
Times are compile plus first call, measured in the child. With --repeat N each
configuration runs N times and the median is used.

    python scripts/bench_compile.py                  # table: static and dynamic cases
    python scripts/bench_compile.py --case dynamic   # dynamic=True only
    python scripts/bench_compile.py --json           # one JSON object

The dynamic case compiles the same frozen MLP with ``dynamic=True`` and runs it at two
more batch sizes (8 and 13, compared with eager); the warm process must autotune
nothing and serve every GEMM from the DB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def isolated_env(root: Path) -> dict[str, str]:
    """Environment of one run: every cache it could use lives under ``root``."""
    dirs = {"TORCHINDUCTOR_CACHE_DIR": root / "inductor_cache", "TMPDIR": root / "tmp",
            "TRITON_CACHE_DIR": root / "triton_cache", "XDG_CACHE_HOME": root / "xdg_cache"}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    return {**os.environ, **{k: str(v) for k, v in dirs.items()},
            "INDUCTOR_FLYDSL_SHIPPED": "0"}


def run_child(args: list[str], cache_dir: Path, python: str = sys.executable) -> dict:
    """scripts/compile_model.py ARGS under ``python``, every cache under ``cache_dir``."""
    env = isolated_env(cache_dir)
    env.pop("INDUCTOR_FLYDSL", None)
    proc = subprocess.run([python, str(HERE / "compile_model.py"), *args], env=env,
                          capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"compile_model.py failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def winners(report: dict, source_prefix: str) -> dict[str, str]:
    return {d["problem_id"]: d["candidate_id"] for d in report["stats"]["decisions"]
            if d["source"].startswith(source_prefix)}


def measure(model: list[str], repeat: int, root: Path, label: str) -> dict:
    """default mode, cold max-autotune into an empty DB, then max-autotune on that DB."""
    times: dict[str, list[float]] = {"default": [], "cold": [], "warm_db": []}
    agree = outputs_equal = True
    also_match = True
    served_all = True
    import torch

    for i in range(repeat):
        db = root / f"{label}{i}.db"

        def cache(name: str, i: int = i) -> Path:
            return root / f"cache_{label}_{name}_{i}"

        step = f"[{label} {i + 1}/{repeat}]"
        print(f"{step} default mode ...", file=sys.stderr, flush=True)
        default = run_child(["--mode", "default", *model], cache("default"))
        print(f"{step} cold max-autotune (records into an empty DB) ...", file=sys.stderr,
              flush=True)
        cold = run_child(["--mode", "max-autotune", "--plugin", "--db", str(db),
                          "--out", str(root / "cold.pt"), *model], cache("cold"))
        print(f"{step} max-autotune with the warm DB ...", file=sys.stderr, flush=True)
        warm = run_child(["--mode", "max-autotune", "--plugin", "--db", str(db),
                          "--out", str(root / "warm.pt"), *model], cache("warm"))
        times["default"].append(default["compile_s"])
        times["cold"].append(cold["compile_s"])
        times["warm_db"].append(warm["compile_s"])
        cold_w, warm_w = winners(cold, "autotune"), winners(warm, "db:")
        agree &= bool(cold_w) and cold_w == warm_w and warm["autotune_runs"] == 0
        served_all &= all(d["source"].startswith("db:") for d in warm["stats"]["decisions"])
        also_match &= all(a["match"] for a in cold["also"] + warm["also"])
        outputs_equal &= torch.equal(torch.load(root / "cold.pt"),
                                     torch.load(root / "warm.pt"))
    default_s = statistics.median(times["default"])
    cold_s = statistics.median(times["cold"])
    warm_s = statistics.median(times["warm_db"])
    return {
        "default_s": round(default_s, 3), "cold_s": round(cold_s, 3),
        "warm_db_s": round(warm_s, 3),
        "warm_over_default": round(warm_s / default_s, 3),
        "warm_over_cold": round(warm_s / cold_s, 3),
        "winners_agree": agree, "outputs_equal": outputs_equal,
        "warm_served_all_from_db": served_all, "warm_autotune_runs": warm["autotune_runs"],
        "other_sizes_match_eager": also_match, "gemm_problems": len(cold_w),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dims", default="256,512,384,192,64")
    parser.add_argument("--batch", default="32")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--case", default="all", choices=["static", "dynamic", "all"],
                        help="static: the MLP at one batch; dynamic: the same frozen MLP "
                        "compiled with dynamic=True, then also run at batches 8 and 13 "
                        "(each compared with eager)")
    args = parser.parse_args()
    model = ["--dims", args.dims, "--batch", args.batch, "--dtype", args.dtype]
    cases = {"static": model, "dynamic": [*model, "--dynamic", "--also", "8,13"]}
    chosen = list(cases) if args.case == "all" else [args.case]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_compile_") as tmp:
        for case in chosen:
            results[case] = measure(cases[case], args.repeat, Path(tmp), case)
    result = {**results.get("static", {}), "cases": results, "repeat": args.repeat,
              "model": {"dims": args.dims, "batch": args.batch, "dtype": args.dtype}}
    if args.json:
        print(json.dumps(result))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title="compile plus first call (seconds, fresh Inductor cache each)")
        for col in ("case", "default", "cold max-autotune", "max-autotune, warm DB",
                    "warm/default", "warm/cold", "winners agree", "warm autotunes"):
            table.add_column(col)
        for case, r in results.items():
            table.add_row(case, f"{r['default_s']:.2f}", f"{r['cold_s']:.2f}",
                          f"{r['warm_db_s']:.2f}", f"{r['warm_over_default']:.2f}",
                          f"{r['warm_over_cold']:.2f}", str(r["winners_agree"]),
                          str(r["warm_autotune_runs"]))
        Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
