"""Reference data from AMD's ROCm/aiter for the performance model: FP8 preshuffle GEMM rows
and ISA (the FP8 companion of ``scripts/aiter_reference.py``, which does the BF16 split-K
HGEMM and whose git, import and ISA helpers this tool reuses).

AITER ships tuned per-token/per-channel FP8 GEMM tables
(``aiter/configs/**/a8w8_bpreshuffle*tuned_gemm*.csv``: measured microseconds per (M, N, K)
on MI355X, gfx950, 256 CUs, timed as each kernel's profiler device time) whose winners
include its FlyDSL preshuffle GEMM (``aiter/ops/flydsl/kernels/preshuffle_gemm.py``:
4 waves, A through LDS, B pre-shuffled straight to registers, FP8 scaled MFMAs). A row's
kernel name ``flydsl_bpreshuflle_{M}x{N}x{K}_F8_F8_B16_{async}x{waves_per_eu}x{xcd}x
{lds_stage}_{scheduler}`` gives its compile arguments. This tool

* ``rows``: every gfx950 FlyDSL preshuffle row whose name has those four fields, into
  ``OUT/aiter_flydsl_fp8_rows.csv`` (rows of the other FlyDSL FP8 pipelines, such as the
  8-wave one, and names of another grammar are counted, not kept);
* ``compile``: cross-compiles AITER's kernel for one name and one (N, K) for gfx950 on a
  CPU host, writes ``OUT/isa/<id>.s`` and prints one JSON line;
* ``manifest``: the configs with the most rows (or those named by ``--config``), each
  compiled for every (N, K) its rows use; without ``--config`` only configs without
  ``async_copy`` (AITER's async global-to-LDS copy, ``buffer_copy_lds<128>``, does not
  compile with flydsl 0.5: the model cannot be given those kernels' ISA); ``--jobs``
  processes, each compiling its share in turn (a compile takes about a second, a fresh
  process ten); into ``OUT/manifest.json``, which
  ``scripts/validate_performance_model.py`` reads (entries say ``"kernel":
  "fp8_preshuffle"``).

AMD's code is imported at run time from the user's own clone (``--aiter-git``), never
copied into this project or onto disk. Run from the repository root::

    python scripts/aiter_fp8_reference.py manifest --aiter-git AITER_GIT --out OUT \\
        --max-configs 102   # every config without async copy at the reference commit
    python scripts/validate_performance_model.py --manifest OUT/manifest.json
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiter_reference import (  # a sibling script, not a package
    ARCH,
    REFERENCE_COMMIT,
    REPO_ROOT,
    AiterGit,
    GitTreeFinder,
    UsageError,
    failed_compiles,
    keep_final_isa,
)

ROWS_CSV = "aiter_flydsl_fp8_rows.csv"
KERNEL = "fp8_preshuffle"
_NAME_RE = re.compile(
    r"flydsl_bpreshuflle_(?P<tile_m>\d+)x(?P<tile_n>\d+)x(?P<tile_k>\d+)_F8_F8_B16"
    r"_(?P<async_copy>\d+)x(?P<waves_per_eu>\d+)x(?P<xcd_swizzle>\d+)x(?P<lds_stage>[12])"
    r"_(?P<scheduler>[a-z]+)")
CONFIG_KEY = ("tile_m", "tile_n", "tile_k", "async_copy", "waves_per_eu", "xcd_swizzle",
              "lds_stage")
ROW_COLUMNS = ["source_file", "commit", "gfx", "cu_num", "M", "N", "K", "us", "kernel_name",
               *CONFIG_KEY, "scheduler"]


def parse_kernel_name(name: str) -> dict[str, Any] | None:
    """The compile arguments of an AITER FlyDSL preshuffle FP8 kernel name, or None."""
    m = _NAME_RE.fullmatch(name)
    if m is None:
        return None
    fields: dict[str, Any] = {k: int(v) for k, v in m.groupdict().items() if k != "scheduler"}
    fields["scheduler"] = m.group("scheduler")
    return fields


def config_id(cfg: dict[str, Any]) -> str:
    """``aiter_fp8_s{lds_stage}_t{M}x{N}x{K}_a{async}_w{waves_per_eu}_x{xcd_swizzle}``."""
    return (f"aiter_fp8_s{cfg['lds_stage']}_t{cfg['tile_m']}x{cfg['tile_n']}x{cfg['tile_k']}"
            f"_a{cfg['async_copy']}_w{cfg['waves_per_eu']}_x{cfg['xcd_swizzle']}")


def _is_fp8_table(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return (rel.startswith("aiter/configs/") and name.endswith(".csv") and "a8w8" in name
            and "bpreshuffle" in name and "tuned" in name and "untuned" not in name
            and "blockscale" not in name)


def extract_rows(repo: AiterGit) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """gfx950 FlyDSL preshuffle rows of AITER's FP8 tables, and counts of what was left."""
    rows: list[dict[str, Any]] = []
    left = collections.Counter[str]()
    for rel in sorted(f for f in repo.files() if _is_fp8_table(f)):
        for r in csv.DictReader(io.StringIO(repo.show(rel))):
            name = r.get("kernelName") or ""
            if "flydsl" not in name or r.get("gfx") != ARCH:
                continue
            fields = parse_kernel_name(name)
            if fields is None:
                left["other FlyDSL FP8 kernels or name grammars"] += 1
                continue
            if r.get("cu_num") != "256":
                left["not 256 CUs"] += 1
                continue
            rows.append({"source_file": rel, "commit": repo.commit, "gfx": r["gfx"],
                         "cu_num": int(r["cu_num"]), "M": int(r["M"]), "N": int(r["N"]),
                         "K": int(r["K"]), "us": float(r["us"]), "kernel_name": name,
                         **fields})
    return rows, dict(left)


