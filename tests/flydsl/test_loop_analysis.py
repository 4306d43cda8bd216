"""Main-loop analysis of compiled FlyDSL kernels: instruction mix and llvm-mca estimate.

Two kinds of input, both real ISA:

* ``data/*.s``: final ISA of ``templates/gemm_dense.py`` as committed in bd127e4 (source
  hash 9ff43c6129f74061), gfx950 bf16 mm 64x64x64 w2x2 s2 g8, NN and NT, kept so the
  exact mix of a known kernel can be checked while the template changes;
* fresh cross-compiles of today's template (checked against the raw ISA text and the
  config, not against fixed numbers).

llvm-mca runs for real; its tests skip, with the reason, without ``llvm-mca-22``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.builds import catalog, catalog_summary, toolchain
from inductor_flydsl.flydsl_backend.builds.catalog import CatalogRun, CatalogWriter, JobResult
from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_config
from inductor_flydsl.isa import loop_analysis
from inductor_flydsl.isa.loop_analysis import (
    NO_LOOP,
    analyze_isa,
    find_main_loop,
    instruction_mix,
    lds_access_bytes,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
NN_ISA = (DATA / "gfx950_bf16_nn_mm_64x64x64_w2x2_s2.s").read_text()
NT_ISA = (DATA / "gfx950_bf16_nt_mm_64x64x64_w2x2_s2.s").read_text()

needs_mca = pytest.mark.skipif(loop_analysis.find_llvm_mca() is None,
                               reason=f"{loop_analysis.LLVM_MCA} not on PATH "
                                      f"({loop_analysis.INSTALL_HINT})")
needs_compiler = pytest.mark.skipif(
    toolchain.find_ld_lld() is None, reason=f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}")

gemm = catalog.load_template(catalog.TEMPLATE)
BASE = {"tile_m": 64, "tile_n": 64, "tile_k": 64, "waves_m": 2, "waves_n": 2, "stages": 2,
        "group_m": 8}
WIDE = {"tile_m": 64, "tile_n": 128, "tile_k": 64, "waves_m": 2, "waves_n": 2, "stages": 2,
        "group_m": 8}
# (config, arch, layout): every layout family once, and gfx942's 16x16x16 MFMA.
LIVE = [(BASE, "gfx950", "nt"), (BASE, "gfx950", "nn"), (WIDE, "gfx942", "tn")]


def _mfmas_per_k_step(config: dict[str, int], arch: str) -> int:
    return ((config["tile_m"] // config["waves_m"] // 16)
            * (config["tile_n"] // config["waves_n"] // 16)
            * (config["tile_k"] // gemm.MFMA_K[arch]))


def _raw_loop_lines(text: str, label: str) -> list[str]:
    """The loop's lines read straight from the text: after ``label:`` up to (without) the
    last branch back to it, comments and directives dropped (an independent reading)."""
    lines = [line.split(";")[0].strip() for line in text.splitlines()]
    start = lines.index(f"{label}:")
    end = max(i for i, line in enumerate(lines)
              if re.match(rf"s_c?branch\w*\s+{re.escape(label)}$", line))
    return [line for line in lines[start + 1:end]
            if line and not line.startswith(".") and not line.endswith(":")]


# ---------------------------------------------------------------------------
# The stored ISA: exact figures
# ---------------------------------------------------------------------------


def test_nn_loop_has_two_byte_lds_writes():
    loop = find_main_loop(NN_ISA)
    assert loop is not None and loop.label == ".LBB0_2"
    mix = instruction_mix(loop.instructions)
    assert mix["mfma"] == {"v_mfma_f32_16x16x32_bf16": 8}
    # The element-wise transpose into LDS of the pre-rework template: 16 two-byte writes.
    assert mix["ds_write"] == {"ds_write_b128": 2, "ds_write_b16": 8, "ds_write_b16_d16_hi": 8}
    assert mix["ds_write_bytes"] == {"2": 16, "16": 2}
    assert mix["ds_write_min_bytes"] == 2
    assert mix["ds_read"] == {"ds_read_b128": 8}
    assert (mix["vmem_load"], mix["vmem_load_lds"], mix["s_barrier"]) == (4, 0, 1)
    assert mix["total"] == len(loop.instructions) == len(_raw_loop_lines(NN_ISA, loop.label))


def test_nt_loop_has_only_sixteen_byte_lds_writes():
    loop = find_main_loop(NT_ISA)
    assert loop is not None
    mix = instruction_mix(loop.instructions)
    # The compiler unrolled this loop twice: 2 K steps of 8 MFMAs per trip.
    assert mix["mfma_total"] == 2 * _mfmas_per_k_step(BASE, "gfx950") == 16
    assert mix["ds_write"] == {"ds_write_b128": 8} and mix["ds_write_min_bytes"] == 16
    assert not any(line.startswith(("s_branch", "s_cbranch")) and loop.label in line
                   for line in loop.instructions)  # the back branch is dropped


def test_instructions_outside_the_loop_are_counted():
    text = "\n".join([".text", "k:", "s_load_dwordx2 s[0:1], s[4:5], 0", "v_mov_b32 v0, 0",
                      ".LBB0_1:", "v_mfma_f32_16x16x32_bf16 a[0:3], v[0:3], v[4:7], a[0:3]",
                      "s_add_i32 s1, s1, 1", "s_cbranch_scc1 .LBB0_1",
                      "global_store_dwordx2 v[0:1], v[2:3], off", "s_endpgm"])
    analysis = analyze_isa(text, "gfx950", mca=False)
    assert analysis.instructions == 2  # the MFMA and the add (the back branch is dropped)
    assert analysis.outside_instructions == 4  # two before, the store and s_endpgm after


def test_lds_widths_and_mix_categories():
    assert [lds_access_bytes(n) for n in ("ds_write_b16", "ds_write_b16_d16_hi", "ds_write_b8",
                                          "ds_write_b128", "ds_write2_b64", "ds_read_u16",
                                          "ds_read_b64_tr_b16", "ds_read2st64_b32")] == [
        2, 2, 1, 16, 16, 2, 8, 8]
    mix = instruction_mix(["buffer_load_dwordx4 v1, s[4:7], 0 offen lds",
                           "buffer_load_dwordx4 v[2:5], v1, s[4:7], 0 offen",
                           "global_load_lds_dwordx4 v[2:3], off", "s_waitcnt vmcnt(0)",
                           "s_barrier", "s_add_i32 s1, s1, 1", "s_nop 0",
                           "v_add_u32_e32 v1, v2, v3"])
    assert (mix["vmem_load"], mix["vmem_load_lds"]) == (3, 2)
    assert (mix["s_waitcnt"], mix["s_barrier"], mix["salu"], mix["other"], mix["valu"]) == (
        1, 1, 1, 1, 1)


def test_no_loop_gives_a_clear_result():
    # The same kernel with its back branch removed: straight-line code, no main loop.
    straight = re.sub(r"^\s*s_cbranch_\w+\s+\.LBB0_2\s*$", "", NN_ISA, flags=re.MULTILINE)
    assert find_main_loop(straight) is None
    result = analyze_isa(straight, "gfx950")
    assert result.main_loop is False and result.reason == NO_LOOP
    assert result.mca is None and result.mix == {}
    assert json.loads(json.dumps(result.to_json()))["reason"].startswith("no main loop")
    assert analyze_isa("", "gfx950").main_loop is False


@needs_mca
def test_mca_estimate_of_stored_kernels():
    nn = analyze_isa(NN_ISA, "gfx950").mca
    nt = analyze_isa(NT_ISA, "gfx950").mca
    assert nn is not None and nt is not None
    # LLVM 22's gfx950 model: 4 cycles per v_mfma_f32_16x16x32_bf16, measured on a block
    # of independent MFMAs (NOTES section 7).
    assert nn["model_cycles_by_mfma"] == {"v_mfma_f32_16x16x32_bf16": 4.0}
    assert nn["mfma_per_trip"] == 8 and nt["mfma_per_trip"] == 16
    for est in (nn, nt):
        assert est["mad64_substituted"] == 0
        assert est["ratio"] == pytest.approx(
            est["cycles_per_trip"] / (est["mfma_per_trip"] * est["model_cycles_per_mfma"]),
            rel=1e-2)
    # Element-wise LDS transposes cost more per MFMA than 16-byte writes.
    assert nn["ratio"] > nt["ratio"] > 1.0


@needs_mca
def test_llvm_mca_failure_is_a_reason_not_an_error():
    result = analyze_isa(NN_ISA, "gfx000")  # a CPU llvm-mca does not know
    assert result.main_loop and result.mix["mfma_total"] == 8
    assert result.mca is None
    assert "llvm-mca-22 -mcpu=gfx000 failed" in result.mca_unavailable
    assert "\n" not in result.mca_unavailable


# Six lines of the pre-rework template's gfx950 TN 64x256x32 loop on which llvm-mca-22
# never finishes (two-uop v_mad_u64_u32 between ds_reads and the MFMA that waits on them).
HANGS_LLVM_MCA = (
    "ds_read_b128 v[94:97], v78 offset:11520",
    "ds_read_b128 v[100:103], v88",
    "ds_read_b128 v[104:107], v88 offset:1280",
    "v_or_b32_e32 v77, s5, v70",
    "v_mad_u64_u32 v[78:79], s[20:21], v77, s7, v[66:67]",
    "v_mfma_f32_16x16x32_bf16 v[22:25], v[94:97], v[104:107], v[22:25]",
)


@needs_mca
def test_llvm_mca_hang_is_worked_around(monkeypatch):
    monkeypatch.setattr(loop_analysis, "MCA_TIMEOUT_S", 3.0)
    with pytest.raises(loop_analysis.McaHang, match="did not finish in 3 s"):
        loop_analysis.run_mca("\n".join(HANGS_LLVM_MCA) + "\n", "gfx950", iterations=1)
    est = loop_analysis.mca_estimate(loop_analysis.MainLoop(".L", HANGS_LLVM_MCA), "gfx950")
    assert est["mad64_substituted"] == 1 and est["mfma_per_trip"] == 1
    assert est["cycles_per_trip"] > 0 and est["ratio"] > 0


def test_missing_llvm_mca_leaves_the_estimate_absent(tmp_path):
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if not (Path(p) / loop_analysis.LLVM_MCA).exists())
    isa = DATA / "gfx950_bf16_nn_mm_64x64x64_w2x2_s2.s"
    code = ("import json, sys; from inductor_flydsl.isa.loop_analysis import "
            "analyze_isa; print(json.dumps(analyze_isa(open(sys.argv[1]).read(), "
            "'gfx950').to_json()))")
    proc = subprocess.run([sys.executable, "-c", code, str(isa)], capture_output=True,
                          text=True, env={**os.environ, "PATH": path}, cwd=ROOT, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["main_loop"] is True and out["mix"]["mfma_total"] == 8
    assert out["mca"] is None
    assert out["mca_unavailable"] == ("llvm-mca-22 not on PATH; install Debian's llvm-22 "
                                      "(scripts/install.sh does)")


# ---------------------------------------------------------------------------
# Fresh compiles of today's template
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each LIVE (config, arch, layout) compiled once, with its dump kept."""
    pytest.importorskip("flydsl")
    dump = tmp_path_factory.mktemp("loop_dump")
    cache: dict = {}

    def get(config: dict[str, int], arch: str, layout: str):
        key = (tuple(config.items()), arch, layout)
        if key not in cache:
            cache[key] = compile_config("gemm_dense", config, arch=arch, dtype="bf16",
                                        layout=layout, op="mm", dump_dir=dump)
        return cache[key]

    return get


