"""The smaller launch-path defects of issue 42, each shown on this CPU machine:

- the process that loads a FlyDSL kernel never spawns ``rocm_agent_enumerator`` (FlyDSL's
  engine detected the arch that way, with a 300 s timeout): a fake one on PATH counts
  the calls whose parent is the launching process;
- more than one HIP runtime mapped into the process refuses launching, with the reason;
- an ahead-of-time compile (``V.aot_compilation``, e.g. through the FX wrapper) is not
  offered FlyDSL candidates;
- a split-K launch's workspace and reduction run on the op's stream of the op's device
  (``stream_scope`` names the device of a raw handle).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inductor_flydsl.flydsl_backend.offer.hip_library import hip_runtime_reasons
from tests.flydsl.test_launch_runtime import pytestmark as needs_llvm

REPO = Path(__file__).resolve().parents[2]


@needs_llvm
def test_the_launching_process_never_spawns_rocm_agent_enumerator(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "rocm_agent_enumerator"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho \"$PPID\" >> {calls}\necho gfx950\n")
    fake.chmod(0o755)
    child = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from tests.fake_hip.harness import FakeHipRuntime, fake_hip
        hip = fake_hip({str(tmp_path / 'hip')!r})
        import torch
        from inductor_flydsl.emulator.gemm import make_operands
        from inductor_flydsl.flydsl_backend import direct
        from inductor_flydsl.flydsl_backend.builds import prebuild
        from inductor_flydsl.flydsl_backend.run import kernel_runner
        from inductor_flydsl.problems.keys import canonical_json
        from inductor_flydsl.template_loader import load_template

        def main():
            gemm = load_template("gemm_dense")
            config = gemm.GemmConfig(tile_m=16, tile_n=32, tile_k=128, waves_m=1,
                                     waves_n=1, stages=2, group_m=1)
            a, b, _, out = make_operands("mm", "bf16", "nt", 32, 64, 256)
            with kernel_runner.use_runtime(FakeHipRuntime(hip)) as runner:
                direct.mm_out(a, b, out=out, config=canonical_json(config.to_json()))
                assert runner.loads == 1 and hip.launch_count() == 1
            prebuild.shutdown_pool()
            print("PID", os.getpid())

        if __name__ == "__main__":
            main()
    """)
    script = tmp_path / "child.py"
    script.write_text(child)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
           "FLYDSL_RUNTIME_CACHE_DIR": str(tmp_path / "flydsl")}
    env.pop("FLYDSL_GPU_ARCH", None)
    env.pop("HSA_OVERRIDE_GFX_VERSION", None)
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    pid = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("PID"))
    parents = calls.read_text().split() if calls.exists() else []
    assert pid not in parents, f"the launching process spawned rocm_agent_enumerator: {parents}"


def test_two_hip_runtimes_refuse_with_the_reason(tmp_path: Path) -> None:
    one = tmp_path / "opt" / "rocm" / "lib" / "libamdhip64.so.7"
    other = tmp_path / "site" / "torch" / "lib" / "libamdhip64.so"
    for path in (one, other):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    alias = tmp_path / "alias.so.7"
    alias.symlink_to(one)

    def maps(*paths: Path) -> str:
        return "".join(f"7f00-7f01 r-xp 00000000 08:01 42 {p}\n" for p in paths) + \
            "7f02-7f03 r-xp 00000000 08:01 43 /usr/lib/libc.so.6\n"

    assert hip_runtime_reasons(maps(one, one)) == []
    assert hip_runtime_reasons(maps(one, alias)) == []  # one file under two names
    (reason,) = hip_runtime_reasons(maps(one, other))
    assert "2 HIP runtimes are mapped" in reason and str(other) in reason
    # this process: the real map, with whatever HIP library is loaded here (none or one)
    assert hip_runtime_reasons(Path("/proc/self/maps").read_text()) == []


def test_an_aot_compile_is_not_offered_flydsl() -> None:
    from torch._inductor.virtualized import V

    from inductor_flydsl.flydsl_backend.autotune.provider import inductor_config_reasons

    assert not any("ahead-of-time" in r for r in inductor_config_reasons())
    with V.set_aot_compilation(True):
        assert any("ahead-of-time compilation is not supported" in r
                   for r in inductor_config_reasons())


def test_a_raw_stream_handle_is_given_its_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """RocmRuntime.stream_scope makes the ExternalStream of a raw handle on the op's
    device (torch's ExternalStream, recorded as constructed: CPU torch has no streams)."""
    import torch

    from inductor_flydsl.flydsl_backend.run.kernel_runner import RocmRuntime

    made = []
    monkeypatch.setattr(torch.cuda, "ExternalStream",
                        lambda handle, device=None: made.append((handle, device)) or "s")
    monkeypatch.setattr(torch.cuda, "stream", lambda s: s)
    device = torch.device("cuda", 3)
    assert RocmRuntime().stream_scope(1234, device) == "s"
    assert made == [(1234, device)]
