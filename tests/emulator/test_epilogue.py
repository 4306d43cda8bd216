"""Fused epilogues of the dense template: real cross-compiles run in the ISA emulator.

Each fused kernel runs on its config's tail problem (full tile plus M and N tails, every
part of the K loop) with exact inputs, against the epilogue's torch reference
(``emulator/gemm.py``, ``tolerances.check_epilogue``); its main K loop must be the plain
kernel's, instruction for instruction. The plain kernel itself must compile to what the
shipped compile catalog recorded before fused epilogues existed.
"""

from __future__ import annotations

import json
import re
import runpy
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inductor_flydsl.emulator.gemm import emulate_gemm, tail_shape
from inductor_flydsl.flydsl_backend.builds import toolchain
from inductor_flydsl.flydsl_backend.builds.cross_compile import compile_config
from inductor_flydsl.flydsl_backend.builds.emulated import compile_and_emulate
from inductor_flydsl.flydsl_backend.offer.configs import DEFAULT
from inductor_flydsl.flydsl_backend.specs.gemm_dense import REPRESENTATIVE
from inductor_flydsl.problems.epilogue_spec import EpilogueSpec
from inductor_flydsl.problems.keys import stable_id
from inductor_flydsl.template_loader import load_template

pytest.importorskip("flydsl")
if toolchain.find_ld_lld() is None:
    pytest.skip(f"no AMDGPU-capable ld.lld: {toolchain.FIX_HINT}", allow_module_level=True)

gemm = load_template("gemm_dense")
ROOT = Path(__file__).resolve().parents[2]
SMALL = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1, waves_n=1, stages=2,
                        group_m=1)  # DEFAULT[0]: the fastest to compile and emulate
MEDIUM = REPRESENTATIVE  # 64x128x64, 2x2 waves


def spec(steps: list, operands: tuple[tuple[str, str], ...] = (),
         out: str = "bfloat16") -> str:
    return EpilogueSpec.from_json({"operands": [{"kind": k, "dtype": d} for k, d in operands],
                                   "steps": steps, "out_dtype": out}).text()


BF, F16, F32 = "bfloat16", "float16", "float32"
BIAS_RELU = spec([["add", "acc", "x0"], ["relu", "s0"]], (("col", BF),))
CHAIN = spec([["add", "acc", "x0"], ["gelu_tanh", "s0"], ["mul", "s1", "x1"],
              ["sub", "s2", "x2"]], (("col", BF), ("row", F32), ("tile", BF)))
MISC = spec([["mul", "acc", 0.5], ["erf", "s0"], ["neg", "s1"], ["exp", "s2"],
             ["minimum", "s3", 2.0], ["maximum", "s4", "acc"], ["div", "s5", "x0"]],
            (("col", F32),), F32)
# (arch, config, dtype, layout, op, epilogue)
CASES = [
    ("gfx950", SMALL, "bf16", "nt", "addmm", BIAS_RELU),
    ("gfx950", SMALL, "bf16", "nt", "mm", spec([["gelu_erf", "acc"]], out=F32)),
    ("gfx950", SMALL, "bf16", "nt", "mm", spec([["gelu_tanh", "acc"]], out=F32)),
    ("gfx950", SMALL, "bf16", "nt", "mm", spec([["silu", "acc"]])),
    ("gfx950", SMALL, "bf16", "nt", "mm", spec([["sigmoid", "acc"]], out=F32)),
    ("gfx950", SMALL, "bf16", "nt", "mm", spec([["tanh", "acc"]], out=F32)),
    ("gfx950", SMALL, "bf16", "nt", "addmm", CHAIN),
    ("gfx950", SMALL, "bf16", "nt", "mm", MISC),
    ("gfx950", MEDIUM, "fp16", "tn", "addmm", spec([["add", "acc", "x0"]], (("tile", F16),),
                                                   F16)),
    ("gfx942", SMALL, "bf16", "nt", "addmm", BIAS_RELU),
    ("gfx942", SMALL, "bf16", "nt", "mm", spec([["gelu_erf", "acc"]], out=F32)),
    ("gfx942", SMALL, "fp16", "nt", "mm", MISC),
    ("gfx942", MEDIUM, "bf16", "nn", "addmm", CHAIN),
]


@pytest.fixture(scope="module")
def plain_loops():
    """The plain kernel's main-loop mix and llvm-mca ratio per variant, compiled once."""
    cache: dict = {}

    def get(arch, config, dtype, layout, op):
        key = (arch, config, dtype, layout, op)
        if key not in cache:
            result = compile_config("gemm_dense", config, arch=arch, dtype=dtype,
                                    layout=layout, op=op)
            assert result.ok, result.error
            cache[key] = result.loop_analysis
        return cache[key]

    return get