@needs_compiler
@pytest.mark.parametrize(("config", "arch", "layout"), LIVE)
def test_compiled_kernel_main_loop(compiled, config, arch, layout):
    result = compiled(config, arch, layout)
    assert result.ok, result.error
    analysis = result.loop_analysis
    assert analysis is not None and analysis["main_loop"], analysis
    text = Path(result.isa_path).read_text()
    raw = _raw_loop_lines(text, analysis["label"])
    mix = analysis["mix"]
    assert mix == instruction_mix(find_main_loop(text).instructions)
    assert mix["total"] == analysis["instructions"] == len(raw)
    parts = ("mfma_total", "ds_read_total", "ds_write_total", "vmem_load", "vmem_store",
             "valu", "salu", "s_waitcnt", "s_barrier", "other")
    assert sum(mix[p] for p in parts) == mix["total"]
    # Every LDS write of the loop, counted from the raw text, with its width.
    writes = [line.split()[0] for line in raw if line.startswith("ds_write")]
    assert sum(mix["ds_write"].values()) == len(writes)
    widths = [lds_access_bytes(w) for w in writes]
    assert mix["ds_write_min_bytes"] == (min(widths) if widths else None)
    # Each trip brings operand tiles into LDS: by ds_write or by direct-to-LDS loads.
    assert mix["ds_write_total"] + mix["vmem_load_lds"] > 0
    mnemonic = gemm.MFMA_MNEMONIC[(arch, "bf16")]
    per_step = _mfmas_per_k_step(config, arch)
    assert set(mix["mfma"]) == {mnemonic}
    assert mix["mfma_total"] % per_step == 0 and mix["mfma_total"] >= per_step


