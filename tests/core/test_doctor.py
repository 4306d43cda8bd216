"""``inductor-flydsl doctor`` through real subprocesses (run side by side): its sections,
exit 0 when what is configured can work, exit 1 naming the cause when it cannot; also
with a required package missing (``pip install --no-deps``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from inductor_flydsl.cli.doctor_checks import tuning_db
from inductor_flydsl.cli.doctor_settings import settings_in_effect
from inductor_flydsl.settings import ENV_SETTINGS, SCRIPT_VARIABLES, unknown_settings

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
    cases = {  # each run costs an `import torch` and internals_check.problems(): two runs
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
    # no CPP in the backends: on CPU a GEMM is ATen's alone, never autotuned (issue 52)
    assert re.search(r"^    autotuned +no: on CPU, the GEMM backends asked for "
                     r"\(TORCHINDUCTOR_MAX_AUTOTUNE_GEMM_BACKENDS=ATEN,FLYDSL\) have no CPP, "
                     r"so ATen is a GEMM's only choice and a single choice is never "
                     r"autotuned: add CPP$", text, re.M), text
    assert re.search(r"^    autotuned +yes", runs["ok"].stdout, re.M)
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


def test_internal_settings_are_neither_listed_nor_typos() -> None:
    """``INDUCTOR_FLYDSL_BUSY_NOTE`` is set by the sweep runner for its workers: not a
    user's setting (doctor leaves it out), and never called a typo (issue 52)."""
    internal = {s.name for s in ENV_SETTINGS if s.internal}
    assert internal == {"INDUCTOR_FLYDSL_BUSY_NOTE"}
    env = {"INDUCTOR_FLYDSL_BUSY_NOTE": "3 other processes", "INDUCTOR_FLYDSL_REPEATS": "3"}
    names = [s.name for s in settings_in_effect(env)]
    assert "INDUCTOR_FLYDSL_REPEATS" in names and not internal & set(names)
    assert unknown_settings(env) == []
    assert [u.name for u in unknown_settings({"INDUCTOR_FLYDSL_BUSY_NOTES": "x"})] == [
        "INDUCTOR_FLYDSL_BUSY_NOTES"]  # a near name is still a typo


def test_an_explicit_db_path_under_a_missing_folder(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """doctor names the variable, the missing folder and the fix (issue 52), and creates
    nothing."""
    path = tmp_path / "mistyped" / "t.db"
    monkeypatch.setenv("INDUCTOR_FLYDSL_DB", str(path))
    monkeypatch.delenv("INDUCTOR_FLYDSL_MODE", raising=False)
    section = tuning_db()
    problems = [f.problem for f in section.findings if f.problem]
    assert problems == [
        f"the folder {path.parent} of INDUCTOR_FLYDSL_DB={str(path)!r} does not exist (a "
        f"folder you give is never created): create it (mkdir -p {path.parent}) or correct "
        "the path: compiles will not use the DB"]
    assert not path.parent.exists()


def _blocked(root: Path, module: str) -> Path:
    """A folder whose ``module`` raises as a missing package does (first on PYTHONPATH)."""
    root.mkdir()
    (root / f"{module}.py").write_text(f"raise ImportError(\"No module named '{module}'\")\n")
    return root


def test_a_missing_dependency_is_named_with_the_fix(tmp_path: Path) -> None:
    """Installed with ``pip install --no-deps`` (issue 52): ``doctor`` lists the missing
    package with the fix and exits 1, another command names it and exits 2, and
    ``INDUCTOR_FLYDSL=1`` leaves the plugin off with one warning naming it and the fix;
    never a traceback. Here sqlite_utils cannot be imported."""
    blocked = _blocked(tmp_path / "blocked", "sqlite_utils")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INDUCTOR_FLYDSL")}
    env.update(PYTHONPATH=os.pathsep.join([str(blocked), str(REPO)]),
               INDUCTOR_FLYDSL_DB=str(tmp_path / "t.db"))
    commands = {
        "doctor": [sys.executable, "-m", "inductor_flydsl", "doctor"],
        "db": [sys.executable, "-m", "inductor_flydsl", "db", "stats"],
        "import": [sys.executable, "-c", "import torch, inductor_flydsl; "
                   "print(inductor_flydsl.active_settings())"],
    }

    def run(name: str) -> subprocess.CompletedProcess[str]:
        extra = {"INDUCTOR_FLYDSL": "1"} if name == "import" else {}
        return subprocess.run(commands[name], capture_output=True, text=True,
                              env={**env, **extra}, cwd=tmp_path, timeout=300)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        doctor, db, imported = pool.map(run, commands)
    fix = ("pip install 'sqlite-utils>=4.2', or reinstall inductor-flydsl with its "
           "dependencies (pip install without --no-deps)")
    told = ("sqlite-utils is not installed (No module named 'sqlite_utils'), and "
            f"inductor-flydsl needs it for the tuning DB: {fix}")
    for proc in (doctor, db, imported):
        assert "Traceback" not in proc.stderr, proc.stderr
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert re.search(r"^  ! sqlite-utils +missing \(No module named 'sqlite_utils'\): "
                     + re.escape(fix) + "$", doctor.stdout, re.M), doctor.stdout
    assert re.search(r"^    rich +\d", doctor.stdout, re.M)  # the others: their versions
    assert doctor.stdout.splitlines()[-2:] == ["1 problem(s) (marked !):", f"  - {told}"]
    assert db.returncode == 2 and db.stderr.strip() == f"inductor-flydsl: error: {told}"
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip().splitlines()[-1] == "None"  # off, as the warning says
    warned = [line for line in imported.stderr.splitlines() if "inductor_flydsl" in line
              and "Warning" in line]
    assert len(warned) == 1 and warned[0].endswith(
        f"UserWarning: inductor_flydsl stays off: {told}"), imported.stderr