def _case_id(case: tuple) -> str:
    arch, config, dtype, layout, op, epilogue = case
    ops = "-".join(step[0] for step in json.loads(epilogue)["steps"])
    return f"{arch}-{config.tile_m}x{config.tile_n}-{dtype}-{layout}-{op}-{ops}"


@pytest.mark.parametrize(("arch", "config", "dtype", "layout", "op", "epilogue"), CASES,
                         ids=[_case_id(c) for c in CASES])
def test_fused_epilogue_is_correct_and_leaves_the_main_loop_alone(
        plain_loops, arch, config, dtype, layout, op, epilogue):
    result = compile_and_emulate("gemm_dense", config, arch=arch, dtype=dtype, layout=layout,
                                 op=op, epilogue=epilogue)
    assert result.ok, result.error
    assert result.epilogue == epilogue
    assert result.scratch_bytes == 0 and result.vgpr_spills == 0 and result.sgpr_spills == 0
    assert result.emulation["ok"], result.emulation["error"]
    assert result.emulation["epilogue"] == epilogue
    plain = plain_loops(arch, config, dtype, layout, op)
    assert result.loop_analysis["mix"] == plain["mix"]
    assert result.loop_analysis["mca"] == plain["mca"]


@pytest.fixture(scope="module")
def fused_isa(tmp_path_factory):
    epilogue = spec([["gelu_erf", "acc"]], out=F32)
    result = compile_and_emulate("gemm_dense", SMALL, arch="gfx950", dtype="bf16",
                                 layout="nt", op="mm", epilogue=epilogue,
                                 dump_dir=tmp_path_factory.mktemp("isa"))
    assert result.ok and result.emulation["ok"], result.emulation
    return Path(result.isa_path).read_text(), epilogue


def test_a_slightly_wrong_constant_in_the_epilogue_is_caught(fused_isa):
    """The tolerance is tight enough to see the math: log2(e) off by 1e-4 (the exp2
    argument of erfc) fails the fp32 comparison."""
    text, epilogue = fused_isa
    assert "0x3fb8aa3b" in text  # log2(e) in fp32
    m, n, k = tail_shape(SMALL, "mm", "nt")
    wrong = text.replace("0x3fb8aa3b", "0x3fb8b1e2")  # * (1 + 1e-4)
    run = emulate_gemm(wrong, gemm, SMALL, op="mm", dtype="bf16", layout="nt", m=m, n=n, k=k,
                       epilogue=epilogue)
    assert not run.ok and "outside" in run.error
    run = emulate_gemm(text, gemm, SMALL, op="mm", dtype="bf16", layout="nt", m=m, n=n, k=k,
                       epilogue=epilogue)
    assert run.ok and run.worst < 0.5


def test_epilogue_reason_refuses_split_k_bmm_and_invalid_specs():
    relu = spec([["relu", "acc"]])
    split = next(c for c in DEFAULT if c.split_k > 1)
    assert gemm.epilogue_reason(SMALL, op="mm", epilogue=relu) is None
    assert gemm.epilogue_reason(SMALL, op="addmm", epilogue="") is None
    assert "split_k" in gemm.epilogue_reason(split, op="mm", epilogue=relu)
    assert "bmm" in gemm.epilogue_reason(SMALL, op="bmm", epilogue=relu)
    assert "invalid epilogue" in gemm.epilogue_reason(SMALL, op="mm", epilogue='{"steps": 1}')
    with pytest.raises(ValueError, match="split_k"):
        gemm.make_launcher(split, dtype="bf16", layout="nt", op="mm", arch="gfx950",
                           epilogue=relu)
    result = compile_config("gemm_dense", SMALL, arch="gfx950", dtype="bf16", layout="nt",
                            op="bmm", epilogue=relu)
    assert not result.ok and "fused epilogues serve mm and addmm" in result.error


