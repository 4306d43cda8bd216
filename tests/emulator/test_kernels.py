"""The real compiled dense GEMM kernels in the emulator: every DEFAULT config and every
(op, layout, dtype) variant on gfx950 and gfx942 is correct, and deliberate corruptions
of a real kernel's ISA are caught."""

import json
import re
import subprocess
import sys

import pytest

from inductor_flydsl.emulator.gemm import emulate_gemm, tail_shape
from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary, toolchain
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.specs.gemm_dense import REPRESENTATIVE
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

gemm = load_template("gemm_dense")
CONFIG = REPRESENTATIVE  # 64x128x64, 2x2 waves, double-buffered


@pytest.mark.full_catalog  # the shipped catalog records this run; CI checks it is current and
# re-runs a covering sample (tests/test_shipped_catalog.py)
@pytest.mark.slow
def test_every_default_config_and_variant_is_correct_in_the_emulator(tmp_path):
    jobs = catalog.build_jobs(["gfx950", "gfx942"])
    run = catalog.run_catalog(jobs, workers=2, db_path=tmp_path / "c.db", progress=False,
                              compile_fn=catalog.EMULATE_COMPILE_FN)
    accepted = [item for item in run.results if item.accepted]
    variants = {(i.job.arch, i.job.dtype, i.job.layout, i.job.op) for i in accepted}
    assert len(variants) == 2 * 24  # every (dtype, layout, op) on both archs
    wrong = [f"{i.job.describe()}: {i.result.error or (i.result.emulation or {}).get('error')}"
             for i in accepted if not (i.result.emulation or {}).get("ok")]
    assert wrong == []
    summary = catalog_summary.summarize(run)
    assert summary["clean"]
    from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT

    per_arch = summary["archs"]["gfx950"]
    assert per_arch["emulated_ok"] == per_arch["ok"] == len(DEFAULT) + 23
    import sqlite3

    rows = sqlite3.connect(tmp_path / "c.db").execute(
        "select count(*), sum(emulation_ok) from compile_catalog where emulated = 1").fetchone()
    assert rows == (len(accepted), len(accepted))


@pytest.fixture(scope="module")
def kernel_isa(tmp_path_factory):
    result = compile_and_emulate("gemm_dense", CONFIG, arch="gfx950", dtype="bf16",
                                 layout="nt", op="mm",
                                 dump_dir=tmp_path_factory.mktemp("isa"))
    assert result.ok and result.emulation["ok"], result.emulation
    return open(result.isa_path).read()


def _emulate(text):
    m, n, k = tail_shape(CONFIG, "mm", "nt")  # every loop of the kernel runs
    return emulate_gemm(text, gemm, CONFIG, op="mm", dtype="bf16", layout="nt", m=m, n=n, k=k)


def test_swapped_mfma_operands_are_caught(kernel_isa):
    mutated, count = re.subn(r"(v_mfma_\S+ v\[\d+:\d+\]), (v\[\d+:\d+\]), (v\[\d+:\d+\])",
                             r"\1, \3, \2", kernel_isa, count=1)
    assert count == 1
    result = _emulate(mutated)
    assert not result.ok and "elements outside" in result.error


def test_changed_lds_read_offset_is_caught(kernel_isa):
    match = re.search(r"(ds_read_b128 v\[\d+:\d+\], v\d+ offset:)(\d+)", kernel_isa)
    assert match
    mutated = (kernel_isa[: match.start()] + match.group(1) + str(int(match.group(2)) + 16)
               + kernel_isa[match.end():])
    result = _emulate(mutated)
    assert not result.ok and "elements outside" in result.error


def test_each_deleted_barrier_is_reported_as_a_race(kernel_isa):
    barriers = [m.start() for m in re.finditer(r"\ts_barrier\n", kernel_isa)]
    assert barriers
    for position in barriers:
        mutated = kernel_isa[:position] + kernel_isa[position + len("\ts_barrier\n"):]
        result = _emulate(mutated)
        assert not result.ok
        assert result.races and "with no barrier between them" in result.races[0]


def test_emulate_cli_exit_status(kernel_isa, tmp_path):
    good, bad = tmp_path / "good.s", tmp_path / "bad.s"
    good.write_text(kernel_isa)
    bad.write_text(kernel_isa.replace("\ts_barrier\n", "", 1))
    base = [sys.executable, "-m", "inductor_flydsl", "emulate", "--config",
            json.dumps(CONFIG.to_json()), "--op", "mm", "--shape", "72x136x192", "--json"]
    ok = subprocess.run([*base, "--isa", str(good)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] is True
    wrong = subprocess.run([*base, "--isa", str(bad)], capture_output=True, text=True,
                           timeout=300)
    assert wrong.returncode == 1
    report = json.loads(wrong.stdout)
    assert report["ok"] is False and report["races"]
    usage = subprocess.run([*base[:-1], "--isa", str(good), "--arch", "gfx942"],
                           capture_output=True, text=True, timeout=300)
    assert usage.returncode == 2 and "compiled for gfx950" in usage.stderr
