"""compile-check on the CPU: the catalog through real worker processes, the CLI, failures.

Also the CPU side of ``scripts/validate_rocm.py``: it must refuse to run here with a
clear message instead of aborting, and its numerics harness and tolerances are checked
with torch standing in for the kernel.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from inductor_flydsl.db.open import open_db
from inductor_flydsl.db.verify import verify_path
from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary, toolchain
from inductor_flydsl.flydsl_backend.builds.cross_compile import CompileResult
from inductor_flydsl.flydsl_backend.offer import configs, suites
from inductor_flydsl.flydsl_backend.offer import configs as configs_mod
from inductor_flydsl.flydsl_backend.offer.resources import estimate
from inductor_flydsl.flydsl_backend.specs import registry
from inductor_flydsl.numerics import tolerances
from inductor_flydsl.problems.keys import stable_id
from inductor_flydsl.template_loader import template_source_hash
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
gemm = catalog.load_template(catalog.TEMPLATE)
REPRESENTATIVE = registry.spec(catalog.TEMPLATE).representative()
MAIN_VARIANT = registry.spec(catalog.TEMPLATE).main_variant
needs_lld = pytest.mark.skipif(toolchain.find_ld_lld() is None,
                               reason=f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}")


def _rows(db_path: Path) -> dict[tuple, dict]:
    db = open_db(db_path, writable=False)
    try:
        return {(r["arch"], r["config_id"], r["op"], r["dtype"], r["layout"]): r
                for r in db.query("select * from compile_catalog")}
    finally:
        db.close()


def _job(config, arch, *, dtype="bf16", layout="nt", op="mm"):
    _, _, fits, reasons = estimate(config, dtype, arch)
    return catalog.Job(catalog.TEMPLATE, tuple(config.to_json().items()), arch, dtype, layout,
                       op, None if fits else "; ".join(reasons))


# ---------------------------------------------------------------------------
# Job lists (no compiling)
# ---------------------------------------------------------------------------


def test_default_job_set_covers_every_config_and_variant():
    jobs = catalog.build_jobs(["gfx950", "gfx942"])
    for arch in ("gfx950", "gfx942"):
        mine = [j for j in jobs if j.arch == arch]
        main = [j for j in mine if (j.dtype, j.layout, j.op) == MAIN_VARIANT]
        assert [gemm.GemmConfig(**j.config_json) for j in main] == list(configs_mod.DEFAULT)
        others = {(j.dtype, j.layout, j.op) for j in mine} - {MAIN_VARIANT}
        assert len(others) == len(gemm.DTYPES) * len(gemm.LAYOUTS) * len(gemm.OPS) - 1
        assert len(mine) == len(configs.DEFAULT) + 23
    rejected = [j for j in jobs if j.rejected]
    assert rejected and all(j.arch == "gfx942" and ("LDS" in j.rejected or (
        "stages" in j.rejected and "pipeline has at most 2 stages" in j.rejected))
        for j in rejected)
    assert len(catalog.build_jobs(["gfx950"], full=True)) == len(configs.DEFAULT) * 24
    assert {(j.dtype, j.layout, j.op) for j in catalog.build_jobs(["gfx950"], ops=["bmm"])} == {
        ("bf16", "nt", "bmm")}
    assert len(catalog.build_jobs(["gfx950"], "EXHAUSTIVE", limit=7)) == 7
    with pytest.raises(ValueError, match="arch"):
        catalog.build_jobs(["gfx90a"])


# ---------------------------------------------------------------------------
# Real cross-compiles in worker processes
# ---------------------------------------------------------------------------

LDS_OVERFLOW = gemm.GemmConfig(tile_m=16, tile_n=128, tile_k=128, waves_m=1, waves_n=4,
                               stages=2, group_m=1)  # 78 KiB of LDS: over gfx942's 64 KiB


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    db_path = tmp_path_factory.mktemp("catalog") / "catalog.db"
    jobs = catalog.build_jobs(["gfx950"], limit=3) + catalog.build_jobs(["gfx942"], limit=1)
    jobs.append(_job(REPRESENTATIVE, "gfx942", dtype="fp16", layout="tn", op="addmm"))
    failing = _job(LDS_OVERFLOW, "gfx942")
    assert failing.rejected  # the resource model rejects it: compiled only on request
    jobs.append(failing)
    run = catalog.run_catalog(jobs, workers=2, db_path=db_path, compile_rejected=True,
                              progress=False)
    return run, db_path, failing


@needs_lld
def test_catalog_rows_match_results(sample_run):
    run, db_path, failing = sample_run
    assert len(run.results) == 6
    rows = _rows(db_path)
    assert len(rows) == 6
    assert verify_path(db_path) == []
    for item in run.results:
        job, res = item.job, item.result
        row = rows[(job.arch, job.config_id, job.op, job.dtype, job.layout)]
        assert row["config_id"] == stable_id(json.loads(row["config"]))
        assert json.loads(row["config"]) == job.config_json
        assert row["template_hash"] == template_source_hash("gemm_dense")
        assert row["flydsl"] == catalog.flydsl_version() != "none"
        assert row["ok"] == int(res.ok)
        assert (row["vgprs"], row["lds_bytes"], row["vgpr_spills"]) == (
            res.vgprs, res.lds_bytes, res.vgpr_spills)
        assert json.loads(row["mfma"]) == res.mfma_counts
        assert row["compile_s"] == pytest.approx(res.compile_seconds)
        if job != failing:
            mnemonic = gemm.MFMA_MNEMONIC[(job.arch, job.dtype)]
            assert item.status == catalog.OK and res.ok, res.error
            assert set(res.mfma_counts) == {mnemonic} and res.mfma_counts[mnemonic] > 0
            assert row["vgpr_spills"] == row["sgpr_spills"] == row["scratch_bytes"] == 0
            assert row["lds_bytes"] == gemm.lds_bytes(gemm.GemmConfig(**job.config_json),
                                                      job.layout, job.arch)
            assert row["error"] is None


@needs_lld
def test_compiled_rejected_config_records_its_error(sample_run):
    run, db_path, failing = sample_run
    item = next(i for i in run.results if i.job == failing)
    assert item.status == catalog.FAILED and not item.accepted
    assert "local memory (78336) exceeds limit (65536)" in item.result.error
    row = _rows(db_path)[(failing.arch, failing.config_id, "mm", "bf16", "nt")]
    assert row["ok"] == 0 and "exceeds limit" in row["error"]
    assert row["lds_bytes"] == 78336  # figures are kept: they show the overshoot
    summary = catalog_summary.summarize(run)
    assert summary["clean"]  # a rejected config's failure is not an accepted failure
    g950 = summary["archs"]["gfx950"]
    assert (g950["ok"], g950["failed"], g950["spilled"]) == (3, 0, 0)
    assert g950["mfma"] == {"v_mfma_f32_16x16x32_bf16": sum(
        i.result.mfma_counts["v_mfma_f32_16x16x32_bf16"] for i in run.results
        if i.job.arch == "gfx950")}
    assert summary["archs"]["gfx942"]["rejected"] == 1
    assert g950["compile_s"]["min"] <= g950["compile_s"]["median"] <= g950["compile_s"]["max"]


def test_rejected_configs_are_recorded_without_compiling(tmp_path):
    job = _job(LDS_OVERFLOW, "gfx942")
    start = time.monotonic()
    run = catalog.run_catalog([job], db_path=tmp_path / "r.db", progress=False,
                              compile_fn="no_such_module:never_called")
    assert time.monotonic() - start < 10
    (item,) = run.results
    assert item.status == catalog.REJECTED
    row = next(iter(_rows(tmp_path / "r.db").values()))
    assert row["ok"] == 0 and row["error"].startswith("rejected by resource model: LDS 78336 B")
    assert row["compile_s"] == 0 and row["vgprs"] is None
    assert catalog_summary.summarize(run)["clean"]


# ---------------------------------------------------------------------------
# Worker crashes and timeouts (a stand-in compile function, run in the real workers)
# ---------------------------------------------------------------------------


def fake_compile(template, config, *, arch, dtype, layout, op):
    """Aborts for tile_m 16, hangs for tile_m 32, 'compiles' instantly otherwise."""
    if config["tile_m"] == 16:
        os.abort()
    if config["tile_m"] == 32:
        time.sleep(120)
    return CompileResult(template=template, source_hash=template_source_hash(template),
                         config=config, arch=arch, dtype=dtype, layout=layout, op=op, ok=True,
                         vgprs=64, agprs=0, total_vgprs=64, sgprs=20, lds_bytes=1024,
                         scratch_bytes=0, vgpr_spills=0, sgpr_spills=0,
                         mfma_counts={gemm.MFMA_MNEMONIC[(arch, dtype)]: 8},
                         compile_seconds=0.01)


def test_worker_crash_and_timeout_are_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # spawned workers import us
    c = gemm.GemmConfig
    crash = _job(c(tile_m=16, tile_n=64, tile_k=128, waves_m=1, waves_n=2, stages=2,
                   group_m=1), "gfx950")
    hang = _job(c(tile_m=32, tile_n=64, tile_k=128, waves_m=1, waves_n=2, stages=2,
                  group_m=1), "gfx950")
    fine = [_job(cfg, "gfx950") for cfg in configs_mod.DEFAULT if cfg.tile_m >= 64][:4]
    jobs = [crash, hang, *fine]
    run = catalog.run_catalog(jobs, workers=2, timeout_s=4, db_path=tmp_path / "c.db",
                              progress=False, compile_fn=f"{__name__}:fake_compile")
    status = {i.job: i for i in run.results}
    assert len(status) == len(jobs)
    assert status[crash].status == catalog.CRASHED
    assert "worker crashed (killed by SIGABRT)" in status[crash].result.error
    assert status[hang].status == catalog.TIMEOUT
    assert "timed out after 4 s" in status[hang].result.error
    assert all(status[j].status == catalog.OK for j in fine)
    rows = _rows(tmp_path / "c.db")
    assert len(rows) == len(jobs)
    assert rows[(crash.arch, crash.config_id, "mm", "bf16", "nt")]["ok"] == 0
    summary = catalog_summary.summarize(run)
    assert not summary["clean"]
    assert (summary["total"]["crashed"], summary["total"]["timeouts"]) == (1, 1)


# ---------------------------------------------------------------------------
# The CLI
# ---------------------------------------------------------------------------


@needs_lld
def test_cli_json_matches_db(tmp_path):
    db_path = tmp_path / "cli.db"
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "compile-check", "--arch", "gfx950",
         "--limit", "2", "--db", str(db_path), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["clean"] and out["db"] == str(db_path)
    assert out["archs"]["gfx950"]["ok"] == 2
    rows = _rows(db_path)
    assert len(rows) == len(out["results"]) == 2
    for r in out["results"]:
        row = rows[(r["arch"], r["config_id"], r["op"], r["dtype"], r["layout"])]
        assert json.loads(row["config"]) == r["config"]
        assert bool(row["ok"]) == r["ok"] and r["status"] == "ok"
        assert json.loads(row["mfma"]) == r["mfma"]
        c = r["config"]
        per_step = (c["tile_m"] // c["waves_m"] // 16) * (c["tile_n"] // c["waves_n"] // 16) * (
            c["tile_k"] // gemm.MFMA_K["gfx950"])
        (mnemonic, count), = r["mfma"].items()
        assert mnemonic == "v_mfma_f32_16x16x32_bf16"
        assert count > 0 and count % per_step == 0  # whole K steps, however many copies
        for key in ("vgprs", "agprs", "sgprs", "lds_bytes", "vgpr_spills", "sgpr_spills",
                    "scratch_bytes", "template_hash"):
            assert row[key] == r[key], key
    vgprs = [r["vgprs"] for r in out["results"]]
    assert out["archs"]["gfx950"]["vgprs"] == [min(vgprs), max(vgprs)]


def test_cli_rejects_bad_arguments():
    proc = subprocess.run([sys.executable, "-m", "inductor_flydsl", "compile-check", "--arch",
                           "gfx950", "--limit", "0", "--no-db"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 2 and "limit must be positive" in proc.stderr


# ---------------------------------------------------------------------------
# scripts/validate_rocm.py on a host without ROCm
# ---------------------------------------------------------------------------


def _load_validate_rocm():
    return load_script("validate_rocm")


def test_validate_rocm_refuses_cpu_host_without_aborting():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "validate_rocm.py")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])  # not 134 (abort)
    assert "no ROCm" in proc.stderr and "torch.version.hip is None" in proc.stderr
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "validate_rocm.py"),
                           "--json", "--quick"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["preflight"]["ok"] is False


PREFLIGHT_CHILD = """
import json, torch
from inductor_flydsl.cli.rocm.validate import preflight
torch.version.hip = "6.4.1"
first = preflight().message
torch.version.hip = "7.0.2"
def no_gpu_query():
    raise AssertionError("GPU queried before the HIP runtime was found")
