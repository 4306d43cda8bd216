"""A built wheel, installed (not editable) into a fresh virtual environment beside this
interpreter's torch: it carries every package (found by setup.py, not listed), the
templates and the shipped tuning DBs; every module imports from it, the plugin layers the
shipped DBs under the user's (missing) DB, and ``explain --isa --emulate`` works from it.

The wheel is built and installed once for the module (:func:`installed_wheel`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECK = r"""
import json, sys
import inductor_flydsl
from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.shipped import shipped_db_paths
from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.device import DeviceInfo
from inductor_flydsl.problem import Problem
from inductor_flydsl.settings import settings_from_env
from inductor_flydsl.software import SoftwareInfo, template_version, templates_dir

paths = shipped_db_paths()
winners = []
layered = LayeredTuningDB(settings_from_env(sys.argv[1], "readonly"))
for path in paths:
    db = TuningDB.open(path, writable=False, immutable=True)
    for row in db.db.query(
            "select w.*, p.spec, d.kind, d.arch, d.name as dname, d.compute_units,"
            " s.torch, s.triton, s.flydsl, s.templates from winners w"
            " join problems p on p.id = w.problem_id join devices d on d.id = w.device_id"
            " join software s on s.id = w.software_id"):
        device = DeviceInfo(row["kind"], row["arch"], row["dname"], row["compute_units"])
        software = SoftwareInfo(row["torch"], row["triton"], row["flydsl"], row["templates"])
        found = layered.lookup(device, software, Problem.from_spec(json.loads(row["spec"])))
        winners.append({"expected": row["candidate_id"],
                        "found": found.candidate_id if found else None,
                        "source": found.source if found else None})
import importlib, pkgutil
import_failures = []
for info in pkgutil.walk_packages(inductor_flydsl.__path__, "inductor_flydsl."):
    if info.name.endswith(".__main__"):  # runs the command line when imported
        continue
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        import_failures.append(f"{info.name}: {type(exc).__name__}: {exc}")
print(json.dumps({"package": inductor_flydsl.__file__, "dbs": [str(p) for p in paths],
                  "import_failures": import_failures,
                  "templates": str(templates_dir()), "template_version": template_version(),
                  "winners": winners}))
"""

pytestmark = pytest.mark.slow  # a wheel build, a venv and a cross-compile: ~25 s on 2 cores


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    names: list[str]  # the wheel's members
    venv: Path
    python: Path
    env: dict[str, str]  # for the venv's processes: no PYTHONPATH, caches under tmp
    tmp: Path


def _source_copy(dest: Path) -> Path:
    """The files git would ship (tracked, and new ones not ignored), copied: a stale
    build/ or egg-info in the checkout cannot leak into the wheel."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                             "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return dest


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    tmp = tmp_path_factory.mktemp("wheel")
    source = _source_copy(tmp / "source")
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(dist), str(source)], check=True, capture_output=True, text=True)
    wheel = next(dist.glob("inductor_flydsl-*.whl"))
    venv = tmp / "venv"
    # torch and the other dependencies come from this interpreter's site-packages; the
    # package itself only from the wheel (--no-deps, and run outside the source tree;
    # --ignore-installed: an editable install of a checkout in those site-packages would
    # otherwise count as installed already, and pip would install nothing).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index",
                    "--ignore-installed", "-q", str(wheel)], check=True)
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"XDG_CACHE_HOME": str(tmp / "xdg_cache"),
                "INDUCTOR_FLYDSL_CACHE_DIR": str(tmp / "plugin_cache"),
                "FLYDSL_RUNTIME_CACHE_DIR": str(tmp / "flydsl_cache")})
    return InstalledWheel(wheel, zipfile.ZipFile(wheel).namelist(), venv, python, env, tmp)