_STARTED: dict[str, Any] = {}


def _preshuffle_compiler(repo: AiterGit) -> Any:
    """AITER's ``compile_preshuffle_gemm``, imported once per process from the clone."""
    if "compile" not in _STARTED:
        from inductor_flydsl.flydsl_backend.builds.toolchain import rocm_path_for_compile

        os.environ.update({"FLYDSL_GPU_ARCH": ARCH, "COMPILE_ONLY": "1", "FLYDSL_DUMP_IR": "1",
                           "ROCM_PATH": rocm_path_for_compile(),
                           "FLYDSL_RUNTIME_ENABLE_CACHE": "0"})
        sys.meta_path.insert(0, GitTreeFinder(repo))
        from aiter.ops.flydsl.kernels.preshuffle_gemm import (  # type: ignore[import-not-found]
            compile_preshuffle_gemm,
        )

        _STARTED["compile"] = compile_preshuffle_gemm
    return _STARTED["compile"]


def compile_config(repo: AiterGit, out: Path, kernel_name: str, n: int, k: int, m: int,
                   ident: str | None) -> dict[str, Any]:
    """Compile AITER's preshuffle GEMM for one kernel name and (N, K): one manifest record."""
    cfg = parse_kernel_name(kernel_name)
    if cfg is None:
        raise UsageError(f"--kernel-name: not an AITER FlyDSL preshuffle FP8 name: "
                         f"{kernel_name!r}")
    ident = ident or config_id(cfg)
    compile_preshuffle_gemm = _preshuffle_compiler(repo)
    import flydsl.expr as fx
    import torch

    dump = Path(tempfile.mkdtemp(prefix=f"aiter-{ident}-"))
    os.environ["FLYDSL_DUMP_DIR"] = str(dump)  # read at each compile
    try:
        launcher = compile_preshuffle_gemm(
            N=n, K=k, tile_m=cfg["tile_m"], tile_n=cfg["tile_n"], tile_k=cfg["tile_k"],
            in_dtype="fp8", out_dtype="bf16", waves_per_eu=cfg["waves_per_eu"] or None,
            enable_scheduler=cfg["scheduler"] != "off",
            use_async_copy=bool(cfg["async_copy"]), xcd_swizzle=cfg["xcd_swizzle"],
            lds_stage=cfg["lds_stage"])
        fp8 = torch.float8_e4m3fn
        t0 = time.perf_counter()
        # COMPILE_ONLY: the "launch" compiles and dumps the IR/ISA, nothing runs.
        launcher(torch.empty(m, n, dtype=torch.bfloat16), torch.empty(m, k, dtype=fp8),
                 torch.empty(n, k, dtype=fp8), torch.empty(m, dtype=torch.float32),
                 torch.empty(n, dtype=torch.float32), torch.empty(n, dtype=torch.bfloat16),
                 m, n, fx.Stream(None))
        secs = time.perf_counter() - t0
        isa_path = keep_final_isa(dump, out, ident)
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    from inductor_flydsl.isa.stats import parse_isa

    stats = parse_isa(isa_path.read_text())
    return {"id": ident, "isa": str(isa_path), "kernel": KERNEL, "config": cfg,
            "aiter_commit": repo.commit, "compiled_for": {"N": n, "K": k, "M_runtime": m},
            "compile_seconds": round(secs, 3),
            "resources_isa": {"vgprs": stats.vgprs, "agprs": stats.agprs,
                              "lds_bytes": stats.lds_bytes, "sgpr_spills": stats.sgpr_spills,
                              "vgpr_spills": stats.vgpr_spills,
                              "mfma_counts": stats.mfma_counts}}


def compile_batch(repo: AiterGit, out: Path, jobs: list[dict[str, Any]]) -> None:
    """Compile each job in this process, printing one JSON line per job (``error`` on a
    failure: the next job still runs)."""
    for job in jobs:
        try:
            record = compile_config(repo, out, job["kernel_name"], job["N"], job["K"],
                                    job["M"], job["id"])
        except Exception as exc:  # reported per job, in the manifest
            record = {"id": job["id"], "error": f"{type(exc).__name__}: {exc}"[-1500:]}
        print(json.dumps(record), flush=True)


def _compile_share(repo: AiterGit, out: Path, share: list[dict[str, Any]]
                   ) -> dict[str, dict[str, Any]]:
    """Run one ``compile-batch`` process over ``share``; records by job id."""
    if not share:
        return {}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(share, fh)
    cmd = [sys.executable, str(Path(__file__).resolve()), "compile-batch", "--aiter-git",
           str(repo.git_dir), "--commit", repo.commit, "--out", str(out), "--jobs-file",
           fh.name]
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH"))
                                 if p)
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": pythonpath})
    Path(fh.name).unlink(missing_ok=True)
    records = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            records[record["id"]] = record
    failure = (p.stderr or p.stdout)[-1500:] or f"exit status {p.returncode}"
    return {job["id"]: records.get(job["id"], {"error": failure}) for job in share}