torch.cuda.is_available = no_gpu_query
result = preflight()
print(json.dumps([first, result.ok, result.message]))
"""


def test_validate_rocm_preflight_checks_runtime_before_anything(tmp_path):
    """In a fresh process (another test's stand-in HIP library, loaded in this one,
    answers to libamdhip64.so.7 by its soname): a ROCm 6 torch is refused by name, and a
    ROCm 7 one without the runtime before the GPU is asked anything."""
    done = subprocess.run([sys.executable, "-c", PREFLIGHT_CHILD], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    first, ok, message = json.loads(done.stdout.strip().splitlines()[-1])
    assert "needs ROCm 7" in first
    assert not ok and "libamdhip64.so.7 cannot be loaded" in message


# ---------------------------------------------------------------------------
# Tolerances and the numerics harness, with torch standing in for the kernel
# ---------------------------------------------------------------------------


def test_tolerance_scales_with_sqrt_k():
    atol, rtol = tolerances.tolerance("bf16", 4096)
    assert rtol == 2**-7 and atol == pytest.approx(2 * 2**-8 * 64)
    assert tolerances.tolerance("bf16", 16384)[0] == pytest.approx(2 * atol)
    assert tolerances.tolerance("fp16", 4096)[1] == 2**-10
    with pytest.raises(ValueError):
        tolerances.tolerance("int8", 64)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_tolerance_admits_torch_and_catches_a_lost_k_step(dtype):
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float16
    gen = torch.Generator().manual_seed(0)
    m, n, k = 64, 4096, 4096  # a suite shape, cut to 64 rows for CPU time
    a = torch.randn(m, k, generator=gen).to(torch_dtype)
    b = torch.randn(n, k, generator=gen).to(torch_dtype).t()
    ref = a.double() @ b.double()
    assert tolerances.check_close(a @ b, ref, dtype, k).ok  # torch's own bf16/fp16 GEMM
    lost = (a[:, 64:].double() @ b[64:].double()).to(torch_dtype)  # first K step missing
    report = tolerances.check_close(lost, ref, dtype, k)
    assert not report.ok and report.worst > 3
    nan = ref.clone().to(torch_dtype)
    nan[3, 5] = math.nan
    assert tolerances.check_close(nan, ref, dtype, k).nonfinite == 1


@pytest.mark.parametrize("layout", gemm.LAYOUTS)
@pytest.mark.parametrize("op", gemm.OPS)
def test_numerics_harness_operands_and_reference(monkeypatch, layout, op):
    """validate_rocm builds operands the kernel accepts; a correct 'kernel' passes and a
    wrong one fails (torch computes in place of the FlyDSL launch)."""
    vr = _load_validate_rocm()
    seen = []

    def torch_launch(a, b, bias, out, alpha, beta, config, stream=None, drop_k=0, runner=None):
        args = gemm.launcher_args(a, b, bias, out, alpha, beta)  # the kernel's own checks
        assert gemm.infer_layout(a, b) == layout
        req = gemm.divisibility_requirements(config, op, layout)
        for ld in args[7:10]:
            assert ld % req["ld_multiple"] == 0
        seen.append(args[7:10])
        res = alpha * torch.matmul(a[..., drop_k:].float(), b[..., drop_k:, :].float())
        if bias is not None:
            res = res + beta * bias.float()
        out.copy_(res)

    monkeypatch.setattr(gemm, "launch", torch_launch)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    config = REPRESENTATIVE
    for i, shape in enumerate(suites.NUMERICS_SHAPES[:4]):
        row = vr.numerics_case(config, dtype="bf16", layout=layout, op=op, shape=shape,
                               device="cpu", pad=8 if i % 2 else 0, batch=2, seed=i)
        assert row["ok"], row
        assert row["torch_ok"]
        m, n, k = row["shape"]
        assert k % config.tile_k == 0 and n % 8 == 0 and (layout[0] == "n" or m % 8 == 0)
    m, n, k = vr.adapt_shape(suites.NUMERICS_SHAPES[1], config, layout, op)
    lda, ldb, _ = seen[1]  # the padded case: leading dimensions exceed the extents by 8
    assert lda == (k + 8 if layout[0] == "n" else m + 8)
    assert ldb == (n + 8 if layout[1] == "n" else k + 8)
    monkeypatch.setattr(gemm, "launch", lambda *a, **kw: torch_launch(*a, **kw, drop_k=64))
    row = vr.numerics_case(config, dtype="bf16", layout=layout, op=op, shape=(64, 64, 256),
                           device="cpu")
    assert not row["ok"] and "out of tolerance" in row["error"]


def test_validate_rocm_report_formats():
    vr = _load_validate_rocm()
    speed = {"rows": [{"shape": [8, 4096, 4096], "flydsl_ms": 0.01,
                       "flydsl_config": REPRESENTATIVE.to_json(), "aten_ms": 0.012,
                       "triton_ms": None, "speedup": 1.2}],
             "geomean_speedup": 1.2, "wins": 1, "ties": 0, "losses": 0}
    text = vr.markdown_report({"preflight": {"message": "MI355X (gfx950)"}, "quick": True,
                               "numerics": {"cases": 3, "failed": 0, "failures": [],
                                            "torch_out_of_tolerance": 0},
                               "speed": speed})
    assert "| 8x4096x4096 | 0.0100 | 64x128x64 w2x2 s2 g8 | 0.0120 | - | 1.200 |" in text
    assert "Geomean speedup over the faster of ATen and Triton: 1.200" in text
    assert len(suites.DENSE_BF16_NT_SUITE) == 15
    assert set(suites.DENSE_BF16_NT_QUICK) <= set(suites.DENSE_BF16_NT_SUITE)