def test_wheel_carries_every_package_and_its_data(installed_wheel: InstalledWheel) -> None:
    names = installed_wheel.names
    packages = {p.parent.relative_to(REPO).as_posix().replace("/", ".")
                for p in (REPO / "inductor_flydsl").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0].replace("/", ".") for n in names
               if n.endswith("/__init__.py")}
    assert packages <= shipped, f"packages missing from the wheel: {packages - shipped}"
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "inductor_flydsl").rglob("*.py")}
    assert modules <= set(names), f"modules missing from the wheel: {modules - set(names)}"
    assert "inductor_flydsl_tuning_db/cpu_smoke_winners.db" in names
    assert "inductor_flydsl_tuning_db/flydsl_compile_catalog.db" in names
    assert "inductor_flydsl_tuning_db/mi355x_predicted.db" in names
    assert {f"inductor_flydsl_templates/{n}.py" for n in (
        "gemm_dense", "gemm_grouped", "gemm_mx", "fused_epilogue")} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "scripts/", "build/"))]


def test_wheel_imports_every_module_and_finds_shipped_dbs(
        installed_wheel: InstalledWheel) -> None:
    tmp, py = installed_wheel.tmp, installed_wheel.python
    env = {**installed_wheel.env, "INDUCTOR_FLYDSL_SHIPPED": "1"}
    out = subprocess.run([str(py), "-I", "-c", CHECK, str(tmp / "user.db")],
                         cwd=tmp, capture_output=True, text=True, check=True, env=env)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    site = str(installed_wheel.venv)
    assert data["package"].startswith(site), data["package"]  # not the editable checkout
    assert data["import_failures"] == []  # every module of the package imports from the wheel
    assert data["templates"].startswith(site)
    assert {Path(p).name for p in data["dbs"]} >= {"cpu_smoke_winners.db",
                                                   "flydsl_compile_catalog.db",
                                                   "mi355x_predicted.db"}
    assert all(p.startswith(site) for p in data["dbs"])
    assert data["winners"], "the shipped winners DB has winners"
    for w in data["winners"]:
        assert w["found"] == w["expected"] and w["source"].startswith(site)
    verify = subprocess.run([str(installed_wheel.venv / "bin" / "inductor-flydsl"), "db",
                             "verify", *data["dbs"]], cwd=tmp, capture_output=True, text=True,
                            env=env)
    assert verify.returncode == 0, verify.stdout


def test_explain_isa_and_emulate_from_the_wheel(installed_wheel: InstalledWheel) -> None:
    """The installed console script cross-compiles one small shape, writes and analyses
    its ISA (ld.lld, llvm-objdump, llvm-mca) and runs it in the ISA emulator."""
    tmp = installed_wheel.tmp
    isa = tmp / "isa"
    proc = subprocess.run([str(installed_wheel.venv / "bin" / "inductor-flydsl"), "explain",
                           "--op", "mm", "--shape", "64x64x64", "--isa", str(isa),
                           "--emulate", "--json"], cwd=tmp, capture_output=True, text=True,
                          env=installed_wheel.env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    data = json.loads(proc.stdout)
    assert data["eligible"] and data["configs"], data
    for config in data["configs"]:
        assert config["emulation"]["ok"], config["emulation"]
        assert Path(config["isa_path"]).parent == isa and Path(config["isa_path"]).is_file()
        assert config["loop_mix"]["mfma_total"] > 0


def test_import_torch_survives_bad_settings_with_the_wheel(
        installed_wheel: InstalledWheel) -> None:
    """The installed entry point (``torch.backends``), every setting bad at once: torch
    imports, the plugin (from the wheel) stays off, one warning names every variable."""
    from tests.core.test_failure_policy import BAD

    bad = {k: v for k, v in BAD.items() if k != "INDUCTOR_FLYDSL"}
    env = {**installed_wheel.env, "INDUCTOR_FLYDSL": "1", **bad}
    proc = subprocess.run([str(installed_wheel.python), "-I", "-c",
                           "import torch, inductor_flydsl; print(inductor_flydsl.__file__);"
                           " print(inductor_flydsl.active_settings())"],
                          cwd=installed_wheel.tmp, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    package, active = proc.stdout.strip().splitlines()[-2:]
    assert package.startswith(str(installed_wheel.venv)) and active == "None"
    warned = [line for line in proc.stderr.splitlines()
              if "Warning:" in line and "inductor_flydsl" in line]
    assert len(warned) == 1, proc.stderr
    assert all(f"{name}={value!r}" in warned[0] for name, value in bad.items()), warned[0]
