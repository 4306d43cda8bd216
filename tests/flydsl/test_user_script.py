"""A user's flat script (no ``if __name__ == "__main__":`` guard, as most torch scripts
are) that launches a FlyDSL GEMM: its top level runs once, and the launch works.

Before the build server, the build pool's workers came from multiprocessing's fork
server, which runs the parent's ``__main__`` again in every worker: the script's top level
ran once per worker and the build failed ("An attempt has been made to start a new
process before the current process has finished its bootstrapping phase").

Run for real: the script below, written to a file and run by a fresh interpreter, appends
a line to a marker file at its top level, then launches one dense bf16 GEMM through the
plugin's op (``torch.ops.inductor_flydsl.mm_out``) on this CPU: the kernel is built by a
build worker, loaded by FlyDSL's runtime into the stand-in HIP library (tests/fake_hip)
and run by the ISA emulator on the tensors' memory; the output is checked against
torch's, with the plugin off and with ``INDUCTOR_FLYDSL=1`` (and the provider's runtime
check forced to pass, tests/faults/sitecustomize.py); either way the pool is started by
the launch (``import torch`` starts nothing).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import run_for_result

REPO = Path(__file__).resolve().parents[2]
FAULTS = REPO / "tests" / "faults"

pytestmark = pytest.mark.skipif(
    not any(os.path.exists(os.path.join(d, "llvm-readelf-22")) for d in
            os.environ.get("PATH", "").split(os.pathsep)),
    reason="llvm-22 (llvm-readelf-22, llvm-objdump-22) reads the code objects")

SCRIPT = r"""
import json
import os

with open(os.environ["MARKER"], "a") as marker:
    marker.write(f"{os.getpid()} {__name__}\n")

import torch

from inductor_flydsl.flydsl_backend.builds import prebuild
from inductor_flydsl.flydsl_backend.run import kernel_runner
from inductor_flydsl.problems.keys import canonical_json
from inductor_flydsl.numerics.gemm import validate_output
from inductor_flydsl.template_loader import load_template
from tests.fake_hip.harness import FakeHipRuntime, fake_hip

torch.manual_seed(0)
hip = fake_hip()
gemm = load_template("gemm_dense")
config = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1, waves_n=1, stages=2,
                         group_m=1)
a = torch.randn(40, 256, dtype=torch.bfloat16)
b = torch.randn(96, 256, dtype=torch.bfloat16).t()
out = torch.full((40, 96), float("nan"), dtype=torch.bfloat16)
with kernel_runner.use_runtime(FakeHipRuntime(hip, emulate=True)) as runner:
    torch.ops.inductor_flydsl.mm_out(a, b, out=out, config=canonical_json(config.to_json()))
    runs = runner.runtime.emulation.runs
validate_output("mm", (a, b), out, 1.0, 0.0)
expected = torch.mm(a, b)
torch.testing.assert_close(out, expected)
pool = prebuild._pool
print("RESULT " + json.dumps({
    "emulated_runs": runs, "launches": hip.launch_count(),
    "equal_elements": int((out == expected).sum()), "elements": out.numel(),
    "builds": sum(r.jobs for r in prebuild.runs),
    "server_pid": pool._proc.pid if pool is not None else None,
    "workers_started": pool.workers_started if pool is not None else 0}))
"""


@pytest.mark.parametrize("enabled", [False, True], ids=["launch-starts-pool", "plugin-on"])
def test_a_flat_script_runs_once_and_its_flydsl_launch_works(tmp_path: Path,
                                                            enabled: bool) -> None:
    script = tmp_path / "train.py"  # no main guard: everything at top level
    script.write_text(SCRIPT)
    marker = tmp_path / "marker.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"MARKER": str(marker), "INDUCTOR_FLYDSL_BUILD_JOBS": "2",
                "FLYDSL_RUNTIME_CACHE_DIR": str(tmp_path / "flydsl"),
                "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                "PYTHONPATH": os.pathsep.join([str(FAULTS), str(REPO),
                                               env.get("PYTHONPATH", "")])})
    if enabled:
        env.update({"INDUCTOR_FLYDSL": "1", "INDUCTOR_FLYDSL_DB": str(tmp_path / "t.db"),
                    "INDUCTOR_FLYDSL_SHIPPED": "0",
                    "INDUCTOR_FLYDSL_TEST_FORCE_ROCM": "gfx950"})
    result = run_for_result([sys.executable, str(script)], env, 300, "the flat script")
    lines = marker.read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" __main__"), lines  # its top level, once
    assert "bootstrapping phase" not in result["stderr"]
    assert result["emulated_runs"] == 1 and result["launches"] == 1
    assert result["builds"] == 1 and result["server_pid"] is not None
    assert 1 <= result["workers_started"] <= 2
