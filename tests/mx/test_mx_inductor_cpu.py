"""MX ``torch._scaled_mm`` through real ``torch.compile(mode="max-autotune")`` on this CPU:
what the plugin sees in Inductor's IR and why it offers no FlyDSL candidate.

torch 2.13 on a non-ROCm build traces MX ``_scaled_mm`` only with E8M0 scales in the
padded (swizzled 32x4x4) layout (its meta function's rule), and lowers it to a
``scaled_mm`` selection with ATen's choice alone (``tuned_scaled_mm``). With FlyDSL
requested, three compiles in one process: as is (refused: not a ROCm build), with the
provider's runtime check replaced for gfx950 (as the other CPU integration tests do; not
Inductor, not SQLite) on a shape whose padded scales are not (M, K/32) (refused: the
swizzled layout), and for gfx942 on a shape whose scales are exactly (M, K/32) (refused:
no scaled MFMA). Nothing is built, nothing launched, nothing recorded (a selection of
one), and each compile completes; running the compiled code then fails in ATen exactly
as without the plugin, since CPU ATen has no MX matmul.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

SCRIPT = r"""
import json, logging, sys, torch, torch._inductor.config as ic
import inductor_flydsl
from inductor_flydsl.flydsl_backend.autotune import provider
from inductor_flydsl.flydsl_backend.builds import prebuild
lines = []
class Collect(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("inductor_flydsl").addHandler(Collect())
logging.getLogger("inductor_flydsl").setLevel(logging.DEBUG)
inductor_flydsl.enable(sys.argv[1], "readwrite")
ic.max_autotune_gemm_backends = "ATEN,FLYDSL"
ic.fx_graph_cache = False  # each compile lowers its graph (two share a shape)
natural = provider.runtime_target

def compile_once(m, arch):
    provider.runtime_target = natural if arch is None else (lambda device: (arch, []))
    torch._dynamo.reset()
    lines.clear()
    n, k = 128, 256
    blocks = lambda rows: (-(-rows // 128) * 128, -(-(k // 32) // 4) * 4)  # padded
    sa = torch.full(blocks(m), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)
    sb = torch.full(blocks(n), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)

    def f(a, w, sa, sb):  # operands made in the graph: CPU graph inputs count as unaligned
        return torch._scaled_mm(a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn).t(),
                                sa, sb, out_dtype=torch.bfloat16)

    compiled = torch.compile(f, mode="max-autotune")
    error = None
    try:
        compiled(torch.randn(m, k), torch.randn(n, k), sa, sb)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    return {"error": error, "log": [l for l in lines if "FlyDSL" in l]}

out = {"natural": compile_once(32, None), "swizzled": compile_once(32, "gfx950"),
       "gfx942": compile_once(128, "gfx942")}
out["stats"] = inductor_flydsl.stats()
out["builds"] = sum(r.jobs for r in prebuild.runs)
print(json.dumps(out))
"""


def test_mx_scaled_mm_is_refused_with_its_reasons_on_cpu(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c"),
           "INDUCTOR_FLYDSL_SHIPPED": "0"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t.db")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in ("natural", "swizzled", "gfx942"):
        # the compile completed; the compiled code failed in CPU ATen (no MX matmul there)
        assert "Invalid scaling configuration" in data[case]["error"], data[case]
        (line,) = data[case]["log"]
        assert line.startswith("inductor_flydsl: no FlyDSL choices for scaled_mm "
                               "float8_e4m3fn"), line
    assert "not a ROCm build" in data["natural"]["log"][0]
    swizzled = data["swizzled"]["log"][0]
    assert "scale_a is (128, 8), not (32, 8): the padded layout of torch's swizzled" in swizzled
    assert "scale_b" not in swizzled  # N = 128: B's padded scales are exactly (N, K/32)
    gfx942 = data["gfx942"]["log"][0]
    assert "arch gfx942 has no scaled MFMA" in gfx942 and "scale_a" not in gfx942
    assert data["builds"] == 0
    stats = data["stats"]
    assert stats["recorded"] == 0 and stats["benchmarked"] == 0 and stats["errors"] == 0


V2_SWIZZLED = r"""
import torch, torch.nn.functional as F
from torch.nn.functional import ScalingType, SwizzleType
scale = torch.full((128 * 8,), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)

def f(a, w, sa, sb):
    return F.scaled_mm(a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn).t(), sa,
                       ScalingType.BlockWise1x32, sb, ScalingType.BlockWise1x32,
                       swizzle_a=SwizzleType.SWIZZLE_32_4_4,
                       swizzle_b=SwizzleType.SWIZZLE_32_4_4, output_dtype=torch.bfloat16)

try:
    torch.compile(f, mode="max-autotune")(torch.randn(128, 256), torch.randn(128, 256),
                                          scale, scale)
except Exception as exc:
    print("error:", type(exc).__name__, exc)
"""


def test_plain_inductor_cannot_lower_mx_scaled_mm_v2_off_rocm(tmp_path: Path) -> None:
    """What torch 2.13 itself does, without the plugin: off ROCm, ``F.scaled_mm``'s MX
    recipe traces only with swizzled scales, and Inductor's ``_scaled_mm_v2`` lowering
    refuses any swizzle, so no such compile reaches a GEMM selection to add FlyDSL to."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "c"), "INDUCTOR_FLYDSL": "0"}
    proc = subprocess.run([sys.executable, "-c", V2_SWIZZLED], capture_output=True, text=True,
                          env=env, timeout=600)
    assert "does not yet support non-trivial swizzles" in proc.stdout, proc.stdout[-2000:]
