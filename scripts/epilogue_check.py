#!/usr/bin/env python
"""Fused epilogues in the dense template: compile, emulate and compare main loops.

For each arch (gfx950, gfx942), dtype (bf16, fp16) and op (NT ``mm`` and ``addmm``),
cross-compiles every dense DEFAULT config without an epilogue and with each epilogue of
a representative set (:data:`EPILOGUES`: bias-add relu, the activations, a residual tile,
row/column scales, division, an fp32 output, chains), runs every compiled kernel in the
ISA emulator on the config's tail problem (``emulator.gemm.tail_shape``; fused kernels
on exact inputs against the epilogue's reference, see ``emulator/gemm.py``) and reports
per config: compiles, VGPRs, scratch/spills (must be none), emulation verdicts and the
largest error relative to the tolerance, and the main-loop instruction mix and llvm-mca
ratio without and with the epilogue (the same mix: the epilogue adds nothing to the
loop). Configs that cannot take an epilogue (``epilogue_reason``: split-K) or that the
resource model rejects on an arch are listed with the reason. Progress goes to stderr.
Exit status 1 on any failure (compile, spill, emulation, or a loop that changed).

    python scripts/epilogue_check.py                       # everything, table
    python scripts/epilogue_check.py --arch gfx950 --dtype bf16 --json > out.json
    python scripts/epilogue_check.py --epilogue gelu_erf --config 0 --config 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from inductor_flydsl.flydsl_backend.builds.build_pool import PoolEvent, run_pool
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT
from inductor_flydsl.flydsl_backend.offer.resources import estimate
from inductor_flydsl.problems.epilogue_spec import EpilogueSpec
from inductor_flydsl.template_loader import load_template

COMPILE_FN = "inductor_flydsl.flydsl_backend.builds.emulated:compile_and_emulate"
TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16"}
PLAIN = "plain"

# name -> (operand kinds, steps, output dtype or None for the input dtype); the operands
# take the input dtype except where a kind is written "kind:dtype".
EPILOGUES: dict[str, tuple[tuple[str, ...], list[list[Any]], str | None]] = {
    "bias_relu": (("col",), [["add", "acc", "x0"], ["relu", "s0"]], None),
    "gelu_erf": ((), [["gelu_erf", "acc"]], None),
    "gelu_tanh": ((), [["gelu_tanh", "acc"]], None),
    "silu": ((), [["silu", "acc"]], None),
    "sigmoid": ((), [["sigmoid", "acc"]], None),
    "tanh": ((), [["tanh", "acc"]], None),
    "residual": (("tile",), [["add", "acc", "x0"]], None),
    "row_col_scale": (("row:float32", "col"), [["mul", "acc", "x0"], ["mul", "s0", "x1"]],
                      None),
    "div_col": (("col",), [["div", "acc", "x0"]], None),
    "fp32_out": ((), [], "float32"),
    "chain4": (("col", "row", "tile"), [["add", "acc", "x0"], ["silu", "s0"],
                                        ["mul", "s1", "x1"], ["add", "s2", "x2"]], None),
    "erf_exp_misc": ((), [["mul", "acc", 0.5], ["erf", "s0"], ["neg", "s1"], ["exp", "s2"],
                          ["minimum", "s3", 2.0], ["sub", "s4", "acc"]], "float32"),
}


def epilogue_text(name: str, dtype: str) -> str:
    """Canonical JSON of epilogue ``name`` for inputs of ``dtype`` ("" for :data:`PLAIN`)."""
    if name == PLAIN:
        return ""
    kinds, steps, out = EPILOGUES[name]
    operands = []
    for kind in kinds:
        kind, _, operand_dtype = kind.partition(":")
        operands.append({"kind": kind, "dtype": operand_dtype or TORCH_NAMES[dtype]})
    return EpilogueSpec.from_json({"operands": operands, "steps": steps,
                                   "out_dtype": out or TORCH_NAMES[dtype]}).text()


@dataclass(frozen=True)
class Variant:
    arch: str
    dtype: str
    op: str
    index: int  # in DEFAULT

    @property
    def config(self) -> Any:
        return DEFAULT[self.index]

    def name(self) -> str:
        c = self.config
        return (f"{self.arch} {self.dtype} {self.op:5} #{self.index:<2} {c.tile_m}x{c.tile_n}x"
                f"{c.tile_k} w{c.waves_m}x{c.waves_n} s{c.stages} g{c.group_m}"
                + (f" k{c.split_k}" if c.split_k > 1 else ""))


def refusal(variant: Variant, template: Any) -> str | None:
    """Why ``variant`` is not compiled: the resource model, the pipeline depth, or
    ``epilogue_reason`` (any fused epilogue; they refuse alike)."""
    config = variant.config
    reasons = list(estimate(config, variant.dtype, variant.arch)[3])
    reasons += [r for r in (template.stages_reason(config, variant.arch),) if r]
    sample = epilogue_text("gelu_erf", variant.dtype)
    epilogue = template.epilogue_reason(config, op=variant.op, epilogue=sample)
    return "; ".join(reasons + ([epilogue] if epilogue else [])) or None


def payload(variant: Variant, epilogue: str) -> dict[str, Any]:
    extra = {"epilogue": epilogue} if epilogue else {}
    return {"template": "gemm_dense", "config": variant.config.to_json(), "arch": variant.arch,
            "dtype": variant.dtype, "layout": "nt", "op": variant.op, "extra": extra}


def run_jobs(jobs: list[tuple[Variant, str]], workers: int, timeout_s: float,
             quiet: bool) -> list[dict[str, Any]]:
    """Compile and emulate every (variant, epilogue name) in worker processes."""
    done: list[dict[str, Any] | None] = [None] * len(jobs)
    start = time.monotonic()

    def on_event(event: PoolEvent) -> None:
        variant, name = jobs[event.index]
        done[event.index] = record(variant, name, event)
        finished = sum(d is not None for d in done)
        if not quiet:
            item = done[event.index]
            verdict = "ok" if item["passed"] else f"FAILED {item['problem']}"
            print(f"[{finished}/{len(jobs)} {time.monotonic() - start:6.0f}s] "
                  f"{variant.name()} {name}: {verdict} ({event.seconds:.1f}s)",
                  file=sys.stderr, flush=True)

    payloads = [payload(v, epilogue_text(name, v.dtype)) for v, name in jobs]
    run_pool(payloads, workers, timeout_s, COMPILE_FN, on_event, warm_up=["flydsl.compiler"])
    return [d if d is not None else {"passed": False, "problem": "not run"} for d in done]


def record(variant: Variant, name: str, event: PoolEvent) -> dict[str, Any]:
    """One job's row: compile figures, emulation verdict, main loop."""
    row: dict[str, Any] = {"arch": variant.arch, "dtype": variant.dtype, "op": variant.op,
                           "config_index": variant.index,
                           "config": variant.config.to_json(), "epilogue": name,
                           "seconds": round(event.seconds, 2)}
    result = event.detail.get("result") if event.kind == "result" else None
    if result is None:
        row.update(passed=False, problem=f"{event.kind}: {event.detail}")
        return row
    loop = result.get("loop_analysis") or {}
    emulation = result.get("emulation") or {}
    row.update(compiled=result["ok"], error=result["error"], vgprs=result["vgprs"],
               agprs=result["agprs"], scratch=result["scratch_bytes"],
               spills=(result["vgpr_spills"] or 0) + (result["sgpr_spills"] or 0),
               emulated=emulation.get("ok"), worst=emulation.get("worst"),
               max_abs_err=emulation.get("max_abs_err"),
               emulation_error=emulation.get("error"), loop_mix=loop.get("mix"),
               loop_ratio=(loop.get("mca") or {}).get("ratio"))
    problem = (result["error"] if not result["ok"]
               else "spills or scratch" if row["spills"] or row["scratch"]
               else emulation.get("error") or "emulation failed" if not emulation.get("ok")
               else None)
    row.update(passed=problem is None, problem=problem)
    return row


def summarize(variant: Variant, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A config's line: the plain kernel against its fused variants."""
    plain = next(r for r in rows if r["epilogue"] == PLAIN)
    fused = [r for r in rows if r["epilogue"] != PLAIN]
    ratios = [r["loop_ratio"] for r in fused if r.get("loop_ratio") is not None]
    same_loop = all(r.get("loop_mix") == plain.get("loop_mix") for r in fused)
    return {"variant": variant.name(), "arch": variant.arch, "dtype": variant.dtype,
            "op": variant.op, "config_index": variant.index,
            "compiled": sum(bool(r.get("compiled")) for r in fused),
            "emulated_ok": sum(bool(r.get("emulated")) for r in fused), "epilogues": len(fused),
            "plain_ok": plain["passed"], "plain_vgprs": plain.get("vgprs"),
            "max_vgprs": max((r.get("vgprs") or 0 for r in fused), default=None),
            "scratch": max((r.get("scratch") or 0) + (r.get("spills") or 0) for r in rows),
            "worst": max((r.get("worst") or 0.0 for r in fused), default=None),
            "plain_loop_ratio": plain.get("loop_ratio"),
            "fused_loop_ratio": [min(ratios), max(ratios)] if ratios else None,
            "same_loop": same_loop and plain.get("loop_mix") is not None,
            "loop_mix": plain.get("loop_mix"),
            "failures": [f"{r['epilogue']}: {r['problem']}" for r in rows if not r["passed"]]}


def print_table(summaries: list[dict[str, Any]], refused: list[dict[str, Any]]) -> None:
    print(f"{'variant':44} {'compiled':>8} {'emulated':>8} {'VGPRs':>9} {'scratch':>7} "
          f"{'worst':>6} {'loop plain':>10} {'loop fused':>13} same")
    for s in summaries:
        fused = s["fused_loop_ratio"] or [float("nan")] * 2
        print(f"{s['variant']:44} {s['compiled']:>4}/{s['epilogues']:<3} "
              f"{s['emulated_ok']:>4}/{s['epilogues']:<3} {s['plain_vgprs']:>4}/"
              f"{s['max_vgprs']:<4} {s['scratch']:>7} {s['worst'] or 0:6.3f} "
              f"{s['plain_loop_ratio'] or float('nan'):10.3f} {fused[0]:6.3f}-{fused[1]:<6.3f} "
              f"{'yes' if s['same_loop'] else 'NO'}")
        for failure in s["failures"]:
            print(f"    FAILED {failure}")
    for r in refused:
        print(f"{r['variant']:44} not compiled: {r['reason']}")


def totals(summaries: list[dict[str, Any]], refused: list[dict[str, Any]],
           archs: Iterable[str]) -> dict[str, Any]:
    """Per-arch figures for the report."""
    out = {}
    for arch in archs:
        mine = [s for s in summaries if s["arch"] == arch]
        plain = [s["plain_loop_ratio"] for s in mine if s["plain_loop_ratio"] is not None]
        fused = [x for s in mine for x in (s["fused_loop_ratio"] or [])]
        out[arch] = {
            "variants": len(mine), "refused": sum(r["arch"] == arch for r in refused),
            "fused_kernels": sum(s["epilogues"] for s in mine),
            "compiled": sum(s["compiled"] for s in mine),
            "emulated_ok": sum(s["emulated_ok"] for s in mine),
            "plain_ok": sum(s["plain_ok"] for s in mine),
            "max_vgprs": max((s["max_vgprs"] or 0 for s in mine), default=None),
            "max_vgpr_increase": max(((s["max_vgprs"] or 0) - (s["plain_vgprs"] or 0)
                                      for s in mine), default=None),
            "scratch_or_spills": sum(s["scratch"] > 0 for s in mine),
            "worst": max((s["worst"] or 0.0 for s in mine), default=None),
            "same_loop": sum(s["same_loop"] for s in mine),
            "loop_ratio_plain": [min(plain), max(plain)] if plain else None,
            "loop_ratio_fused": [min(fused), max(fused)] if fused else None,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", action="append", choices=("gfx950", "gfx942"))
    parser.add_argument("--dtype", action="append", choices=("bf16", "fp16"))
    parser.add_argument("--op", action="append", choices=("mm", "addmm"))
    parser.add_argument("--epilogue", action="append", choices=sorted(EPILOGUES))
    parser.add_argument("--config", action="append", type=int,
                        help="DEFAULT list index (repeatable; default: all)")
    parser.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args()
    archs = args.arch or ["gfx950", "gfx942"]
    names = [PLAIN, *(args.epilogue or EPILOGUES)]
    template = load_template("gemm_dense")
    variants, refused = [], []
    for arch in archs:
        for dtype in args.dtype or ["bf16", "fp16"]:
            for op in args.op or ["mm", "addmm"]:
                for index in args.config if args.config is not None else range(len(DEFAULT)):
                    variant = Variant(arch, dtype, op, index)
                    reason = refusal(variant, template)
                    if reason:
                        refused.append({"variant": variant.name(), "arch": arch,
                                        "reason": reason})
                    else:
                        variants.append(variant)
    jobs = [(v, name) for v in variants for name in names]
    start = time.monotonic()
    rows = run_jobs(jobs, args.jobs, args.timeout, args.quiet)
    summaries = [summarize(v, [r for (jv, _), r in zip(jobs, rows, strict=True) if jv == v])
                 for v in variants]
    report = {"epilogues": {n: epilogue_text(n, "bf16") for n in names if n != PLAIN},
              "totals": totals(summaries, refused, archs), "summaries": summaries,
              "refused": refused, "jobs": rows,
              "wall_seconds": round(time.monotonic() - start, 1)}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_table(summaries, refused)
        print(json.dumps(report["totals"], indent=1))
    failed = any(s["failures"] or not s["same_loop"] for s in summaries)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
