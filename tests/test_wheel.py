"""A built wheel, installed (not editable) with its declared dependencies into a fresh
virtual environment that holds only torch: it carries every package (found by setup.py,
not listed), the templates and the shipped tuning DBs; every module imports from it (the
``[report]`` extra's module aside, which says how to get it), ``doctor`` exits 0,
``explain``, ``predict`` and a max-autotune compile work, the plugin layers the shipped DBs
under the user's (missing) DB, and ``explain --isa --emulate`` works from it. The
requirements the wheel declares are checked against the imports of its modules.

The environment (:func:`installed_wheel`, once for the module): a venv without the
system site-packages, whose only other content is torch and its own requirements (as its
metadata lists them, resolved here), linked from this interpreter's site-packages into
one folder named by a ``.pth`` file. Installing torch into each fresh venv instead takes
about 40 s and 0.9 GB here (measured: ``python -m venv v && v/bin/pip install
torch==2.13.0``); the links take well under a second and hold the same files. pip then
installs the wheel with its dependencies for real (from the machine's configured package
sources), so a dependency the wheel forgets to declare is missing there. The wheel
declares no torch requirement (pip must never replace the user's torch: the plugin
checks the release at run time), and nothing it requires brings one."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

CHECK = r"""
import json, sys
import inductor_flydsl
from inductor_flydsl.db.layered import LayeredTuningDB
from inductor_flydsl.db.shipped import shipped_db_paths
from inductor_flydsl.db.store import TuningDB
from inductor_flydsl.provenance.device import DeviceInfo
from inductor_flydsl.problems.problem import Problem
from inductor_flydsl.settings import settings_from_env
from inductor_flydsl.provenance.software import SoftwareInfo, template_version, templates_dir

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
        import_failures.append({"module": info.name, "type": type(exc).__name__,
                                "missing": getattr(exc, "name", None), "message": str(exc)})
print(json.dumps({"package": inductor_flydsl.__file__, "dbs": [str(p) for p in paths],
                  "import_failures": import_failures,
                  "templates": str(templates_dir()), "template_version": template_version(),
                  "winners": winners}))
"""

pytestmark = pytest.mark.slow  # a wheel build, a venv, installs, a compile, a cross-compile


REPORT_MODULE = "inductor_flydsl.report"  # the [report] extra's module
# modules that import the [report] extra's packages (vllm_op_report: inside its functions,
# which only the report and vllm-serving call)
REPORT_MODULES = (REPORT_MODULE, "inductor_flydsl.vllm_op_report")
# the wheel's own top-level packages
OWN = ("inductor_flydsl", "inductor_flydsl_templates", "inductor_flydsl_tuning_db")
# imports no requirement covers, each guarded where it is imported (a missing one only
# turns its feature off): the name, and why it is not declared
OPTIONAL_IMPORTS = {"pynvml": "NVIDIA's busyness probe for sweeps on NVIDIA GPUs "
                              "(noise.py); absent, the probe reports nothing",
                    "vllm": "the plugin's pass joining vLLM's compile "
                            "(inductor/vllm/vllm_passes.py, called by vLLM's own plugin entry "
                            "point, so only where vLLM is)",
                    "rocm_graphs": "validate-rocm's section (g), scripts/rocm_graphs.py of a "
                                   "source checkout (cli/rocm/validate.py says when absent)"}
# imported everywhere, yet never declared: the user's own build, checked at run time
# (inductor/adapter/torch_range.py; importing the package without it says what to install)
USER_PROVIDED = {"torch"}
TORCHES = {"torch", "pytorch-triton-rocm", "triton"}  # what a torch requirement would pull


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


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_closure() -> dict[str, importlib.metadata.Distribution]:
    """torch and every distribution it requires (no extras, markers as here), as this
    interpreter has them installed."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = ["torch"]
    while todo:
        name = todo.pop()
        if _dist_key(name) in seen:
            continue
        dist = importlib.metadata.distribution(name)
        seen[_dist_key(name)] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def link_torch_only(venv: Path, folder: Path) -> list[str]:
    """Make torch (and its requirements) importable in ``venv`` and nothing else of this
    interpreter: each of their top-level files and folders linked into ``folder``, which a
    ``.pth`` file in the venv names. pip and setuptools are the venv's own. Returns the
    distributions linked."""
    folder.mkdir(parents=True)
    linked = []
    for key, dist in sorted(torch_closure().items()):
        if key in ("pip", "setuptools"):
            continue
        tops = {f.parts[0] for f in dist.files or []
                if f.parts[0] not in ("..", "__pycache__") and not f.parts[0].endswith(".pth")}
        for top in sorted(tops):
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (folder / top).exists():
                (folder / top).symlink_to(source)
        linked.append(key)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "torch_only.pth").write_text(str(folder) + "\n")
    return linked


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    tmp = tmp_path_factory.mktemp("wheel")
    source = _source_copy(tmp / "source")
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(dist), str(source)], check=True, capture_output=True, text=True)
    wheel = next(dist.glob("inductor_flydsl-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    link_torch_only(venv, tmp / "torch_only")
    python = venv / "bin" / "python"
    # the wheel and its declared dependencies (torch is there already); run outside the
    # source tree
    install = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              "--disable-pip-version-check", str(wheel)], cwd=tmp,
                             capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("INDUCTOR_FLYDSL")}
    env.update({"XDG_CACHE_HOME": str(tmp / "xdg_cache"),
                "INDUCTOR_FLYDSL_CACHE_DIR": str(tmp / "plugin_cache"),
                "FLYDSL_RUNTIME_CACHE_DIR": str(tmp / "flydsl_cache"),
                "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor_cache")})
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
    # every module of the package imports from the wheel and its declared dependencies;
    # the [report] extra's module (pandas is not installed) says how to get it
    assert [f for f in data["import_failures"] if f["module"] != REPORT_MODULE] == []
    assert data["import_failures"] == [{
        "module": REPORT_MODULE, "type": "ModuleNotFoundError", "missing": "pandas",
        "message": "inductor_flydsl.report needs pandas and matplotlib (pandas is missing): "
                   "pip install pandas matplotlib (or, in a checkout of inductor-flydsl: pip "
                   "install '.[report]')"}]
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


