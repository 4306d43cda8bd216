"""``inductor-flydsl doctor`` through real subprocesses (run side by side): its sections,
exit 0 when what is configured can work, exit 1 naming the cause when it cannot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from inductor_flydsl.cli.doctor_settings import settings_in_effect
from inductor_flydsl.settings import ENV_SETTINGS, SCRIPT_VARIABLES

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("Versions", "Toolchain", "ROCm runtime", "Tuning DB", "Shipped DBs",
            "Inductor internals", "Settings (INDUCTOR_FLYDSL*)",
            "A max-autotune compile here would offer")


def _doctor(extra_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("INDUCTOR_FLYDSL", "TORCHINDUCTOR_MAX_AUTOTUNE"))}
    env.update(PYTHONPATH=str(REPO), **extra_env)
    return subprocess.run([sys.executable, "-m", "inductor_flydsl", "doctor"],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    tmp = tmp_path_factory.mktemp("doctor")
    not_a_folder = tmp / "a_file"
    not_a_folder.write_text("")
    cases = {  # each run costs an `import torch` and internals.problems(): two runs
        "ok": {"INDUCTOR_FLYDSL_DB": str(tmp / "tuning.db")},
        # every problem doctor exits 1 for, each of which it must list by itself
        "problems": {"INDUCTOR_FLYDSL_DB": str(not_a_folder / "tuning.db"),
                     "INDUCTOR_FLYDSL_MODE": "readwrite", "INDUCTOR_FLYDSL_REPEATS": "zero",
                     "INDUCTOR_FLYDSL_CANIDATES": "3",
                     "TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS": "ATEN,FLYDSL"},
    }
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(cases, pool.map(_doctor, cases.values()), strict=True))


def test_sections_and_exit_0(runs: dict[str, subprocess.CompletedProcess[str]],
                             tmp_path_factory: pytest.TempPathFactory) -> None:
    done = runs["ok"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    for title in SECTIONS:
        assert any(line.startswith(title) for line in lines), title
    text = done.stdout
    assert re.search(r"^    torch +" + re.escape(torch.__version__), text, re.M)
    assert re.search(r"^    flydsl +\S", text, re.M)
    assert re.search(r"^    ld\.lld \(AMDGPU\) +\S", text, re.M)
    assert re.search(r"^    llvm-mca +\S", text, re.M)
    assert re.search(r"^    INDUCTOR_FLYDSL_DB +\S+tuning\.db \(env\)", text, re.M)
    assert re.search(r"^    INDUCTOR_FLYDSL_MODE +readwrite \(default\)", text, re.M)
    assert re.search(r"^    writable +yes", text, re.M)
    assert re.search(r"^    ATen +yes", text, re.M)
    assert re.search(r"^    FlyDSL +(yes|no \(not requested)", text, re.M)
    assert "No problems" in text


def test_each_problem_listed_and_exit_1(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = runs["problems"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    text = done.stdout
    assert re.search(r"^  ! INDUCTOR_FLYDSL_REPEATS +zero \(env\)", text, re.M)
    assert re.search(r"^  - INDUCTOR_FLYDSL_REPEATS='zero': use a whole number of at least "
                     "1$", text, re.M)
    assert re.search(r"^  - INDUCTOR_FLYDSL_CANIDATES='3': not a setting", text, re.M)
    assert re.search(r"^  ! writable +no \(.*a_file is not a folder\)", text, re.M)
    assert "cannot be written: set INDUCTOR_FLYDSL_DB to a writable path" in text
    expected = 3
    if torch.version.hip is None:  # FlyDSL cannot run on this machine
        assert "FlyDSL is requested (FLYDSL in the backends) but cannot be offered: torch " \
               "is not a ROCm build" in text
        expected += 1
    assert f"{expected} problem(s)" in text


def test_bad_mode_named_in_a_real_subprocess(tmp_path: Path) -> None:
    """A mode typo: exit 1, the variable and the valid modes named once."""
    done = _doctor({"INDUCTOR_FLYDSL_DB": str(tmp_path / "t.db"),
                    "INDUCTOR_FLYDSL_MODE": "bogus"})
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("  - ")]
    assert lines == ["  - INDUCTOR_FLYDSL_MODE='bogus': use one of: readwrite, "
                     "readonly, off"], lines


def test_every_variable_the_package_reads_is_listed() -> None:
    package = REPO / "inductor_flydsl"
    read = set()
    for path in package.rglob("*.py"):
        read |= set(re.findall(r"\"(INDUCTOR_FLYDSL(?:_[A-Z0-9_]+)?)\"", path.read_text()))
    assert read, "no variable found: the pattern is wrong"
    declared = {s.name for s in ENV_SETTINGS} | set(SCRIPT_VARIABLES)
    assert read <= declared, sorted(read - declared)


def test_settings_sources_and_checks() -> None:
    states = {s.name: s for s in settings_in_effect({
        "INDUCTOR_FLYDSL_REPEATS": "0", "INDUCTOR_FLYDSL_BUCKETS": "1",
        "INDUCTOR_FLYDSL_ON_BUSY": "later"})}
    assert states["INDUCTOR_FLYDSL_BUCKETS"].source == "env"
    assert states["INDUCTOR_FLYDSL_BUCKETS"].problem is None
    assert states["INDUCTOR_FLYDSL_REPEATS"].problem == "use a whole number of at least 1"
    assert "wait, backoff, record" in str(states["INDUCTOR_FLYDSL_ON_BUSY"].problem)
    assert states["INDUCTOR_FLYDSL_MODE"].source == "default"
    assert states["INDUCTOR_FLYDSL_MODE"].value == "readwrite"
