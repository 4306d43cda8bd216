#!/usr/bin/env bash
# Installs everything inductor-flydsl needs on a fresh Debian/Ubuntu machine (as root, or
# with sudo available): lld-19 for FlyDSL cross-compiles, the CPU build of torch 2.13.0
# (pinned first: a floating torch requirement would pull a multi-GB CUDA build), then the
# package itself, editable, with its test dependencies. GPU users: install your ROCm or
# CUDA torch first and skip the torch line (INDUCTOR_FLYDSL_KEEP_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

if ! ls /usr/lib/llvm-*/bin/ld.lld >/dev/null 2>&1 && ! command -v ld.lld >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q lld-19
fi

PY="${PYTHON:-python3}"
if [ "${INDUCTOR_FLYDSL_KEEP_TORCH:-0}" != "1" ]; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
"$PY" -c "import torch, flydsl, sqlite_utils, inductor_flydsl; print('installed: torch', torch.__version__, '| inductor_flydsl', inductor_flydsl.__version__)"