def _console(wheel: InstalledWheel, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(wheel.venv / "bin" / "inductor-flydsl"), *argv],
                          cwd=wheel.tmp, env=wheel.env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_fresh_environment_holds_torch_and_the_declared_dependencies_only(
        installed_wheel: InstalledWheel) -> None:
    """The fixture's environment is what it claims: no pandas (the extra), no numpy but
    through the wheel's own requirement, torch from the links."""
    proc = subprocess.run(
        [str(installed_wheel.python), "-I", "-c",
         "import importlib.metadata as m, json, torch, numpy; print(json.dumps({'dists': "
         "sorted(d.metadata['Name'].lower() for d in m.distributions()), 'torch': "
         "torch.__file__, 'numpy': numpy.__file__}))"],
        cwd=installed_wheel.tmp, env=installed_wheel.env, capture_output=True, text=True,
        check=True)
    data = json.loads(proc.stdout)
    assert "pandas" not in data["dists"] and "matplotlib" not in data["dists"]
    assert data["torch"].startswith(str(installed_wheel.tmp / "torch_only"))
    assert data["numpy"].startswith(str(installed_wheel.venv))  # installed for the wheel


def test_doctor_explain_and_predict_from_the_wheel(installed_wheel: InstalledWheel) -> None:
    doctor = _console(installed_wheel, "doctor")
    assert doctor.returncode == 0, doctor.stdout[-3000:] + doctor.stderr[-2000:]
    assert "No problems: what is configured can work on this machine." in doctor.stdout
    # the ROCm user's commands come with the wheel (issue 52): here, no ROCm to validate
    rocm = _console(installed_wheel, "validate-rocm")
    assert rocm.returncode == 2 and "no ROCm" in rocm.stdout + rocm.stderr, rocm.stderr[-2000:]
    serving = _console(installed_wheel, "vllm-serving", "--help")
    assert serving.returncode == 0, serving.stderr[-2000:]
    explain = _console(installed_wheel, "explain", "--op", "mm", "--shape", "8x4096x4096",
                       "--json")
    assert explain.returncode == 0, explain.stderr[-2000:]
    assert json.loads(explain.stdout)["eligible"]
    predict = _console(installed_wheel, "predict", "--op", "mm", "--shape", "16x4096x4096",
                       "--json")
    assert predict.returncode == 0, predict.stderr[-2000:]
    rows = json.loads(predict.stdout)["predictions"]
    assert rows and all(r["predicted_us"] > 0 for r in rows if "predicted_us" in r)


COMPILE = """
import json, torch
torch._inductor.config.freezing = True
model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                            torch.nn.Linear(96, 32)).eval()
x = torch.randn(16, 64)
with torch.no_grad():
    got = torch.compile(model, mode="max-autotune")(x)
    torch.testing.assert_close(got, model(x))
import inductor_flydsl
print("RESULT " + json.dumps({"file": inductor_flydsl.__file__,
                              "stats": inductor_flydsl.stats().as_dict()}))
"""


