"""A built wheel, installed into a fresh virtual environment, carries the templates and the
shipped tuning DBs, and the plugin layers those DBs under the user's (missing) DB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
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


@pytest.mark.slow
def test_wheel_in_fresh_venv_finds_shipped_dbs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(dist), str(REPO)], check=True, capture_output=True, text=True)
    wheel = next(dist.glob("inductor_flydsl-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    packages = {p.parent.relative_to(REPO).as_posix().replace("/", ".")
                for p in (REPO / "inductor_flydsl").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0].replace("/", ".") for n in names
               if n.endswith("/__init__.py")}
    assert packages <= shipped, f"packages missing from the wheel: {packages - shipped}"
    assert "inductor_flydsl_tuning_db/cpu_smoke_winners.db" in names
    assert "inductor_flydsl_tuning_db/flydsl_compile_catalog.db" in names
    assert {f"inductor_flydsl_templates/{n}.py" for n in (
        "gemm_dense", "gemm_grouped", "gemm_mx", "fused_epilogue")} <= set(names)
    venv = tmp_path / "venv"
    # torch and the other dependencies come from this interpreter's site-packages; the
    # package itself only from the wheel (--no-deps, and run outside the source tree).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True)
    env = {**os.environ, "INDUCTOR_FLYDSL_SHIPPED": "1"}
    out = subprocess.run([str(py), "-I", "-c", CHECK, str(tmp_path / "user.db")],
                         cwd=tmp_path, capture_output=True, text=True, check=True, env=env)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    site = str(venv)
    assert data["package"].startswith(site), data["package"]
    assert data["import_failures"] == []  # every module of the package imports from the wheel
    assert data["templates"].startswith(site)
    assert {Path(p).name for p in data["dbs"]} >= {"cpu_smoke_winners.db",
                                                   "flydsl_compile_catalog.db"}
    assert all(p.startswith(site) for p in data["dbs"])
    assert data["winners"], "the shipped winners DB has winners"
    for w in data["winners"]:
        assert w["found"] == w["expected"] and w["source"].startswith(site)
    verify = subprocess.run([str(venv / "bin" / "inductor-flydsl"), "db", "verify",
                             *data["dbs"]], cwd=tmp_path, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout
