"""Shared fixtures: isolated environments for real torch.compile subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
# In-process tests never layer the shipped DBs in unless a test asks for them.
os.environ["INDUCTOR_FLYDSL_SHIPPED"] = "0"
COMPILE_MODEL = REPO / "scripts" / "compile_model.py"


def _has_rocm() -> bool:
    return torch.version.hip is not None and torch.cuda.is_available()


def _has_cuda() -> bool:
    return torch.version.cuda is not None and torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_rocm = pytest.mark.skip(reason="needs an AMD GPU with ROCm")
    skip_cuda = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "rocm" in item.keywords and not _has_rocm():
            item.add_marker(skip_rocm)
        if "cuda" in item.keywords and not _has_cuda():
            item.add_marker(skip_cuda)


def isolated_env(tmp: Path, **extra: str) -> dict[str, str]:
    """Environment for a child process: its own Inductor cache and per-user cache dir,
    no shipped DB layered in, no plugin auto-enable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor_cache"),
                "XDG_CACHE_HOME": str(tmp / "xdg_cache"),
                "INDUCTOR_FLYDSL_SHIPPED": "0"})
    env.update(extra)
    return env


def run_compile_model(args: list[str], env: dict[str, str], timeout: float = 600) -> dict:
    """Run scripts/compile_model.py in a fresh process; return its RESULT JSON."""
    proc = subprocess.run([sys.executable, str(COMPILE_MODEL), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            result["stderr"] = proc.stderr
            return result
    raise AssertionError(f"compile_model.py failed (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


@pytest.fixture
def fresh_env(tmp_path: Path):
    def make(name: str = "run", **extra: str) -> dict[str, str]:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        return isolated_env(root, **extra)

    return make
