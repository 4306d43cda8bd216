"""scripts/install_env.py, the environment checks of scripts/install.sh, in real virtual
environments (``python -m venv --without-pip``, a fraction of a second each): a venv is
installable, an externally managed interpreter (PEP 668) is refused with the way out (and
install.sh stops there before installing anything), a child made the way install.sh makes
``.venv-vllm`` sees a package that only its parent venv has (where
``--system-site-packages`` sees the base interpreter's instead), and the torch checks name
both versions on a mismatch. The torches of these venvs are one-file stand-ins that carry
only a version string: the checks read nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "install_env.py"
EXTERNALLY_MANAGED = Path("/usr/bin/python3")  # Debian 12's, where there is one


def _venv(path: Path, python: str | Path = sys.executable, *extra: str) -> Path:
    subprocess.run([str(python), "-m", "venv", "--without-pip", *extra, str(path)],
                   check=True, timeout=120)
    return path / "bin" / "python"


def _site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _check(python: Path | str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), str(SCRIPT), *argv], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)


def _imports(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True,
                          timeout=120, check=False, cwd="/").returncode == 0


def _fake_torch(site: Path, version: str) -> None:
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(f"__version__ = {version!r}\n")


def test_a_venv_is_installable_and_reports_its_own_site_dir(tmp_path: Path) -> None:
    python = _venv(tmp_path / "parent")
    described = json.loads(_check(python, "describe").stdout)
    assert described["venv"] is True and described["externally_managed"] is None
    assert described["site_dirs"] == [str(_site(tmp_path / "parent"))]
    ok = _check(python, "check-caller")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == (f"installing into {python}: a virtual environment "
                                 f"({tmp_path / 'parent'})")


@pytest.mark.skipif(not (EXTERNALLY_MANAGED.exists() and list(
    Path("/usr/lib").glob("python3.*/EXTERNALLY-MANAGED"))),
    reason="no externally managed /usr/bin/python3 here")
def test_externally_managed_python_stops_install_sh_at_once(tmp_path: Path) -> None:
    refused = _check(EXTERNALLY_MANAGED, "check-caller")
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"error: {EXTERNALLY_MANAGED} is externally managed "
                                     "(PEP 668: /usr/lib/python3"), refused.stderr
    for step in ("make a virtual environment first", "    python3 -m venv .venv",
                 "    PYTHON=.venv/bin/python bash scripts/install.sh",
                 ". .venv/bin/activate && bash scripts/install.sh"):
        assert step in refused.stderr, step
    # install.sh stops on it before installing anything (nothing else runs, nothing printed)
    env = {**os.environ, "PYTHON": str(EXTERNALLY_MANAGED), "INDUCTOR_FLYDSL_SKIP_VLLM": "1",
           "INDUCTOR_FLYDSL_SKIP_NEXT_TORCH": "1", "INDUCTOR_FLYDSL_KEEP_TORCH": "1"}
    script = subprocess.run(["bash", str(REPO / "scripts" / "install.sh")], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert (script.returncode, script.stdout, script.stderr) == (2, "", refused.stderr)
    # a venv of the same interpreter is installable
    venv_python = _venv(tmp_path / "debian_venv", EXTERNALLY_MANAGED)
    assert _check(venv_python, "check-caller").returncode == 0


def test_child_sees_what_only_its_parent_venv_has(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    python = _venv(parent)
    site = _site(parent)
    (site / "only_in_parent_venv.py").write_text("VALUE = 1\n")
    # and what a .pth file of the parent adds (an editable install is one)
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "from_parent_pth.py").write_text("VALUE = 2\n")
    (site / "extra.pth").write_text(str(tmp_path / "extra") + "\n")
    made = _check(python, "make-child", str(tmp_path / "child"), "--without-pip")
    assert made.returncode == 0, made.stderr
    child = tmp_path / "child" / "bin" / "python"
    assert _imports(child, "only_in_parent_venv") and _imports(child, "from_parent_pth")
    # the base interpreter's packages stay out, as they are out of the parent
    assert not _imports(python, "pytest") and not _imports(child, "pytest")
    # what --system-site-packages (the old way) gives instead: the base's, not the parent's
    old = _venv(tmp_path / "old", python, "--system-site-packages")
    assert _imports(old, "pytest") and not _imports(old, "only_in_parent_venv")
    # install.sh keeps a child made here, and makes any other again
    assert _check(python, "child-ok", str(tmp_path / "child")).returncode == 0
    assert _check(python, "child-ok", str(tmp_path / "old")).returncode == 1
    assert _check(sys.executable, "child-ok", str(tmp_path / "child")).returncode == 1


def test_torch_checks_name_both_versions(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    python = _venv(parent)
    _fake_torch(_site(parent), "2.13.0+cpu")
    assert _check(python, "make-child", str(tmp_path / "child"), "--without-pip").returncode == 0
    child = tmp_path / "child"
    assert _check(python, "require-torch", "2.13.0+cpu").returncode == 0
    same = _check(python, "same-torch", str(child / "bin" / "python"))
    assert same.returncode == 0, same.stderr  # the child imports the parent's torch
    # the child's own torch (what pip put there for the tester) shadows the parent's
    _fake_torch(_site(child), "2.14.1+cu130")
    same = _check(python, "same-torch", str(child / "bin" / "python"))
    assert same.returncode == 1
    theirs = os.path.realpath(_site(child) / "torch" / "__init__.py")
    mine = os.path.realpath(_site(parent) / "torch" / "__init__.py")
    assert same.stderr.startswith(
        f"error: {child / 'bin' / 'python'} imports torch 2.14.1+cu130 ({theirs}), not this "
        f"environment's torch 2.13.0+cpu ({mine}) ({python}): its torch must be this "
        f"environment's; delete {child} and run scripts/install.sh again"), same.stderr
    # a caller whose torch is not the one vLLM's CPU build needs
    other = tmp_path / "other"
    other_python = _venv(other)
    _fake_torch(_site(other), "2.14.1+cu130")
    need = _check(other_python, "require-torch", "2.13.0+cpu", "--what", ".venv-vllm")
    assert need.returncode == 1
    assert need.stderr.strip() == (
        f"error: .venv-vllm needs torch 2.13.0+cpu in the environment it is built on, and "
        f"this one ({other_python}) has torch 2.14.1+cu130 "
        f"({os.path.realpath(_site(other) / 'torch' / '__init__.py')}): install it there "
        "first (pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu),"
        " or skip it: INDUCTOR_FLYDSL_SKIP_VLLM=1")
    missing = _check(_venv(tmp_path / "bare"), "require-torch", "2.13.0+cpu")
    assert missing.returncode == 1 and "has no torch (ModuleNotFoundError" in missing.stderr