def test_launcher_args_check_each_operand():
    m, n, k = 24, 40, 64
    a = torch.zeros(m, k, dtype=torch.bfloat16)
    b = torch.zeros(n, k, dtype=torch.bfloat16).t()
    out = torch.zeros(m, n, dtype=torch.bfloat16)
    epilogue = spec([["add", "acc", "x0"], ["mul", "s0", "x1"], ["sub", "s1", "x2"]],
                    (("col", BF), ("row", F32), ("tile", BF)))
    col, row = torch.zeros(n, dtype=torch.bfloat16), torch.zeros(m)
    tile = torch.zeros(m, n + 8, dtype=torch.bfloat16)[:, :n]

    def args(*extras, out=out):
        return gemm.launcher_args(a, b, None, out, 1.0, 0.0, epilogue=epilogue, extras=extras)

    got = args(col, row, tile)
    plain = gemm.launcher_args(a, b, None, out, 1.0, 0.0)
    assert got[:len(plain)] == plain
    assert got[len(plain):] == (col, row, tile, out, 0, 0, n + 8, 0)
    bad = [((col.float(), row, tile), "is float32, the epilogue reads bfloat16"),
           ((col[:-8], row, tile), r"shape \(32,\), expected \(40,\)"),
           ((col, row, tile.t().contiguous().t()), "unit stride"),
           ((col, row, torch.zeros(m, n + 2, dtype=torch.bfloat16)[:, :n]), "multiple of 4"),
           ((torch.zeros(n + 1, dtype=torch.bfloat16)[1:], row, tile), "8-byte aligned"),
           ((col, row), "3 operand"),
           ]
    for extras, message in bad:
        with pytest.raises(ValueError, match=message):
            args(*extras)
    with pytest.raises(ValueError, match=r"out is torch\.float32"):
        args(col, row, tile, out=out.float())
    with pytest.raises(ValueError, match="without an epilogue"):
        gemm.launcher_args(a, b, None, out, 1.0, 0.0, extras=(col,))
    example = gemm.example_args(SMALL, dtype="fp16", layout="nt", op="addmm", epilogue=spec(
        [["add", "acc", "x0"]], (("tile", F32),), F32))
    assert example[2].dtype == torch.float32 and example[len(plain)].dtype == torch.float32
    kernel_args, _, _ = gemm.kernel_launch(SMALL, example)
    assert len(kernel_args) == len(example) - 1  # the launcher's batch count is not passed


CATALOG = ROOT / "tuning_db" / "flydsl_compile_catalog.db"
_UNCHANGED = [("gfx950", DEFAULT[0], "bf16", "nt", "mm"),
              ("gfx950", MEDIUM, "fp16", "tn", "addmm"),
              ("gfx942", MEDIUM, "bf16", "nt", "mm")]


@pytest.mark.parametrize(("arch", "config", "dtype", "layout", "op"), _UNCHANGED)
def test_plain_kernel_compiles_as_the_shipped_catalog_recorded(arch, config, dtype, layout,
                                                               op):
    """The kernel without an epilogue is the same code traced without the epilogue slots:
    its resources and main loop are the shipped catalog's (first recorded by compile-check
    before epilogues were added, and unchanged since; regenerate the catalog when the
    kernel changes on purpose)."""
    db = sqlite3.connect(CATALOG)
    db.row_factory = sqlite3.Row
    rows = db.execute("select * from compile_catalog where template = 'gemm_dense' and arch = ? "
                      "and dtype = ? and layout = ? and op = ? and config = ? and ok = 1",
                      (arch, dtype, layout, op, json.dumps(config.to_json(), sort_keys=True,
                                                           separators=(",", ":")))).fetchall()
    assert rows, "no catalog row for this variant"
    row = rows[-1]
    result = compile_config("gemm_dense", config, arch=arch, dtype=dtype, layout=layout, op=op)
    assert result.ok, result.error
    assert (result.vgprs, result.agprs, result.sgprs, result.lds_bytes, result.scratch_bytes) == (
        row["vgprs"], row["agprs"], row["sgprs"], row["lds_bytes"], row["scratch_bytes"])
    assert result.mfma_counts == json.loads(row["mfma"])
    assert result.loop_analysis["mix"] == json.loads(row["loop_mix"])
    assert result.loop_analysis["mca"]["ratio"] == row["mca_ratio"]


def test_epilogue_check_script_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "epilogue_check.py"),
                           "--arch", "gfx942", "--dtype", "fp16", "--op", "addmm", "--config",
                           "0", "--config", "10", "--epilogue", "bias_relu", "--json",
                           "--quiet"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    totals = report["totals"]["gfx942"]
    assert (totals["variants"], totals["refused"], totals["compiled"]) == (1, 1, 1)
    assert totals["emulated_ok"] == totals["plain_ok"] == totals["same_loop"] == 1
    assert re.search("split_k=2", report["refused"][0]["reason"])


HEAVIEST = ("chain4", "erf_exp_misc")  # every operand kind + silu; the longest math, fp32 out


def _epilogue_names() -> list[str]:
    """The epilogues scripts/epilogue_check.py knows (its EPILOGUES)."""
    return list(runpy.run_path(str(ROOT / "scripts" / "epilogue_check.py"))["EPILOGUES"])


