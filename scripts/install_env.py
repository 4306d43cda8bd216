"""The environment checks of scripts/install.sh, each a subcommand run by the CALLER's
python (the one install.sh installs into: $PYTHON, or python3, an activated venv's):

- ``check-caller``: can this interpreter be installed into? A virtual environment, or a
  plain interpreter that is not externally managed (PEP 668: an ``EXTERNALLY-MANAGED``
  file in its stdlib dir, as Debian 12's and Ubuntu 24.04's ``python3`` have; pip refuses
  those). Exit 2, saying how to make a venv first, when it cannot.
- ``make-child DIR``: a virtual environment (``.venv-vllm``) built on this one: it sees
  this environment's site-packages (its own first), through a ``.pth`` file that adds each
  of them with ``site.addsitedir`` (so their own ``.pth`` files, editable installs among
  them, work there too). ``python -m venv --system-site-packages`` is not used: it sees the
  BASE interpreter's packages, so from a venv it misses the venv's torch and this package's
  dependencies, and pip then installed a second torch there.
- ``child-ok DIR``: exit 0 when DIR was made by ``make-child`` on this environment (the
  same ``.pth``); exit 1 for anything else (missing, an old ``--system-site-packages``
  one, made on another environment): install.sh then rebuilds it.
- ``require-torch VERSION``: exit 1, naming both versions, when this environment's torch
  is not VERSION.
- ``same-torch PYTHON``: exit 1, naming both versions and files, when PYTHON imports
  another torch than this environment does.

``tests/test_install_env.py`` runs them in real venvs."""

from __future__ import annotations

import argparse
import json
import os
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

PTH_NAME = "_inductor_flydsl_parent.pth"
VENV_HOWTO = ("make a virtual environment first and run the script with its python:\n"
              "    python3 -m venv .venv    (Debian/Ubuntu: apt-get install python3-venv "
              "first)\n"
              "    PYTHON=.venv/bin/python bash scripts/install.sh\n"
              "  or activate it: . .venv/bin/activate && bash scripts/install.sh")


class EnvError(Exception):
    """A check failed; the message names the cause and the fix."""


def is_venv() -> bool:
    return sys.prefix != sys.base_prefix


def externally_managed_marker() -> Path | None:
    """The PEP 668 marker of this interpreter, where it has one (in a venv it does not
    apply: pip installs into the venv)."""
    marker = Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED"
    return marker if marker.is_file() else None


def site_dirs() -> list[str]:
    """This environment's site-packages folders (a venv's own; a venv made with
    --system-site-packages also the base's; the user site where it is on), in the order
    ``sys.path`` has them, existing ones only, each once."""
    candidates = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    found = {os.path.realpath(p): p for p in candidates if os.path.isdir(p)}
    order = [os.path.realpath(p) for p in sys.path if p]
    ranked = sorted(found, key=lambda real: order.index(real) if real in order else len(order))
    return [found[real] for real in ranked]


def caller_problem() -> str | None:
    """Why pip cannot install into this interpreter, or None."""
    if sys.version_info < (3, 11):  # noqa: UP036  (this script may meet an older python)
        return (f"{sys.executable} is Python {sys.version.split()[0]}; inductor-flydsl needs "
                "3.11 or later: run the script with one (PYTHON=/path/to/python3.11)")
    marker = externally_managed_marker()
    if marker is not None and not is_venv():
        return (f"{sys.executable} is externally managed (PEP 668: {marker}): pip will not "
                f"install into it, and this script installs with pip; {VENV_HOWTO}")
    return None


def describe() -> dict[str, object]:
    return {"python": sys.executable, "venv": is_venv(), "prefix": sys.prefix,
            "externally_managed": str(externally_managed_marker() or "") or None,
            "site_dirs": site_dirs()}


def child_site_packages(venv: Path) -> Path:
    """The site-packages folder of a venv of this interpreter's Python version."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def pth_text() -> str:
    """The ``.pth`` file that makes a child venv see this environment's packages."""
    lines = [f"# made by scripts/install_env.py make-child from {sys.executable}:"
             " this environment's site-packages, after the child's own"]
    lines += [f"import site; site.addsitedir({d!r})" for d in site_dirs()]
    return "\n".join(lines) + "\n"


