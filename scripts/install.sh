#!/usr/bin/env bash
# Installs everything inductor-flydsl needs on a fresh Debian/Ubuntu machine (as root, or
# with sudo available): lld-19 for FlyDSL cross-compiles, llvm-22 for llvm-mca-22 (main-loop
# estimates; optional), the CPU build of torch 2.13.0 (pinned first: a floating torch
# requirement would pull a multi-GB CUDA build), then the package itself, editable, with
# its test dependencies. GPU users: install your ROCm or
# CUDA torch first and skip the torch line (INDUCTOR_FLYDSL_KEEP_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."

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

PY="${PYTHON:-python3}"
if [ "${INDUCTOR_FLYDSL_KEEP_TORCH:-0}" != "1" ]; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
"$PY" -c "import torch, flydsl, sqlite_utils, inductor_flydsl; print('installed: torch', torch.__version__, '| inductor_flydsl', inductor_flydsl.__version__)"
