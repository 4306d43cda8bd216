"""Fixtures for the sweep tests: real runner and worker subprocesses on real SQLite DBs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import builds_only_vars, isolated_env


def sweep_env(root: Path, **extra: str) -> dict[str, str]:
    """A child environment with its own per-user cache dir, no shipped DB and no plugin
    auto-enable. Sweeps run at once on a busy machine (``--on-busy record``) unless a test
    asks otherwise: only tests/core/test_noisy_timings.py is about busyness.

    Inductor's cache dir is the test run's shared one (``run_builds``): a sweep worker
    turns off every Inductor cache that could answer in place of lowering or benchmarking
    (the FX graph and autotune caches, ``sweep/worker.py``; the AOTAutograd cache here),
    so what a sweep shares with the run's other processes is the C++ builds of identical
    kernel sources, about 60 % of a cold CPU compile."""
    return isolated_env(root, **{**builds_only_vars(), "INDUCTOR_FLYDSL_ON_BUSY": "record",
                                 **extra})


FAULTS_DIR = Path(__file__).resolve().parents[1] / "faults"


def fault_env(root: Path, **faults: str) -> dict[str, str]:
    """:func:`sweep_env` whose sweep workers get the faults named (the variables of
    tests/faults/sitecustomize.py, loaded through PYTHONPATH)."""
    env = sweep_env(root, **faults)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(FAULTS_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "inductor_flydsl", *args]


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def sweep_json(proc: subprocess.CompletedProcess[str]) -> dict:
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"sweep printed no JSON (exit {proc.returncode}):\n"
                             f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}") from None


@pytest.fixture(scope="session")
def smoke_sweep(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The cpu-smoke preset swept once, unsharded, through real workers."""
    root = tmp_path_factory.mktemp("smoke")
    db = root / "smoke.db"
    proc = run_cli(["sweep", "--preset", "cpu-smoke", "--db", str(db), "--json"],
                   sweep_env(root))
    summary = sweep_json(proc)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return {"db": db, "summary": summary, "root": root}
