#!/usr/bin/env python
"""Sweep throughput, side by side in one run: the same item list swept into two empty DBs,
once with a fresh process per item (``--isolate item``) and once with the persistent
worker (``--isolate worker``, items batched per compiled graph).

    python scripts/bench_sweep.py                      # cpu-smoke, table
    python scripts/bench_sweep.py --shapes s.csv --json

Reports the sweep's own wall time (``wall_s`` of its summary: from the first item or
worker start to the last result), problems per minute (the ratio, worker over item, is
the speedup), the whole command's wall time (runner start-up and exit included), and
whether the two sweeps chose the same winner for every problem. Each sweep runs with its
own cache dirs (nothing carries over between the two) and ``--on-busy record``. The
order alternates with --repeat so neither mode always runs first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def sweep(args: list[str], root: Path) -> dict:
    dirs = {"TORCHINDUCTOR_CACHE_DIR": root / "inductor_cache", "TMPDIR": root / "tmp",
            "TRITON_CACHE_DIR": root / "triton_cache", "XDG_CACHE_HOME": root / "xdg_cache"}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}}
    for name in ("INDUCTOR_FLYDSL", "INDUCTOR_FLYDSL_DB"):
        env.pop(name, None)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "sweep", *args,
                           "--on-busy", "record", "--no-progress", "--json"], env=env,
                          capture_output=True, text=True, check=False)
    process_wall_s = time.monotonic() - start
    try:
        return {**json.loads(proc.stdout), "process_wall_s": process_wall_s}
    except json.JSONDecodeError:
        raise RuntimeError(f"sweep failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}") from None


def winners(db: Path) -> dict[str, str]:
    from inductor_flydsl.db.open import open_db  # every DB connection is open_db's

    conn = open_db(db, writable=False)
    try:
        return dict(conn.execute("select problem_id, candidate_id from winners").fetchall())
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--preset", default=None)
    source.add_argument("--shapes", default=None)
    parser.add_argument("--batch-items", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    items = ["--shapes", args.shapes] if args.shapes else ["--preset",
                                                          args.preset or "cpu-smoke"]
    modes = {"item": ["--isolate", "item"],
             "worker": ["--isolate", "worker", "--batch-items", str(args.batch_items)]}
    runs: dict[str, list[dict]] = {"item": [], "worker": []}
    agree = True
    disagreements: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        for i in range(args.repeat):
            order = ["item", "worker"] if i % 2 == 0 else ["worker", "item"]
            dbs = {}
            for mode in order:
                root = Path(tmp) / f"{mode}{i}"
                dbs[mode] = root / "tuning.db"
                print(f"[{i + 1}/{args.repeat}] sweep --isolate {mode} ...", file=sys.stderr,
                      flush=True)
                runs[mode].append(sweep([*items, *modes[mode], "--db", str(dbs[mode])],
                                        root))
            first, second = winners(dbs["item"]), winners(dbs["worker"])
            agree &= bool(first) and first == second
            disagreements += [{"round": i + 1, "problem": p, "item": first.get(p),
                               "worker": second.get(p)}
                              for p in sorted(set(first) | set(second))
                              if first.get(p) != second.get(p)]

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[mode])

    result = {
        "items": runs["item"][0]["items_total"],
        "problems": runs["item"][0]["problems_tuned"],
        "item_wall_s": med("item", "wall_s"), "worker_wall_s": med("worker", "wall_s"),
        "item_process_wall_s": round(med("item", "process_wall_s"), 2),
        "worker_process_wall_s": round(med("worker", "process_wall_s"), 2),
        "speedups_all_rounds": [round(w["problems_per_minute"] / i["problems_per_minute"], 3)
                                for i, w in zip(runs["item"], runs["worker"], strict=True)],
        "item_problems_per_minute": med("item", "problems_per_minute"),
        "worker_problems_per_minute": med("worker", "problems_per_minute"),
        "failed": sum(r["failed"] for mode in runs for r in runs[mode]),
        "winners_agree": agree, "disagreements": disagreements, "repeat": args.repeat,
        "batch_items": args.batch_items,
    }
    result["speedup"] = round(result["worker_problems_per_minute"]
                              / result["item_problems_per_minute"], 3)
    result["speedup_process_wall"] = round(result["item_process_wall_s"]
                                           / result["worker_process_wall_s"], 3)
    if args.json:
        print(json.dumps(result))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"sweep throughput, {result['items']} items, "
                        f"{result['problems']} problems tuned")
    for col in ("mode", "sweep wall (s)", "problems/min", "whole command (s)"):
        table.add_column(col)
    table.add_row("--isolate item", f"{result['item_wall_s']:.1f}",
                  f"{result['item_problems_per_minute']:.2f}",
                  f"{result['item_process_wall_s']:.1f}")
    table.add_row(f"--isolate worker (batch {args.batch_items})",
                  f"{result['worker_wall_s']:.1f}",
                  f"{result['worker_problems_per_minute']:.2f}",
                  f"{result['worker_process_wall_s']:.1f}")
    Console().print(table)
    print(f"speedup {result['speedup']:.2f}x in problems/min (whole command: "
          f"{result['speedup_process_wall']:.2f}x), winners agree: {agree}, "
          f"failed items: {result['failed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
