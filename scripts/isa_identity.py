#!/usr/bin/env python
"""Fingerprints of the compiled ISA of a fixed sample of template variants, for checking
that a refactoring of the templates left the generated code as it was.

Cross-compiles (CPU, no GPU) a sample of every template: dense (``mm``, ``addmm``,
``bmm``, split-K, a fused epilogue; gfx950 and gfx942), grouped and MX, and prints one
line per variant with the sha256 of its final ISA (``22_final_isa.s``) minus comment and
metadata lines that name the source. Run it on the code before and after a change and
compare the outputs (``diff``): identical lines mean identical instructions.

    python scripts/isa_identity.py > after.txt
    git stash; python scripts/isa_identity.py > before.txt; git stash pop
    diff before.txt after.txt
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_config
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT, DEFAULT_GROUPED, DEFAULT_MX
from inductor_flydsl.problems.epilogue_spec import EpilogueSpec

SILU_MUL = EpilogueSpec.from_json({  # silu(acc) * x0 (a gate/up projection's epilogue)
    "operands": [{"kind": "tile", "dtype": "bfloat16"}],
    "steps": [["silu", "acc"], ["mul", "s0", "x0"]], "out_dtype": "bfloat16"}).text()


def sample() -> list[tuple[str, dict, str, str, str, str, str]]:
    """(template, config, arch, dtype, layout, op, epilogue) of every variant fingerprinted."""
    dense = [c.to_json() for c in DEFAULT[::6]]
    jobs = []
    for arch in ("gfx950", "gfx942"):
        for i, config in enumerate(dense):
            variant = [("bf16", "nt", "mm"), ("fp16", "nn", "addmm"), ("bf16", "tn", "bmm"),
                       ("bf16", "tt", "mm")][i % 4]
            jobs.append(("gemm_dense", config, arch, *variant, ""))
        jobs.append(("gemm_dense", dense[0] | {"split_k": 4}, arch, "bf16", "nt", "mm", ""))
        jobs.append(("gemm_dense", dense[1], arch, "bf16", "nt", "mm", SILU_MUL))
        for config in DEFAULT_GROUPED[::4]:
            jobs.append(("gemm_grouped", config.to_json(), arch, "bf16", "nt", "grouped_mm",
                         ""))
    for i, config in enumerate(DEFAULT_MX[::3]):
        dtype = ("e4m3xe4m3_bf16", "e2m1xe4m3_bf16", "e5m2xe2m1_fp16")[i % 3]
        jobs.append(("gemm_mx", config.to_json(), "gfx950", dtype, "nt",
                     ("mm", "addmm")[i % 2], ""))
    return jobs


def _normalized(isa: str) -> str:
    keep = [line for line in isa.splitlines()
            if line.strip() and not line.lstrip().startswith((";", "//", ".file", ".ident"))]
    return "\n".join(keep)


def fingerprint(job: tuple) -> str:
    template, config, arch, dtype, layout, op, epilogue = job
    with tempfile.TemporaryDirectory() as dump:
        result = compile_config(template, config, arch=arch, dtype=dtype, layout=layout,
                                op=op, dump_dir=dump, analyze_loop=False, epilogue=epilogue)
        if not result.ok or result.isa_path is None:
            digest = f"not compiled: {(result.error or '').splitlines()[0][:80]}"
        else:
            text = _normalized(Path(result.isa_path).read_text())
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    name = "x".join(str(config[k]) for k in ("tile_m", "tile_n", "tile_k"))
    extra = f" split_k={config['split_k']}" if config.get("split_k", 1) > 1 else ""
    fused = " +epilogue" if epilogue else ""
    return f"{template} {arch} {dtype} {layout} {op} {name}{extra}{fused}: {digest}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", "-j", type=int, default=2)
    args = parser.parse_args()
    jobs = sample()
    with ProcessPoolExecutor(args.jobs) as pool:
        for i, line in enumerate(pool.map(fingerprint, jobs), 1):
            print(line, flush=True)
            print(f"[{i}/{len(jobs)}]", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