def test_max_autotune_compile_from_the_wheel(installed_wheel: InstalledWheel) -> None:
    """``INDUCTOR_FLYDSL=1`` and no code change: a frozen CPU MLP compiled with
    max-autotune records its two GEMMs, and the summary line says so."""
    from tests.conftest import run_for_result

    db = installed_wheel.tmp / "compile.db"
    env = {**installed_wheel.env, "INDUCTOR_FLYDSL": "1", "INDUCTOR_FLYDSL_DB": str(db),
           "INDUCTOR_FLYDSL_LOG": "summary", "INDUCTOR_FLYDSL_SHIPPED": "0"}
    result = run_for_result([str(installed_wheel.python), "-I", "-c", COMPILE], env,
                            timeout=600, what="a max-autotune compile from the wheel")
    assert result["file"].startswith(str(installed_wheel.venv))
    stats = result["stats"]
    assert (stats["misses"], stats["benchmarked"], stats["recorded"]) == (2, 2, 2), stats
    summary = [line for line in result["stderr"].splitlines()
               if line.startswith("inductor_flydsl: compile ")]
    assert len(summary) == 1 and summary[0].endswith(
        ": 0 hits, 2 misses, 2 benchmarked, 2 recorded"), result["stderr"][-3000:]
    assert db.is_file()


def _imports(source: str) -> list[tuple[str, bool]]:
    """The top-level names a module imports absolutely, each with whether the import sits
    inside a ``try`` or ``with`` block (guarded)."""
    found = []

    def visit(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((a.name.split(".")[0], guarded) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module.split(".")[0], guarded))
        inner = guarded or isinstance(node, ast.Try | ast.With)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(source), False)
    return found


def test_declared_requirements_match_the_imports(installed_wheel: InstalledWheel) -> None:
    """Every third-party module a module of the wheel imports is a declared requirement
    (the report module's also through the [report] extra), or an optional import,
    guarded; every declared requirement is imported somewhere."""
    archive = zipfile.ZipFile(installed_wheel.wheel)
    metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    required: dict[str, set[str]] = {"": set()}
    for line in archive.read(metadata).decode().splitlines():
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
            extras = [e for e in ("report", "test") if requirement.marker is not None
                      and requirement.marker.evaluate({"extra": e})
                      and not requirement.marker.evaluate({"extra": ""})]
            required.setdefault(extras[0] if extras else "", set()).add(
                _dist_key(requirement.name))
    providers = importlib.metadata.packages_distributions()  # import name -> distributions
    undeclared, unguarded, used = [], [], set()
    for name in archive.namelist():
        if not name.endswith(".py"):
            continue
        module = name.removesuffix(".py").replace("/", ".")
        allowed = (required[""] | USER_PROVIDED
                   | (required["report"] if module in REPORT_MODULES else set()))
        for top, guarded in _imports(archive.read(name).decode()):
            if top in sys.stdlib_module_names or top in OWN or top == "__future__":
                continue
            if top in OPTIONAL_IMPORTS:
                if not guarded:
                    unguarded.append(f"{module}: {top}")
                continue
            dists = {_dist_key(d) for d in providers.get(top, [top])}
            used |= dists
            if not dists & allowed:
                undeclared.append(f"{module} imports {top} ({', '.join(sorted(dists))})")
    assert undeclared == [], undeclared
    assert unguarded == [], unguarded
    assert required[""] - used == set(), "declared but never imported"
    assert {"numpy", "pyyaml", "sqlite-utils", "rich", "sympy", "flydsl"} <= required[""]


def test_wheel_declares_no_torch_and_pulls_none(installed_wheel: InstalledWheel) -> None:
    """No ``Requires-Dist: torch`` line, in any extra, and none of what the wheel and its
    extras require (as installed here, their own requirements in turn) requires torch:
    ``pip install inductor-flydsl`` leaves the user's torch alone."""
    archive = zipfile.ZipFile(installed_wheel.wheel)
    metadata = archive.read(next(n for n in archive.namelist()
                                 if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.removeprefix("Requires-Dist:").strip()
                for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and not [r for r in requires if _dist_key(Requirement(r).name) in TORCHES]
    seen: dict[str, list[str]] = {}  # distribution -> the chain that requires it
    todo = [(Requirement(r).name, ["inductor-flydsl"]) for r in requires]
    while todo:
        name, chain = todo.pop()
        if _dist_key(name) in seen or _dist_key(name) == "inductor-flydsl":
            continue
        seen[_dist_key(name)] = chain
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed here (a platform-marked one): nothing to follow
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append((requirement.name, [*chain, name]))
    assert {"sqlite-utils", "flydsl", "pandas", "torchao"} <= set(seen)  # extras followed
    assert not {k: v for k, v in seen.items() if k in TORCHES}, "a requirement brings torch"
