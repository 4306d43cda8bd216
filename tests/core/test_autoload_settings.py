"""``import torch`` runs the plugin's entry point; a bad ``INDUCTOR_FLYDSL_*`` value must
leave torch importable, the plugin off, and one warning that names the variable."""

from __future__ import annotations

import os
import subprocess
import sys


def test_a_bad_mode_never_breaks_import_torch(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"INDUCTOR_FLYDSL": "1", "INDUCTOR_FLYDSL_MODE": "bogus",
                "INDUCTOR_FLYDSL_DB": str(tmp_path / "t.db")})
    proc = subprocess.run(
        [sys.executable, "-c", "import torch, inductor_flydsl;"
         " print(inductor_flydsl.active_settings())"],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "None"  # the plugin stays off
    assert "INDUCTOR_FLYDSL_MODE='bogus'" in proc.stderr
    assert "readwrite, readonly, off" in proc.stderr
