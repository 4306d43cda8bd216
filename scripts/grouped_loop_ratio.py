#!/usr/bin/env python
"""Main-loop cost of the grouped GEMM next to the dense GEMM at the same tile, per arch.

Cross-compiles every grouped DEFAULT config (bf16, B K-contiguous ``nt`` and N-contiguous
``nn``) and the dense kernel with the same config (``mm``, same layout), in one run, and
prints the llvm-mca main-loop ratio of each (cycles per trip over 4x the MFMAs in it;
1.0 = MFMA-bound; see ``inductor_flydsl/isa/loop_analysis.py``), the grouped
over dense quotient, VGPRs and scratch. Configs the resource model rejects on an arch
are listed as such. Exit status 1 if a grouped config fails to compile, spills or is
more than ``--tolerance`` (default 10%) above the dense ratio.

    python scripts/grouped_loop_ratio.py                    # gfx950 and gfx942, table
    python scripts/grouped_loop_ratio.py --arch gfx950 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from inductor_flydsl.flydsl_backend.builds import catalog
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT_GROUPED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", action="append", choices=("gfx950", "gfx942"), default=None)
    parser.add_argument("--layout", action="append", choices=("nt", "nn"), default=None)
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument("--jobs", "-j", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    archs = args.arch or ["gfx950", "gfx942"]
    layouts = args.layout or ["nt", "nn"]
    grouped_jobs = catalog.build_jobs(archs, dtypes=["bf16"], layouts=layouts,
                                      ops=["grouped_mm"], template="gemm_grouped")
    # the dense kernel with the very same configs (some are not in the dense DEFAULT list)
    dense_jobs = [dataclasses.replace(j, template="gemm_dense", op="mm") for j in grouped_jobs]
    jobs = grouped_jobs + dense_jobs
    run = catalog.run_catalog(jobs, workers=args.jobs, db_path=None, progress=not args.json)
    by_key = {(i.job.template, i.job.arch, i.job.layout, i.job.config): i for i in run.results}
    rows, bad = [], []
    for arch in archs:
        for layout in layouts:
            for config in DEFAULT_GROUPED:
                key = tuple(config.to_json().items())
                g = by_key[("gemm_grouped", arch, layout, key)]
                d = by_key[("gemm_dense", arch, layout, key)]
                tile = (f"{config.tile_m}x{config.tile_n}x{config.tile_k} "
                        f"w{config.waves_m}x{config.waves_n} s{config.stages}")
                row = {"arch": arch, "layout": layout, "config": tile}
                if not g.accepted:
                    row["status"] = g.job.rejected
                    rows.append(row)
                    continue

                def ratio(item):
                    mca = (item.result.loop_analysis or {}).get("mca") or {}
                    return mca.get("ratio")

                gr, dr = ratio(g), ratio(d)
                row.update(status="ok" if g.result.ok else (g.result.error or "failed"),
                           grouped=gr, dense=dr,
                           quotient=round(gr / dr, 3) if gr and dr else None,
                           vgprs=g.result.vgprs, dense_vgprs=d.result.vgprs,
                           scratch=g.result.scratch_bytes, spilled=g.spilled)
                if (not g.result.ok or g.spilled or row["quotient"] is None
                        or row["quotient"] > 1 + args.tolerance):
                    bad.append(row)
                rows.append(row)
    if args.json:
        print(json.dumps({"rows": rows, "failures": bad, "tolerance": args.tolerance},
                         indent=1))
    else:
        print(f"{'arch':7} {'layout':6} {'config':22} {'grouped':>8} {'dense':>8} "
              f"{'g/d':>6} {'VGPRs g/d':>10} scratch")
        for r in rows:
            if r["status"] != "ok":
                print(f"{r['arch']:7} {r['layout']:6} {r['config']:22} {r['status'][:70]}")
                continue
            print(f"{r['arch']:7} {r['layout']:6} {r['config']:22} {r['grouped']:8.3f} "
                  f"{r['dense']:8.3f} {r['quotient']:6.3f} "
                  f"{r['vgprs']:>4}/{r['dense_vgprs']:<5} {r['scratch']}")
        quotients = [r["quotient"] for r in rows if r.get("quotient")]
        if quotients:
            print(f"grouped/dense main-loop ratio: {min(quotients):.3f} - {max(quotients):.3f} "
                  f"over {len(quotients)} configs (limit {1 + args.tolerance:.2f})")
        for r in bad:
            print(f"FAILED: {r}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