@needs_compiler
@needs_mca
@pytest.mark.parametrize(("config", "arch", "layout"), LIVE)
def test_compiled_kernel_mca_ratio(compiled, config, arch, layout):
    result = compiled(config, arch, layout)
    mca = result.loop_analysis["mca"]
    assert mca is not None, result.loop_analysis["mca_unavailable"]
    assert isinstance(mca["ratio"], float) and mca["ratio"] > 0
    assert mca["mfma_per_trip"] == result.loop_analysis["mix"]["mfma_total"]
    assert mca["model_cycles_per_mfma"] > 0 and mca["cycles_per_trip"] > 0
    assert mca["ratio"] == pytest.approx(
        mca["cycles_per_trip"] / (mca["mfma_per_trip"] * mca["model_cycles_per_mfma"]),
        rel=1e-2)


@needs_compiler
def test_catalog_records_the_loop_figures(compiled, tmp_path):
    items = []
    for config, arch, layout in LIVE:
        job = catalog.Job(catalog.TEMPLATE, tuple(config.items()), arch, "bf16", layout, "mm")
        items.append(JobResult(job, catalog.OK, compiled(config, arch, layout)))
    writer = CatalogWriter(tmp_path / "c.db")
    for item in items:
        writer.add(item)
    writer.close()
    import sqlite3

    with sqlite3.connect(tmp_path / "c.db") as db:
        db.row_factory = sqlite3.Row
        rows = {(r["arch"], r["layout"]): r for r in db.execute("select * from compile_catalog")}
    for item in items:
        row, a = rows[(item.job.arch, item.job.layout)], item.result.loop_analysis
        assert row["loop_found"] == 1
        assert json.loads(row["loop_mix"]) == a["mix"]
        assert row["loop_mfma"] == a["mix"]["mfma_total"]
        mca = a["mca"] or {}
        assert row["mca_ratio"] == mca.get("ratio")
        assert row["loop_cycles"] == mca.get("cycles_per_trip")
        assert row["mfma_model_cycles"] == mca.get("model_cycles_per_mfma")
        assert row["mca_note"] == a["mca_unavailable"]
        assert row["loop_outside"] == a["outside_instructions"] and row["loop_outside"] > 0
    summary = catalog_summary.summarize(CatalogRun(results=items))
    for arch in ("gfx950", "gfx942"):
        ratios = [i.result.loop_analysis["mca"]["ratio"] for i in items
                  if i.job.arch == arch and i.result.loop_analysis["mca"]]
        s = summary["archs"][arch]
        assert s["main_loops"] == sum(1 for i in items if i.job.arch == arch)
        assert s["mca_ratio"] == ([min(ratios), max(ratios)] if ratios else None)