def _store_extremes() -> list[int]:
    """DEFAULT indexes of the store geometries at the extremes (no split-K): the fewest and
    the most 16x16 accumulator blocks per lane (the most registers live in the epilogue),
    the most waves along M and along N."""
    plain = [i for i, c in enumerate(DEFAULT) if c.split_k == 1]

    def blocks(i: int) -> int:
        c = DEFAULT[i]
        return (c.tile_m // c.waves_m // 16) * (c.tile_n // c.waves_n // 16)

    picks = [min(plain, key=blocks), max(plain, key=blocks),
             max(plain, key=lambda i: DEFAULT[i].waves_m),
             max(plain, key=lambda i: DEFAULT[i].waves_n)]
    return sorted(set(picks))


def _store_geometries() -> list[int]:
    """DEFAULT indexes, one per store geometry (tile and waves) of the configs without
    split-K: the one with the most VGPRs in the shipped catalog (the most register
    pressure an epilogue adds to; tests/test_shipped_catalog.py checks those rows are
    the current template's)."""
    from tests.catalog_sample import shipped_rows

    rows = shipped_rows("gemm_dense")

    def vgprs(i: int) -> int:
        key = ("gfx950", "gemm_dense", stable_id(DEFAULT[i].to_json()), "mm", "bf16", "nt")
        return rows[key]["vgprs"]

    best: dict[tuple[int, int, int, int], int] = {}
    for i, c in enumerate(DEFAULT):
        if c.split_k != 1:
            continue
        geometry = (c.tile_m, c.tile_n, c.waves_m, c.waves_n)
        if geometry not in best or vgprs(i) > vgprs(best[geometry]):
            best[geometry] = i
    return sorted(best.values())


def _epilogue_check(*args: str) -> dict:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "epilogue_check.py"),
                           "--arch", "gfx950", "--dtype", "bf16", "--op", "addmm", "--json",
                           "--quiet", *args], capture_output=True, text=True, timeout=1800,
                          cwd=ROOT)
    report = json.loads(proc.stdout)
    failures = [f"{s['variant']}: {s['failures'] or 'main loop changed'}"
                for s in report["summaries"] if s["failures"] or not s["same_loop"]]
    assert failures == [] and proc.returncode == 0
    totals = report["totals"]["gfx950"]
    assert totals["compiled"] == totals["emulated_ok"] == totals["fused_kernels"]
    assert totals["scratch_or_spills"] == 0 and totals["same_loop"] == totals["variants"]
    return totals


@pytest.mark.slow
@pytest.mark.timeout(1500)  # ~3 min alone on 2 cores; far longer beside the suite's other worker
def test_every_store_geometry_and_every_epilogue_on_gfx950():
    """scripts/epilogue_check.py, gfx950 bf16 NT addmm, in two covering runs (the whole
    product, every config x every epilogue, is ``python scripts/epilogue_check.py``,
    docs/measurements.md): every store geometry of the DEFAULT configs (tile and waves,
    each on its config with the most VGPRs) with the heaviest epilogues (every operand
    kind; the longest math chain with an fp32 output), and every epilogue on the store
    geometries at the extremes (the epilogue is per-lane code after the main loop: its
    math does not depend on the config, its addressing on the store geometry and its
    register pressure on the registers the main loop holds). Each compiles without
    spilling, is correct in the emulator and keeps the plain kernel's main loop; a
    split-K config is refused with the reason. The second run leaves out the two
    heaviest epilogues, which the first one compiled and emulated on every geometry.
    (Every DEFAULT config rather than every geometry took ~5 min of the suite's CI time.)"""
    geometries = _store_geometries()
    split_k = next(i for i, c in enumerate(DEFAULT) if c.split_k > 1)
    every_config = _epilogue_check(*(f"--config={i}" for i in [*geometries, split_k]),
                                   *(f"--epilogue={name}" for name in HEAVIEST))
    assert every_config["refused"] == 1
    assert every_config["variants"] == len(geometries)
    assert every_config["fused_kernels"] == every_config["variants"] * len(HEAVIEST)
    extremes = _store_extremes()
    names = _epilogue_names()
    others = [name for name in names if name not in HEAVIEST]
    assert len(names) == 12 and len(others) == len(names) - len(HEAVIEST)
    every_epilogue = _epilogue_check(*(f"--config={i}" for i in extremes),
                                     *(f"--epilogue={name}" for name in others))
    assert every_epilogue["variants"] == len(extremes) >= 3
    assert every_epilogue["fused_kernels"] == len(extremes) * len(others)
