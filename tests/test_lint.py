"""The project's own checks: ruff over the whole tree."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import REPO


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed (it is a test dependency: pip install -e '.[test]')")
    proc = subprocess.run([ruff, "check", str(REPO)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