def make_child(venv: Path, with_pip: bool = True) -> Path:
    """A new virtual environment at ``venv`` that sees this environment's packages after
    its own. Returns its python."""
    args = [sys.executable, "-m", "venv", str(venv)]
    if not with_pip:
        args.insert(3, "--without-pip")
    subprocess.run(args, check=True)
    (child_site_packages(venv) / PTH_NAME).write_text(pth_text())
    return venv / "bin" / "python"


def child_ok(venv: Path) -> bool:
    """Whether ``venv`` was made by :func:`make_child` on this environment."""
    pth = child_site_packages(venv) / PTH_NAME
    cfg = venv / "pyvenv.cfg"
    return ((venv / "bin" / "python").exists() and pth.is_file() and cfg.is_file()
            and pth.read_text() == pth_text()
            and "include-system-site-packages = false" in cfg.read_text())


@dataclass(frozen=True)
class TorchFound:
    version: str | None  # None: torch does not import there
    file: str | None
    error: str | None = None

    def text(self) -> str:
        if self.version is None:
            return f"no torch ({self.error})"
        return f"torch {self.version} ({self.file})"


PROBE = ("import json\n"
         "try:\n"
         "    import torch\n"
         "    print(json.dumps([str(torch.__version__), torch.__file__, None]))\n"
         "except Exception as exc:\n"
         "    print(json.dumps([None, None, f'{type(exc).__name__}: {exc}']))\n")


def torch_of(python: str) -> TorchFound:
    """The torch ``python`` imports (a fresh process, outside any source tree)."""
    if os.sep in python:  # a path: absolute (not resolved: a venv's python is a link)
        python = os.path.abspath(python)
    try:
        proc = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                              check=False, cwd="/")
    except OSError as exc:
        return TorchFound(None, None, f"{python} does not run: {exc}")
    if proc.returncode != 0 or not proc.stdout.strip():
        return TorchFound(None, None, f"{python} failed: {proc.stderr.strip()[-500:]}")
    version, file, error = json.loads(proc.stdout.strip().splitlines()[-1])
    real = os.path.realpath(file) if file else None
    return TorchFound(version, real, error)


def require_torch(version: str, what: str) -> None:
    found = torch_of(sys.executable)
    if found.version != version:
        raise EnvError(
            f"{what} needs torch {version} in the environment it is built on, and this one "
            f"({sys.executable}) has {found.text()}: install it there first (pip install "
            f"torch=={version.split('+')[0]} --index-url https://download.pytorch.org/whl/cpu),"
            " or skip it: INDUCTOR_FLYDSL_SKIP_VLLM=1")


def same_torch(child: str) -> None:
    mine, theirs = torch_of(sys.executable), torch_of(child)
    if mine.version is None or (theirs.version, theirs.file) != (mine.version, mine.file):
        raise EnvError(
            f"{child} imports {theirs.text()}, not this environment's {mine.text()} "
            f"({sys.executable}): its torch must be this environment's; delete "
            f"{Path(child).parent.parent} and run scripts/install.sh again")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check-caller", help="can this interpreter be installed into")
    sub.add_parser("describe", help="this environment, as JSON")
    make = sub.add_parser("make-child", help="a venv that sees this environment's packages")
    make.add_argument("venv", type=Path)
    make.add_argument("--without-pip", action="store_true")
    ok = sub.add_parser("child-ok", help="exit 0 when VENV was made by make-child here")
    ok.add_argument("venv", type=Path)
    need = sub.add_parser("require-torch", help="exit 1 unless this torch is VERSION")
    need.add_argument("version")
    need.add_argument("--what", default="this step")
    same = sub.add_parser("same-torch", help="exit 1 unless PYTHON imports this torch")
    same.add_argument("python")
    args = parser.parse_args(argv)
    try:
        if args.command == "check-caller":
            problem = caller_problem()
            if problem is not None:
                print(f"error: {problem}", file=sys.stderr)
                return 2
            kind = (f"a virtual environment ({sys.prefix})" if is_venv()
                    else "not a virtual environment, not externally managed")
            print(f"installing into {sys.executable}: {kind}")
        elif args.command == "describe":
            print(json.dumps(describe()))
        elif args.command == "make-child":
            make_child(args.venv, with_pip=not args.without_pip)
        elif args.command == "child-ok":
            return 0 if child_ok(args.venv) else 1
        elif args.command == "require-torch":
            require_torch(args.version, args.what)
        elif args.command == "same-torch":
            same_torch(args.python)
    except EnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