def build_manifest(repo: AiterGit, out: Path, max_configs: int, wanted: Sequence[str],
                   jobs: int) -> list[dict[str, Any]]:
    """Compile the chosen configs for every (N, K) of their rows; write OUT/manifest.json
    in the layout scripts/validate_performance_model.py reads."""
    rows, _ = extract_rows(repo)
    by_id: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        by_id[config_id(r)].append(r)
    if wanted:
        missing = [w for w in wanted if w not in by_id]
        if missing:
            raise UsageError(f"--config: no gfx950 FlyDSL FP8 rows for {', '.join(missing)}")
        chosen = list(wanted)
    else:
        compilable = [c for c in by_id if not by_id[c][0]["async_copy"]]
        chosen = sorted(compilable, key=lambda c: (-len(by_id[c]), c))[:max_configs]
    work: list[dict[str, Any]] = []
    for cid in chosen:
        nk = collections.Counter((r["N"], r["K"]) for r in by_id[cid])
        for i, ((n, k), _) in enumerate(sorted(nk.items(), key=lambda x: (-x[1], x[0]))):
            work.append({"cid": cid, "primary": i == 0,
                         "id": cid if i == 0 else f"{cid}__N{n}_K{k}",
                         "kernel_name": by_id[cid][0]["kernel_name"], "N": n, "K": k,
                         "M": min(r["M"] for r in by_id[cid] if (r["N"], r["K"]) == (n, k))})
    print(f"{len(chosen)} configs, {len(work)} compiles", file=sys.stderr)
    shares = [work[i::max(1, jobs)] for i in range(max(1, jobs))]
    with ThreadPoolExecutor(len(shares)) as ex:
        done: dict[str, dict[str, Any]] = {}
        for records in ex.map(lambda share: _compile_share(repo, out, share), shares):
            done.update(records)
    results = [done[j["id"]] for j in work]
    manifest = []
    for cid in chosen:
        mine = [(j, r) for j, r in zip(work, results, strict=True) if j["cid"] == cid]
        job, primary = next((j, r) for j, r in mine if j["primary"])
        entry = {**primary, "id": cid, "kernel": KERNEL, "dtype": "e4m3",
                 "config": parse_kernel_name(job["kernel_name"]),
                 "compiled_for": {"N": job["N"], "K": job["K"], "M_runtime": job["M"]},
                 "isa": primary.get("isa") or str(out.resolve() / "isa" / f"{cid}.s"),
                 "other_NK_compiles": [{"id": j["id"], "N": j["N"], "K": j["K"],
                                        "error": r.get("error")}
                                       for j, r in mine if not j["primary"]],
                 "rows": [{k: r[k] for k in ("M", "N", "K", "us", "cu_num", "source_file")}
                          for r in by_id[cid]]}
        manifest.append(entry)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--aiter-git", type=Path, required=True, metavar="DIR",
                       help="a clone of ROCm/aiter (bare git dir or work tree)")
        p.add_argument("--commit", default=None, metavar="SHA",
                       help=f"commit to read (default HEAD; reference: {REFERENCE_COMMIT})")
        p.add_argument("--out", type=Path, required=True, metavar="DIR")

    common(sub.add_parser("rows", help=f"write OUT/{ROWS_CSV}"))
    comp = sub.add_parser("compile", help="compile one kernel name for one (N, K)")
    common(comp)
    comp.add_argument("--kernel-name", required=True, metavar="NAME")
    comp.add_argument("--N", type=int, required=True)
    comp.add_argument("--K", type=int, required=True)
    comp.add_argument("--M", type=int, default=16, help="runtime M of the dummy launch")
    comp.add_argument("--id", default=None, help="file stem (default: the config id)")
    batch = sub.add_parser("compile-batch", help="compile a JSON list of jobs (N, K, M, id, "
                                                 "kernel_name) in one process")
    common(batch)
    batch.add_argument("--jobs-file", type=Path, required=True)
    man = sub.add_parser("manifest", help="compile configs, write OUT/manifest.json")
    common(man)
    man.add_argument("--max-configs", type=int, default=24, metavar="N",
                     help="the N configs without async copy with the most rows (default "
                          "24; 102 are all of them at the reference commit)")
    man.add_argument("--config", action="append", default=[], metavar="ID",
                     help="compile this config id instead (aiter_fp8_s2_t16x64x512_a0_w0_x0 "
                          "...); repeatable")
    man.add_argument("--jobs", type=int, default=1, help="parallel compiles (default 1)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        repo = AiterGit(args.aiter_git, args.commit)
        if args.command == "rows":
            rows, left = extract_rows(repo)
            args.out.mkdir(parents=True, exist_ok=True)
            with (args.out / ROWS_CSV).open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=ROW_COLUMNS)
                writer.writeheader()
                writer.writerows(rows)
            print(json.dumps({"csv": str(args.out / ROWS_CSV), "commit": repo.commit,
                              "rows": len(rows), "configs": len({config_id(r) for r in rows}),
                              "left_out": left}))
        elif args.command == "compile-batch":
            compile_batch(repo, args.out, json.loads(args.jobs_file.read_text()))
        elif args.command == "compile":
            if min(args.N, args.K, args.M) <= 0:
                raise UsageError("--N, --K and --M must be positive")
            print(json.dumps(compile_config(repo, args.out, args.kernel_name, args.N, args.K,
                                            args.M, args.id)))
        else:
            if args.max_configs <= 0:
                raise UsageError("--max-configs must be positive")
            manifest = build_manifest(repo, args.out, args.max_configs, args.config,
                                      args.jobs)
            failed = failed_compiles(manifest)
            print(json.dumps({"manifest": str(args.out / "manifest.json"),
                              "configs": len(manifest), "failed_compiles": failed}))
            return 1 if failed else 0
    except UsageError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