@needs_compiler
def test_explain_isa_json(tmp_path):
    isa_dir = tmp_path / "isa"
    proc = subprocess.run(
        [sys.executable, "-m", "inductor_flydsl", "explain", "--op", "mm", "--shape",
         "96x64x64", "--layout", "nn", "--arch", "gfx950", "--isa", str(isa_dir), "--json",
         "--db", str(tmp_path / "none.db")],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["eligible"] and out["configs"]
    files = sorted(isa_dir.glob("*.s"))
    assert len(files) == len(out["configs"])
    for rank, entry in enumerate(out["configs"], 1):
        path = Path(entry["isa_path"])
        assert path.parent == isa_dir and path.name.startswith(f"{rank:02d}_gfx950_bf16_nn_mm_")
        assert "v_mfma_f32_16x16x32_bf16" in path.read_text()
        tiles = -(-96 // entry["tile_m"]) * -(-64 // entry["tile_n"])
        assert entry["workgroups"] == tiles and entry["grid"] == [tiles, 1, 1]
        assert entry["main_loop"] is True
        mix = entry["loop_mix"]
        assert mix["mfma_total"] % _mfmas_per_k_step(entry, "gfx950") == 0
        assert mix["ds_write_total"] + mix["vmem_load_lds"] > 0
        if loop_analysis.find_llvm_mca() is None:
            assert entry["mca"] is None and "not on PATH" in entry["mca_unavailable"]
        else:
            assert entry["mca"]["ratio"] > 0
            assert entry["mca"]["mfma_per_trip"] == mix["mfma_total"]
